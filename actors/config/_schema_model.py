"""The model and its providers, typed: ``model``, ``providers``, ``custom_providers``,
``fallback_providers`` / ``fallback_model``, ``credential_pool``, ``credential_pool_strategies``,
``timeouts``, ``pricing``. Names and nesting are Hermes's (``credential_pool`` mirrors the
pool Hermes keeps in ``auth.json``); defaults are what this build does when a key is unset.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

Seconds = Annotated[float, msgspec.Meta(gt=0)]
Strategy = Literal["fill_first", "round_robin", "random", "least_used", "quota_aware"]


class ModelSection(msgspec.Struct, frozen=True, kw_only=True):
    """``model:`` (a bare string is read as ``default``)."""

    default: str = ""
    """The model name (``HERMES_MODEL`` when empty)."""
    model: str = ""
    """Hermes's other spelling of ``default``; it wins when both are set."""
    provider: str = ""
    """``openai``, ``openrouter``, another built-in, ``custom:<name>``; empty or ``auto``: judged from the keys."""
    base_url: str = ""
    """The OpenAI-compatible endpoint (``OPENAI_BASE_URL`` when empty)."""
    api_key: str = ""
    """Better in ``.env`` (``OPENAI_API_KEY``), or here as ``${NAME}``."""
    key_env: str = ""
    """The variable holding the key."""
    key_cmd: str = ""
    """A command printing a fresh key (expiring credentials)."""
    context_length: Annotated[int, msgspec.Meta(gt=0)] | None = None
    """The context window in tokens, when ``/v1/models`` and the table of known models do not say."""
    streaming: bool = True
    """False: model calls without streaming, for endpoints that refuse it."""
    vision: bool | None = None
    """Whether the model takes images; unset: judged by its name."""
    default_headers: dict[str, str] = {}
    extra_headers: dict[str, str] = {}
    """Sent with every request to this endpoint; values may use ``${NAME}``."""


class ProviderEntry(msgspec.Struct, frozen=True, kw_only=True):
    """A named endpoint: an item of ``custom_providers`` or a value of ``providers``."""

    name: str = ""
    """Addressed as ``custom:<name>`` (lower case, spaces as ``-``); under ``providers`` the key is the name."""
    base_url: str = ""
    url: str = ""
    api: str = ""
    """Older spellings of ``base_url``."""
    api_key: str = ""
    key_env: str = ""
    api_key_env: str = ""
    key_cmd: str = ""
    model: str = ""
    default_model: str = ""
    enabled: bool = True
    default_headers: dict[str, str] = {}
    extra_headers: dict[str, str] = {}


class FallbackEntry(msgspec.Struct, frozen=True, kw_only=True):
    """An item of ``fallback_providers`` (or ``fallback_model``): tried in order when the primary fails."""

    provider: str = ""
    model: str = ""
    base_url: str = ""
    api_key: str = ""
    key_env: str = ""
    api_key_env: str = ""
    key_cmd: str = ""
    default_headers: dict[str, str] = {}
    extra_headers: dict[str, str] = {}


class PoolKey(msgspec.Struct, frozen=True, kw_only=True):
    """One more key for a provider (``credential_pool.<provider>[i]``)."""

    label: str = ""
    api_key: str = ""
    key_env: str = ""
    key_cmd: str = ""
    priority: int = 0
    """Lower ones are used first."""


class TimeoutsSection(msgspec.Struct, frozen=True, kw_only=True):
    """``timeouts:`` in seconds."""

    turn: Seconds = 900.0
    """A whole turn, retries and fallbacks included."""
    request: Seconds | None = None
    """One model call; unset: ``HERMES_API_TIMEOUT``, else 300."""
    stream_read: Seconds | None = None
    """Without a byte before a stream counts as dead; unset: ``HERMES_STREAM_READ_TIMEOUT``, else 120."""


class Price(msgspec.Struct, frozen=True, kw_only=True):
    """``pricing.<model>``: USD per million tokens."""

    input: Annotated[float, msgspec.Meta(ge=0)]
    output: Annotated[float, msgspec.Meta(ge=0)]
