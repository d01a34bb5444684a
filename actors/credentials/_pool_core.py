"""The credential pool's decisions, pure: which key a lease gets, what a report changes.

No clock (``now`` is an argument, Unix time so that a saved cooldown means the same after a
restart), no randomness of its own (the ``random`` strategy hashes the lease id), no I/O.
The state is a frozen msgspec Struct, saved as JSON by the pool actor; it holds no secret.

- :func:`lease` picks a key by the provider's strategy, skipping benched keys (cooling,
  waiting for or running a refresh);
- :func:`report` counts a lease's outcome once and benches the key for the classifier's
  cooldown (never shortening a longer one);
- :func:`reload` takes a new configuration, :func:`restore` a saved state at start;
- :func:`needs_refresh` / :func:`refreshing` / :func:`refreshed`: at most one refresh in
  flight per key, decided here and run by the actor;
- :func:`snapshot` is what /health/detailed and the TUI show.

Invariant: a key is never granted while ``cooling_until > now``, while stale or refreshing. Invariant: each lease id's outcome is counted at most once, as long as the id is
among the last :data:`SETTLED_KEEP` settled ones.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

import msgspec

from protocols._credentials import KeyCondition, KeyStatus, PoolStatus, ReportKey

from ._keys import KeySpec, ProviderSpec

SETTLED_CHUNK = 64
SETTLED_KEEP = 8 * SETTLED_CHUNK
"""Lease ids remembered after they settled, so a repeated report is recognised (FIFO, by chunk)."""
LEASE_TTL = 3600.0
"""Seconds after which a lease never reported stops counting as in flight (its caller died
with it). No model call lives that long: a turn's deadline ends it first. A report that
arrives later still is ignored."""
STATE_VERSION = 2
"""The saved state's layout (1: settled lease ids as a list of objects under ``settled``)."""
REFRESH_RETRY = 60.0
"""Seconds a key whose refresh command failed waits before the next try."""

AUTH_KINDS = frozenset({"auth", "auth_permanent"})
"""Failures that say the key itself is wrong: lifted by a reload or a successful refresh."""

_WORDS: Mapping[str, str] = {
    "auth": "the provider refused the key",
    "auth_permanent": "the provider refused the key for good",
    "billing": "the account has no credit",
    "rate_limit": "rate limited",
    "overloaded": "the provider is overloaded",
    "server": "the provider had a server error",
    "timeout": "the call timed out",
    "transport": "the connection failed",
    "refresh": "its refresh command failed",
}


class Why(msgspec.Struct, frozen=True, kw_only=True):
    """Why a key is benched."""

    kind: str
    status: int | None = None
    message: str = ""


class KeyState(msgspec.Struct, frozen=True, kw_only=True):
    """What the pool knows about one key (no secret)."""

    cooling_until: float = 0.0
    """Unix time the key is back; 0.0: not cooling."""
    why: Why | None = None
    stale: bool = False
    """Its credential expired or was never fetched: run its refresh command before use."""
    refreshing: bool = False
    """A refresh command runs for it now (at most one)."""
    granted: int = 0
    """Leases granted; in-flight ones count from the moment of the grant."""
    successes: int = 0
    failures: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    last_status: int | None = None


class Lease(msgspec.Struct, frozen=True, kw_only=True):
    """A lease granted and not reported yet."""

    key_id: str
    granted_at: float


class PoolState(msgspec.Struct, frozen=True, kw_only=True):
    """One provider's pool: per-key state, leases in flight, recently settled lease ids."""

    version: int = 2
    """:data:`STATE_VERSION` when saved by this code."""
    keys: dict[str, KeyState] = msgspec.field(default_factory=dict)
    """By ``KeySpec.key_id``. Treated as immutable: every change makes a new dict."""
    in_flight: dict[str, Lease] = msgspec.field(default_factory=dict)
    """By lease id, in grant order."""
    settled_ids: tuple[dict[str, str], ...] = ()
    """The last :data:`SETTLED_KEEP` settled lease ids and their keys, in chunks of
    :data:`SETTLED_CHUNK`, oldest first: settling one copies only the newest chunk (version 1
    kept them as a list under ``settled``; a state of that version is read without them)."""
    last_granted: str | None = None
    """The key of the last grant (``round_robin`` continues after it)."""


class Granted(msgspec.Struct, frozen=True, kw_only=True):
    key_id: str
    again: bool = False
    """The lease id was granted before: the same key, not counted twice."""


class Cooling(msgspec.Struct, frozen=True, kw_only=True):
    until: float
    """When the first key is back; 0.0 when none comes back by itself."""
    why: str
    kind: str = ""
    """Why the first key back was benched (the classifier's kind); empty when no key is configured."""


class Pending(msgspec.Struct, frozen=True, kw_only=True):
    """No key now, but a refresh is running: ask again when it ends."""

    refreshing: tuple[str, ...]


LeaseOutcome = Granted | Cooling | Pending


# -- leases -------------------------------------------------------------------------------


def lease(state: PoolState, spec: ProviderSpec, lease_id: str, now: float) -> tuple[PoolState, LeaseOutcome]:
    """Grant ``lease_id`` a key by ``spec.strategy``, or say why none is available."""
    if state.in_flight:  # (nothing to expire without a lease in flight: no call)
        state = _expire(state, now)
    known = state.in_flight.get(lease_id)
    known_key = _settled_key(state.settled_ids, lease_id) if known is None else known.key_id
    if known_key is not None and known_key in state.keys:
        return state, Granted(key_id=known_key, again=True)
    keys_now = state.keys
    ranked = _facts(spec)[0]
    if spec.strategy == "fill_first":  # the first usable key by rank: found without the lists below
        for k in ranked:
            held = keys_now.get(k)
            if held is not None and held.cooling_until <= now and not (held.stale or held.refreshing):
                return _granted(state, lease_id, k, now)
    order = [k for k in ranked if k in keys_now]  # by priority, then configured position
    # Usable: not cooling, not stale, not refreshing (written out here: every model call leases).
    usable = [k for k in order if (held := keys_now[k]).cooling_until <= now and not (held.stale or held.refreshing)]
    if not usable:
        refreshing = tuple(k for k in order if state.keys[k].refreshing)
        if refreshing:
            return state, Pending(refreshing=refreshing)
        return state, _cooling(state, spec, now)
    return _granted(state, lease_id, _pick(spec.strategy, state, order, usable, lease_id), now)


def _granted(state: PoolState, lease_id: str, key_id: str, now: float) -> tuple[PoolState, LeaseOutcome]:
    key = state.keys[key_id]
    keys = dict(state.keys)
    keys[key_id] = msgspec.structs.replace(key, granted=key.granted + 1)
    in_flight = dict(state.in_flight)  # a C-level copy: thousands of leases in flight stay cheap
    in_flight[lease_id] = Lease(key_id=key_id, granted_at=now)
    return msgspec.structs.replace(state, keys=keys, in_flight=in_flight, last_granted=key_id), Granted(key_id=key_id)


_FACTS: dict[int, tuple[ProviderSpec, tuple[str, ...], frozenset[str]]] = {}
"""id(spec) -> (spec, its key ids ranked, the ids with a refresh command): a spec is frozen,
so they are worked out once (by identity: hashing a spec costs more than the work)."""


def _facts(spec: ProviderSpec) -> tuple[tuple[str, ...], frozenset[str]]:
    known = _FACTS.get(id(spec))
    if known is not None and known[0] is spec:
        return known[1], known[2]
    ranked = tuple(k.key_id for _, k in sorted(enumerate(spec.keys), key=lambda item: (item[1].priority, item[0])))
    refreshable = frozenset(k.key_id for k in spec.keys if k.refresh_command)
    if len(_FACTS) >= 64:
        _FACTS.clear()
    _FACTS[id(spec)] = (spec, ranked, refreshable)
    return ranked, refreshable


def _pick(strategy: str, state: PoolState, order: list[str], usable: list[str], lease_id: str) -> str:
    if strategy == "round_robin" and state.last_granted in order:
        start = order.index(state.last_granted) + 1
        for key_id in order[start:] + order[:start]:
            if key_id in usable:
                return key_id
    if strategy == "random":
        return usable[zlib.crc32(lease_id.encode()) % len(usable)]
    if strategy == "least_used":
        return min(usable, key=lambda k: (state.keys[k].granted, order.index(k)))
    return usable[0]  # fill_first: the same key while it works, for the provider's prompt cache


def _cooling(state: PoolState, spec: ProviderSpec, now: float) -> Cooling:
    if not state.keys:
        return Cooling(until=0.0, why=f"{spec.name} has no API key configured; add one to config.yaml or .env")
    parts = []
    for key_spec in spec.keys:
        key = state.keys.get(key_spec.key_id)
        if key is not None:
            parts.append(f"{key_spec.shown} {_benched(key, now)}")
    backs = [k for k in state.keys.values() if k.cooling_until > now]
    first = min(backs, key=lambda k: k.cooling_until, default=None)
    until = first.cooling_until if first is not None else 0.0
    kind = first.why.kind if first is not None and first.why is not None else ""
    if until:
        back = f"the first is back in {_seconds(until - now)}"
    else:
        back = "none comes back by itself: fix the keys in the config and reload"
    count = len(state.keys)
    every = "its only key is" if count == 1 else f"all {count} keys are"
    return Cooling(until=until, why=f"{spec.name}: {every} benched ({'; '.join(parts)}); {back}", kind=kind)


def _benched(key: KeyState, now: float) -> str:
    why = _describe(key.why)
    if key.cooling_until > now:
        return f"{why}, back in {_seconds(key.cooling_until - now)}"
    return "waits for its refresh" if key.stale else why


def _describe(why: Why | None) -> str:
    if why is None:
        return "benched"
    status = f" (HTTP {why.status})" if why.status else ""
    return f"{why.message or _WORDS.get(why.kind, why.kind)}{status}"


def _seconds(delta: float) -> str:
    return f"{max(0.0, delta):.0f} s"


def _expire(state: PoolState, now: float) -> PoolState:
    """Leases older than :data:`LEASE_TTL` stop counting as in flight (their caller is gone)."""
    in_flight = state.in_flight
    oldest = next(iter(in_flight.values()), None)  # in grant order: the first is the oldest
    if oldest is None or now - oldest.granted_at <= LEASE_TTL:
        return state
    old = {lease_id: held.key_id for lease_id, held in in_flight.items() if now - held.granted_at > LEASE_TTL}
    kept = {k: v for k, v in in_flight.items() if k not in old}
    return msgspec.structs.replace(state, in_flight=kept, settled_ids=_settle(state.settled_ids, old))


def _settle(settled: tuple[dict[str, str], ...], more: Mapping[str, str]) -> tuple[dict[str, str], ...]:
    """``settled`` and ``more`` after it; beyond :data:`SETTLED_KEEP`, the oldest chunk goes."""
    chunks = list(settled)
    for lease_id, key_id in more.items():
        if chunks and len(chunks[-1]) < SETTLED_CHUNK:
            chunks[-1] = {**chunks[-1], lease_id: key_id}
        else:
            chunks.append({lease_id: key_id})
    while len(chunks) > SETTLED_KEEP // SETTLED_CHUNK:
        del chunks[0]
    return tuple(chunks)


def _settle_one(settled: tuple[dict[str, str], ...], lease_id: str, key_id: str) -> tuple[dict[str, str], ...]:
    """``_settle(settled, {lease_id: key_id})``, for the one lease id of every report."""
    if settled and len(settled[-1]) < SETTLED_CHUNK:
        return (*settled[:-1], {**settled[-1], lease_id: key_id})
    return (*settled[max(0, len(settled) + 1 - SETTLED_KEEP // SETTLED_CHUNK) :], {lease_id: key_id})


def _settled_key(settled: tuple[dict[str, str], ...], lease_id: str) -> str | None:
    """The key a settled ``lease_id`` had (None: not among the settled)."""
    for chunk in settled:
        key_id = chunk.get(lease_id)
        if key_id is not None:
            return key_id
    return None


def settled_lease_ids(state: PoolState) -> list[str]:
    """The settled lease ids the pool remembers, oldest first."""
    return [lease_id for chunk in state.settled_ids for lease_id in chunk]


# -- reports --------------------------------------------------------------------------------


def report(state: PoolState, spec: ProviderSpec, outcome: ReportKey, now: float) -> PoolState:
    """Count ``outcome`` once and bench its key for ``outcome.cooldown`` seconds.

    A lease id already settled changes nothing. One the state does not know (granted by an
    incarnation that died before saving) still counts, grant included, and benches its key.
    """
    lease_id = outcome.lease_id
    if _settled_key(state.settled_ids, lease_id) is not None:
        return state
    in_flight = state.in_flight
    held = in_flight.get(lease_id)
    key_id = outcome.key_id
    if held is not None:
        key_id = held.key_id
        in_flight = dict(in_flight)  # C-level copy and delete, not a comprehension over every lease
        del in_flight[lease_id]
    settled = _settle_one(state.settled_ids, lease_id, key_id)
    key = state.keys.get(key_id)
    keys = state.keys
    if key is not None:
        keys = dict(keys)
        keys[key_id] = _counted(key, held is None, outcome, key_id in _facts(spec)[1], now)
    return msgspec.structs.replace(state, keys=keys, in_flight=in_flight, settled_ids=settled)


def _counted(key: KeyState, unknown: bool, outcome: ReportKey, refreshable: bool, now: float) -> KeyState:
    key = msgspec.structs.replace(
        key,
        granted=key.granted + (1 if unknown else 0),
        successes=key.successes + (1 if outcome.ok else 0),
        failures=key.failures + (0 if outcome.ok else 1),
        input_tokens=key.input_tokens + max(0, outcome.input_tokens),
        output_tokens=key.output_tokens + max(0, outcome.output_tokens),
        last_status=outcome.status if outcome.status is not None else key.last_status,
    )
    if outcome.ok:
        return key
    why = Why(kind=outcome.kind, status=outcome.status, message=_WORDS.get(outcome.kind, ""))
    if outcome.kind in AUTH_KINDS and refreshable:
        key = msgspec.structs.replace(key, stale=True)  # a fresh credential is the cure
    if outcome.cooldown is not None and outcome.cooldown > 0 and now + outcome.cooldown > key.cooling_until:
        key = msgspec.structs.replace(key, cooling_until=now + outcome.cooldown, why=why)
    return key


# -- configuration ----------------------------------------------------------------------------


def reload(state: PoolState, spec: ProviderSpec) -> PoolState:
    """Take a new configuration: removed keys drop out, new keys start fresh, and benches
    for ``auth`` failures are lifted (the user fixed the key)."""
    keys: dict[str, KeyState] = {}
    for key_spec in spec.keys:
        key = state.keys.get(key_spec.key_id)
        if key is None:
            keys[key_spec.key_id] = _fresh(key_spec)
            continue
        if key.why is not None and key.why.kind in AUTH_KINDS:
            key = msgspec.structs.replace(key, cooling_until=0.0, why=None)
        if not key_spec.refresh_command:
            key = msgspec.structs.replace(key, stale=False, refreshing=False)
        keys[key_spec.key_id] = key
    last = state.last_granted if state.last_granted in keys else None
    return msgspec.structs.replace(state, keys=keys, last_granted=last)


def restore(saved: PoolState | None, spec: ProviderSpec) -> PoolState:
    """The state a starting pool begins with: the saved one (cooldowns and usage kept) for
    the configured keys. A refreshed credential lived only in the dead incarnation's memory,
    so every key with a refresh command is stale again, and no refresh is running."""
    saved = saved or PoolState()
    keys: dict[str, KeyState] = {}
    for key_spec in spec.keys:
        key = saved.keys.get(key_spec.key_id, KeyState())
        keys[key_spec.key_id] = msgspec.structs.replace(key, stale=bool(key_spec.refresh_command), refreshing=False)
    last = saved.last_granted if saved.last_granted in keys else None
    return msgspec.structs.replace(saved, keys=keys, last_granted=last, version=STATE_VERSION)


def _fresh(key_spec: KeySpec) -> KeyState:
    return KeyState(stale=bool(key_spec.refresh_command))


# -- refresh ----------------------------------------------------------------------------------


def needs_refresh(state: PoolState, spec: ProviderSpec, now: float) -> tuple[str, ...]:
    """Keys whose refresh command should start now: stale, not refreshing already, and not
    cooling (an ``auth`` bench does not wait: the refresh is its cure)."""
    due = []
    for key_spec in spec.keys:
        key = state.keys.get(key_spec.key_id)
        if key is None or not key_spec.refresh_command or not key.stale or key.refreshing:
            continue
        if key.cooling_until <= now or (key.why is not None and key.why.kind in AUTH_KINDS):
            due.append(key_spec.key_id)
    return tuple(due)


def refreshing(state: PoolState, key_id: str) -> PoolState:
    """Mark ``key_id``'s refresh as running (leases skip it until :func:`refreshed`)."""
    key = state.keys.get(key_id)
    if key is None:
        return state
    return msgspec.structs.replace(state, keys={**state.keys, key_id: msgspec.structs.replace(key, refreshing=True)})


def refreshed(state: PoolState, key_id: str, new_secret_ok: bool, now: float, *, message: str = "") -> PoolState:
    """A refresh ended. Success makes the key usable and lifts an ``auth`` bench; failure
    benches it for :data:`REFRESH_RETRY` seconds, after which it is refreshed again."""
    key = state.keys.get(key_id)
    if key is None:
        return state
    if new_secret_ok:
        key = msgspec.structs.replace(key, stale=False, refreshing=False)
        if key.why is not None and key.why.kind in AUTH_KINDS:
            key = msgspec.structs.replace(key, cooling_until=0.0, why=None)
    else:
        until = max(key.cooling_until, now + REFRESH_RETRY)
        why = Why(kind="refresh", message=message or _WORDS["refresh"])
        key = msgspec.structs.replace(key, refreshing=False, cooling_until=until, why=why)
    return msgspec.structs.replace(state, keys={**state.keys, key_id: key})


# -- views ------------------------------------------------------------------------------------


def snapshot(state: PoolState, spec: ProviderSpec, now: float) -> PoolStatus:
    """The pool as /health/detailed and the TUI show it: keys by ``shown``, never the secret."""
    held: dict[str, int] = {}
    for lease_held in state.in_flight.values():
        held[lease_held.key_id] = held.get(lease_held.key_id, 0) + 1
    rows = []
    for key_spec in spec.keys:
        key = state.keys.get(key_spec.key_id)
        if key is None:
            continue
        condition = _condition(key, now)
        cooling = key.cooling_until if key.cooling_until > now else 0.0
        rows.append(
            KeyStatus(
                key_id=key_spec.key_id,
                shown=key_spec.shown,
                condition=condition,
                cooling_until=cooling,
                why="" if condition == "available" else _benched(key, now),
                kind=key.why.kind if key.why is not None and condition != "available" else "",
                status=key.why.status if key.why is not None and condition != "available" else None,
                in_flight=held.get(key_spec.key_id, 0),
                granted=key.granted,
                successes=key.successes,
                failures=key.failures,
                input_tokens=key.input_tokens,
                output_tokens=key.output_tokens,
                last_status=key.last_status,
            )
        )
    return PoolStatus(
        provider=spec.name,
        strategy=spec.strategy,
        keys=tuple(rows),
        available=sum(1 for row in rows if row.condition == "available"),
        in_flight=len(state.in_flight),
    )


def _condition(key: KeyState, now: float) -> KeyCondition:
    if key.refreshing:
        return "refreshing"
    if key.cooling_until > now:
        return "cooling"
    if key.stale:
        return "stale"
    return "available"


def bench_changed(old: PoolState, new: PoolState) -> bool:
    """True when a key's bench changed (or keys came or went): such a change is saved at
    once; usage counters and leases may wait for the debounce."""
    if old.keys.keys() != new.keys.keys():
        return True
    for key_id, key in new.keys.items():
        before = old.keys[key_id]
        if (before.cooling_until, before.why) != (key.cooling_until, key.why):
            return True
    return False


def encode_state(state: PoolState) -> str:
    """The state as JSON text, for the store."""
    return msgspec.json.encode(state).decode()


def decode_state(text: str) -> PoolState:
    """A saved state back.

    Raises:
        msgspec.ValidationError, msgspec.DecodeError: the text is not a saved pool state.
    """
    return msgspec.json.decode(text, type=PoolState)
