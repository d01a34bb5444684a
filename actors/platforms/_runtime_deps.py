"""The sessions of a runtime as config.yaml sets them: one builder for ``hermes serve`` and ``hermes chat``.

Reads the providers, approvals and compression from the home, the rest from the typed
configuration (:mod:`actors.agent._session_settings`), resolves the platform's toolsets to
tools, and returns the :class:`SessionDeps` the platform's sessions share (``hermes serve``
builds one for the API server and one per enabled chat platform, :func:`gateway_deps`). A
setting that cannot be used is a :class:`ConfigError` saying which key and what it takes.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

from actors import UsageError
from actors.agent import ConfigError, HubRegistry, MachineConfig, ModelClients, SessionDeps, ToolSpec, load_approval_settings, reader_opener
from actors.agent._compression_settings import load_compression
from actors.agent._node import NodeIdentity
from actors.agent._providers import primary_settings, with_chain
from actors.agent._session_settings import SessionSettings, session_settings
from actors.agent._tokens import tools_size
from actors.config import LoadedConfig
from actors.config._env import read_dotenv
from actors.credentials._settings import load_providers
from actors.hooks import Hooks
from actors.memory import MemoryOptions, check_provider
from actors.store import StoreError, store_location

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class Platform:
    """Who the sessions talk to."""

    name: str
    """The key of ``platform_toolsets`` (``cli``, ``api_server``)."""
    source: str
    """The sessions' ``source`` in the store."""
    hint: str
    """The system prompt's line on how replies are shown."""


GATEWAY_PLATFORMS = {
    "telegram": Platform(
        name="telegram",
        source="telegram",
        hint=(
            "Replies are shown as Telegram messages, mostly read on a phone: keep them short; bold, italic, code and links render, "
            "tables and HTML do not. A line MEDIA:<path> sends that file along."
        ),
    ),
    "matrix": Platform(
        name="matrix",
        source="matrix",
        hint="Replies are shown as Matrix messages in a chat client: Markdown renders (bold, italic, lists, code blocks, links); keep them conversational.",
    ),
    "webhook": Platform(
        name="webhook",
        source="webhook",
        hint=(
            "The reply is posted to a webhook as plain text, read by a program or a person later; nobody can answer back, "
            "so do not ask questions: finish with what you were given."
        ),
    ),
}
"""The gateway's platforms as their sessions see them: ``platform_toolsets.<name>`` (default the
``hermes-<name>`` preset), the ``source`` Hermes records for them, how their replies are shown."""


def configured_deps(
    home: Path,
    env: Mapping[str, str],
    loaded: LoadedConfig,
    platform: Platform,
    *,
    yolo: bool = False,
    hubs: HubRegistry | None = None,
    clients: ModelClients | None = None,
    hooks: Hooks | None = None,
) -> SessionDeps:
    """The sessions' shared dependencies for ``platform``; raise :class:`ConfigError` saying what to fix."""
    raw = loaded.raw  # config.yaml read once, by load_config: every reader takes the same mapping
    chain = load_providers(home, env=env, config=raw)
    model = primary_settings(chain, home, env, raw)
    approvals = load_approval_settings(home, env=env, yolo=yolo, config=raw)
    compression = load_compression(home, model.model, raw)
    settings = session_settings(loaded.config, platform.name, file=loaded.file, cwd=Path.cwd())
    tools = platform_tools(settings, loaded.file, platform.name)
    memory = memory_options(loaded)
    if memory.provider == "store" and "fact_store" not in tools:  # the provider's tool comes with it
        import actors.tools as tools_package

        tools = {**tools, **tools_package.REGISTRY.specs(["fact_store"])}
    config = MachineConfig(
        traits={name: spec.traits for name, spec in tools.items()},
        max_iterations=settings.max_iterations,
        compression=compression.settings,
        context_length=compression.context_length,
        summary_model=compression.summary_model,
        tools_size=tools_size([spec.schema() for spec in tools.values()]),
    )
    if settings.max_attempts is not None:
        config = dataclasses.replace(config, max_attempts=settings.max_attempts)
    try:  # HERMES_DATABASE_URL / database.url: a Postgres store; else state.db here
        store = store_location(home, {**read_dotenv(loaded.dotenv), **env}, loaded.config.database.url)
    except StoreError as exc:
        raise ConfigError(str(exc)) from None
    deps = SessionDeps(
        hubs=hubs or HubRegistry(),
        open_reader=reader_opener(store),
        model=model,
        clients=clients or ModelClients(),
        tools=tools,
        config=config,
        source=platform.source,
        platform_hint=platform.hint,
        home=home,
        workdir=settings.workdir,
        store_file=store,
        approvals=approvals,
        tool_settings=settings.tools,
        delegation=settings.delegation,
        hooks=hooks,
        nudges=settings.nudges,
        memory=memory,
        node=NodeIdentity.configured(cluster.node_id, cluster.lease_ttl) if (cluster := loaded.config.cluster).enabled else None,
    )
    return with_chain(deps, chain)


def gateway_deps(
    home: Path,
    env: Mapping[str, str],
    loaded: LoadedConfig,
    names: Iterable[str],
    base: SessionDeps,
    *,
    yolo: bool = False,
) -> dict[str, SessionDeps]:
    """One deps per chat platform of ``names`` (those in :data:`GATEWAY_PLATFORMS`), sharing
    ``base``'s hubs, model clients and hooks, and its MCP servers' tools over the platform's own."""
    found = {}
    for name in names:
        platform = GATEWAY_PLATFORMS.get(name)
        if platform is not None:
            deps = configured_deps(home, env, loaded, platform, yolo=yolo, hubs=base.hubs, clients=base.clients, hooks=base.hooks)
            found[name] = with_live_tools(base, deps)
    return found


def with_live_tools(source: SessionDeps, deps: SessionDeps) -> SessionDeps:
    """``deps`` with ``source``'s MCP servers' tools (``actors.tools.mcp.LiveTools``) read live over
    its own built-in ones; ``deps`` as it is when ``source`` has no live table."""
    over = getattr(source.tools, "over", None)
    if over is None:
        return deps
    tools = over(deps.tools)
    return dataclasses.replace(deps, tools=tools, config=dataclasses.replace(deps.config, traits=tools.traits()))


HERMES_MEMORY_PLUGINS = frozenset({"honcho", "mem0", "holographic", "supermemory", "hindsight", "retaindb", "byterover", "openviking"})
"""Hermes's external memory plugins (``plugins/memory/``): a config.yaml written for Hermes may
name one; this build has none of them, so it runs the built-in memory and says so."""


def memory_options(loaded: LoadedConfig) -> MemoryOptions:
    """``memory.provider`` and ``memory.prefetch_timeout``; one of Hermes's plugins this build lacks
    is logged and left out; any other unknown provider (a typo) is a :class:`ConfigError`."""
    section = loaded.config.memory
    if section.provider in HERMES_MEMORY_PLUGINS:
        log.warning(
            "%s: memory.provider: %s is a Hermes memory plugin this build does not have; the built-in memory (MEMORY.md, USER.md) runs alone",
            loaded.file,
            section.provider,
        )
        return MemoryOptions(provider="", prefetch_timeout=section.prefetch_timeout)
    try:
        check_provider(section.provider)
    except UsageError as exc:
        raise ConfigError(f"{loaded.file}: memory.provider: {exc}") from None
    return MemoryOptions(provider=section.provider, prefetch_timeout=section.prefetch_timeout)


def platform_tools(settings: SessionSettings, file: Path, platform: str) -> dict[str, ToolSpec]:
    """The tools of the platform's toolsets, less the disabled ones and those config.yaml turned off."""
    import actors.tools as tools_package  # importing registers the tools

    key = f"platform_toolsets.{platform}" if platform != "cli" else "toolsets"
    try:
        names = tools_package.resolve_toolsets(settings.toolsets)
    except UsageError as exc:
        raise ConfigError(f"{file}: {key}: {exc}") from None
    try:
        removed = set(tools_package.resolve_toolsets(settings.disabled_toolsets))
    except UsageError as exc:
        raise ConfigError(f"{file}: agent.disabled_toolsets: {exc}") from None
    memory = settings.tools.memory
    if not memory.memory_enabled and not memory.user_enabled:
        removed.add("memory")
    if settings.delegation.spawn_depth < 1:
        removed.add("delegate_task")
    return tools_package.REGISTRY.specs([name for name in names if name not in removed])
