"""What a credential pool is made of: its provider, its keys and how it picks one.

Plain data, read from config.yaml / .env by ``_settings.py`` and handed to the pool actor.
A key is shown only by its label and last four characters (:attr:`KeySpec.shown`).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

Strategy = Literal["fill_first", "round_robin", "random", "least_used"]
STRATEGIES: tuple[Strategy, ...] = ("fill_first", "round_robin", "random", "least_used")


@dataclasses.dataclass(frozen=True, slots=True)
class KeySpec:
    """One API key of a provider."""

    key_id: str
    """Stable within the pool (the label, else ``key-<n>`` by position); state is kept under it."""
    api_key: str = dataclasses.field(repr=False)
    """The secret: left out of ``repr`` (so of logs and of ``ReloadPool``'s repr)."""
    label: str = ""
    priority: int = 0
    """Lower first (``fill_first`` order); ties keep the configured order."""
    refresh_command: str | None = None
    """A command whose stdout is a fresh key (expiring credentials); None: the key does not expire."""

    @property
    def shown(self) -> str:
        """How the key appears in logs, events, /health and the TUI: never the whole secret."""
        tail = self.api_key[-4:] if len(self.api_key) >= 8 else "…"
        return f"{self.label or self.key_id} (…{tail})"


@dataclasses.dataclass(frozen=True, slots=True)
class ProviderSpec:
    """One provider: where to call, which model, and the keys of its pool."""

    name: str
    """``openai``, ``openrouter``, ``anthropic``, ``custom:<name>`` ... (the pool's path is ``/credentials/<name>``)."""
    base_url: str
    model: str
    keys: tuple[KeySpec, ...]
    strategy: Strategy = "fill_first"
    extra_headers: tuple[tuple[str, str], ...] = ()
