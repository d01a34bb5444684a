"""``/memory``: the built-in provider's actor and at most one external provider's, under one supervisor.

``memory.provider: <name>`` in config.yaml chooses the external one (as in Hermes); unset, the
built-in provider runs alone. Providers are found by name in :data:`PROVIDERS` (``store`` is
ours; :func:`register_provider` adds one, as a plugin would).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from actors import UsageError
from supervisor import ChildSpec, Intensity, Restart, Supervisor

from ._actor import ProviderActor
from ._builtin import BuiltinProvider
from ._facts import StoreFactsProvider
from ._health import MemoryHealth
from ._provider import MemoryProvider, ProviderEnv
from ._store import MemorySettings

MEMORY_PATH = "/memory"
BUILTIN_PATH = "/memory/builtin"
DEFAULT_PREFETCH_TIMEOUT = 0.5

ProviderFactory = Callable[[ProviderEnv], MemoryProvider]
PROVIDERS: dict[str, ProviderFactory] = {"store": StoreFactsProvider}
"""External providers by the name ``memory.provider`` takes."""

MEMORY_INTENSITY = Intensity(max_restarts=10, within=10.0)
"""A provider that keeps crashing is restarted often before ``/memory`` gives up (the sessions go on without it)."""


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make ``memory.provider: <name>`` start ``factory``'s provider."""
    if name == "builtin":
        raise UsageError("'builtin' is the built-in memory's name; register the provider under another")
    PROVIDERS[name] = factory


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryOptions:
    """``memory.provider`` and ``memory.prefetch_timeout``, and where the providers' status goes."""

    provider: str = ""
    """The external provider's name; empty: the built-in one only."""
    prefetch_timeout: float = DEFAULT_PREFETCH_TIMEOUT
    """Seconds a turn waits for the providers' recalled context before it goes on without it."""
    health: MemoryHealth = dataclasses.field(default_factory=MemoryHealth)

    def paths(self) -> tuple[str, ...]:
        """Every provider actor's path, the built-in one first."""
        return (BUILTIN_PATH, *((f"{MEMORY_PATH}/{self.provider}",) if self.provider else ()))

    def external_path(self) -> str | None:
        return f"{MEMORY_PATH}/{self.provider}" if self.provider else None


def check_provider(name: str) -> None:
    """Raise :class:`UsageError` when ``name`` is no known provider."""
    if name and name not in PROVIDERS:
        known = ", ".join(sorted(PROVIDERS)) or "none"
        raise UsageError(f"unknown memory provider {name!r} (known: {known}); remove memory.provider to use the built-in memory only")


def memory_spec(options: MemoryOptions, home: Path, settings: MemorySettings, store_file: Path | None, *, store_path: str = "/store") -> ChildSpec:
    """``/memory``: put it after ``/store`` (the ``store`` provider writes through it) and before ``/sessions``."""
    check_provider(options.provider)
    env = ProviderEnv(home=home, settings=settings, store_file=store_file)
    external = options.external_path()
    notify = (external,) if external is not None else ()
    children = [ChildSpec(id="builtin", actor=ProviderActor, args=(BuiltinProvider, env, options.health), kwargs={"notify": notify}, restart=Restart.PERMANENT)]
    if options.provider:
        factory = PROVIDERS[options.provider]
        children.append(
            ChildSpec(
                id=options.provider, actor=ProviderActor, args=(factory, env, options.health), kwargs={"store_path": store_path}, restart=Restart.PERMANENT
            )
        )
    return ChildSpec(id="memory", actor=Supervisor, args=(tuple(children),), kwargs={"intensity": MEMORY_INTENSITY}, shutdown=10.0)
