"""Messages of the credential pools: one pool actor per provider leases API keys.

A caller (a session about to call a model) tells the provider's pool :class:`LeaseKey`; the
pool answers at once with :class:`KeyLeased` or :class:`NoKeyAvailable` (or, while the only
usable keys are being refreshed, as soon as a refresh ends). When the call is over, the
caller tells :class:`ReportKey` (fire and forget): the outcome, the classifier's cooldown and
the tokens used. A lease id is the caller's name for one use of a key: unique, and reported
once (a second report of it changes nothing).

``KeyLeased.api_key`` is a **secret**: it is hidden from ``repr`` (so from logs), and a
``KeyLeased`` must never be encoded or stored. Everything else here is safe to show: keys
appear only as ``shown`` (label and last four characters).

``reply_to`` is **local-only**, as in ``protocols._store``: an in-process address (anything
with ``.tell``), typed ``Any``, not encodable. ``ReloadPool.spec`` is local-only too: a
``ProviderSpec`` (``actors.credentials``), which this package cannot import.

The pool keeps its state in the store (``SavePoolState``, answered ``PoolStateSaved`` or
``StoreFailed``), so cooldowns and usage outlive a restart of the pool or of the process.
"""

from __future__ import annotations

from typing import Any, Literal

from ._base import Message
from ._reactor import WaitFinished
from ._store import StoreFailed, StoreStatistics


class LeaseKey(Message, frozen=True, kw_only=True):
    """Ask the pool for a key. Answered with :class:`KeyLeased` or :class:`NoKeyAvailable`.

    Asking again with a lease id the pool already granted answers the same key again
    without counting a second grant (a retried or duplicated request is harmless).
    """

    lease_id: str
    """The caller's unique name for this use of a key (e.g. ``<session>/<turn>/<call>.<attempt>``)."""
    session_id: str = ""
    """Who asks, for logs."""
    reply_to: Any = None
    """Local-only: where the answer is told (anything with ``.tell``); not encodable."""


class KeyLeased(Message, frozen=True, kw_only=True):
    """A key to use for one call; report its outcome with :class:`ReportKey` (same ``lease_id``)."""

    lease_id: str
    provider: str
    key_id: str
    api_key: str
    """The secret itself: hidden from ``repr``; never log, encode or store this message."""
    shown: str
    """How to name the key in logs and events (label and last four characters)."""

    def __repr__(self) -> str:
        return f"KeyLeased(lease_id={self.lease_id!r}, provider={self.provider!r}, key_id={self.key_id!r}, api_key=<hidden>, shown={self.shown!r})"

    def __rich_repr__(self) -> list[tuple[str, Any]]:
        """Rich and Textual pretty-print through this (msgspec's own would show the secret)."""
        return [("lease_id", self.lease_id), ("provider", self.provider), ("key_id", self.key_id), ("api_key", "<hidden>"), ("shown", self.shown)]


class NoKeyAvailable(Message, frozen=True, kw_only=True):
    """Every key of the provider is benched (cooling down), or none is configured."""

    lease_id: str
    provider: str
    until: float
    """Unix time the first key is back; 0.0 when none comes back by itself (no key is configured)."""
    reason: str
    """Which keys cool, why, and when the first is back, in words."""
    kind: str = ""
    """Why the first key back was benched (the classifier's kind: ``rate_limit``, ``auth``,
    ``billing``...); empty when no key is configured. A session waits only for a rate limit."""


class ReportKey(Message, frozen=True, kw_only=True):
    """How a leased key did (fire and forget). Reported once per lease id; repeats are ignored."""

    lease_id: str
    key_id: str
    ok: bool
    kind: str = ""
    """The classifier's kind of failure (``auth``, ``auth_permanent``, ``billing``,
    ``rate_limit``, ``overloaded``, ``server``, ``timeout``, ``transport``,
    ``context_overflow``, ``payload_too_large``, ``model_not_found``, ``content_filter``,
    ``bad_request``, ``malformed``, ``thinking_signature``); empty when ``ok``."""
    status: int | None = None
    """The HTTP status, if there was one."""
    cooldown: float | None = None
    """Seconds to bench the key, as the classifier computed them (401: 300, 402: 3600,
    429: the provider's reset hint, else 60); None: do not bench it."""
    input_tokens: int = 0
    output_tokens: int = 0


class PoolStatusRequest(Message, frozen=True, kw_only=True):
    """Ask for the pool's :class:`PoolStatus` (told to ``reply_to`` and returned to ``ask``).

    A pool still loading its saved state answers once the load ends (an ``ask`` made before
    then returns None): a status before it would show cooldowns the pool does not know yet.
    """

    reply_to: Any = None
    """Local-only: where the answer is told (anything with ``.tell``); not encodable."""


KeyCondition = Literal["available", "cooling", "refreshing", "stale"]
"""``stale``: waits for its refresh command (a credential that expired or was never fetched)."""


class KeyStatus(Message, frozen=True, kw_only=True):
    """One key as /health/detailed and the TUI show it: never the secret."""

    key_id: str
    shown: str
    condition: KeyCondition
    cooling_until: float = 0.0
    """Unix time it is back (0.0: not cooling)."""
    why: str = ""
    """Why it is benched, in words (empty when available)."""
    kind: str = ""
    status: int | None = None
    in_flight: int = 0
    granted: int = 0
    successes: int = 0
    failures: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    last_status: int | None = None


class PoolStatus(Message, frozen=True, kw_only=True):
    """A moment's view of one provider's pool."""

    provider: str
    strategy: str
    keys: tuple[KeyStatus, ...] = ()
    available: int = 0
    """Keys that could be leased now."""
    in_flight: int = 0


class ReloadPool(Message, frozen=True, kw_only=True):
    """Take a new configuration (no reply): removed keys drop out, new keys start fresh,
    and ``auth`` benches are lifted (the user fixed the key)."""

    spec: Any
    """Local-only: an ``actors.credentials.ProviderSpec`` for this pool's provider; not encodable."""


class PoolSaveDue(Message, frozen=True, kw_only=True):
    """The pool's own timer: the debounce delay of a usage save ran out."""

    seq: int


class PoolSaveTimedOut(Message, frozen=True, kw_only=True):
    """The pool's own timer: the store did not answer save number ``seq`` in time."""

    seq: int


# -- the store's part ------------------------------------------------------------------------


class SavePoolState(Message, frozen=True, kw_only=True):
    """Replace the saved state of one provider's pool (a store writer command).

    Answered with :class:`PoolStateSaved` (committed) or ``StoreFailed``.
    """

    provider: str
    state: str
    """The pool's state as JSON text (no secrets: key ids, cooldowns, usage, lease ids)."""
    saved_at: float
    """Unix time."""
    token: str = ""
    reply_to: Any = None
    """Local-only: where the reply is told (anything with ``.tell``); not encodable."""


class PoolStateSaved(Message, frozen=True, kw_only=True):
    """The pool's state is committed."""

    provider: str
    token: str = ""


PoolInbox = (
    LeaseKey | ReportKey | PoolStatusRequest | ReloadPool | WaitFinished | PoolSaveDue | PoolSaveTimedOut | PoolStateSaved | StoreFailed | StoreStatistics
)
"""What a credential pool actor takes: the commands above, its waits (the load, refresh
commands), its own timers, and the store's answers (saves, the start barrier)."""
