"""The credential pool's invariants (simulator), checked against what the simulated pool shows.

- ``lease_unanswered``: every ``LeaseKey`` a session sends is answered within ``lease_bound``
  seconds, pool crashes included (only the death of the process excuses it: the request
  died with its sender).
- ``benched_key_granted``: a key is never granted while the pool's state shows it benched.
- ``usage_double_counted`` / ``usage_uncounted``: each key's grants and outcomes (successes +
  failures) as the pool shows them equal the distinct lease ids it granted with the key or
  was told the outcome of, counted from the state it runs from (a crash takes back what
  came after the save it restarts from, and no more).
- ``model_key_not_leased``: a model call runs only on the key the pool granted its lease,
  and a lease serves one call.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable, Mapping

from protocols import ReportKey

from ..credentials._pool_core import KeyState

Violate = Callable[[str, str, str, float], None]
"""``Invariants.violate``: (rule, session id, detail, at)."""


class _Ledger:
    """What a credential pool should count: the distinct lease ids it granted with each key or
    was told the outcome of, since the state it runs from. Appended to a log, so that a return
    to a saved state takes back exactly what came after the save."""

    __slots__ = ("granted", "grants", "log", "outcomes", "reported", "saved")

    def __init__(self) -> None:
        self.granted: dict[str, str] = {}
        """Lease id -> key id, for every grant the pool's state should count."""
        self.reported: set[str] = set()
        self.grants: collections.Counter[str] = collections.Counter()
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.log: list[tuple[bool, str, str]] = []
        """(an outcome, not a grant; lease id; key id), in the order the pool counted them."""
        self.saved = 0
        """How much of the log the saved state holds."""

    def grant(self, lease_id: str, key_id: str) -> None:
        if lease_id not in self.granted:
            self.granted[lease_id] = key_id
            self.grants[key_id] += 1
            self.log.append((False, lease_id, key_id))

    def outcome(self, lease_id: str, key_id: str) -> None:
        if lease_id in self.reported:
            return
        key_id = self.granted.get(lease_id, key_id)
        self.reported.add(lease_id)
        self.outcomes[key_id] += 1
        self.log.append((True, lease_id, key_id))
        self.grant(lease_id, key_id)  # a lease the state does not know counts its grant too

    def revert(self) -> None:
        log = self.log
        while len(log) > self.saved:
            outcome, lease_id, key_id = log.pop()
            if outcome:
                self.reported.discard(lease_id)
                self.outcomes[key_id] -= 1
            else:
                del self.granted[lease_id]
                self.grants[key_id] -= 1


class PoolChecks:
    """The pool's part of :class:`~actors.chaos._invariants.Invariants` (its ``pool``).

    Args:
        violate: Where a violation goes.
        counts: The checker's counters (``leases``, ``pool_restarts``).
        lease_bound: A ``LeaseKey`` must be answered within this many seconds.
    """

    def __init__(self, violate: Violate, counts: collections.Counter[str], lease_bound: float) -> None:
        self.violate = violate
        self.counts = counts
        self.lease_bound = lease_bound
        self._waits: dict[str, tuple[str, float]] = {}
        """Leases sent and not answered: lease id -> (session id, sent at)."""
        self._order: collections.deque[tuple[float, str]] = collections.deque()
        """(sent at, lease id), oldest first; answered ones are dropped when they reach the head."""
        self._leased: dict[str, str] = {}
        """Lease id -> the key the pool granted it (what sessions were told; never taken back)."""
        self._used: set[str] = set()
        self._ledger = _Ledger()
        self._usage_reported: set[tuple[str, str]] = set()
        self.next_due = math.inf
        """The earliest moment a lease sent since the last :meth:`advance` may go unanswered."""

    def advance(self, now: float) -> float:
        """Report leases unanswered past their bound; returns when the next one may be."""
        if self._order:
            self._check(now)
        self.next_due = self._order[0][0] + self.lease_bound if self._order else math.inf
        return self.next_due

    def sender_died(self, session_id: str) -> None:
        """The process died: the leases ``session_id`` sent died with it, unanswered."""
        for lease_id in [k for k, (sender, _) in self._waits.items() if sender == session_id]:
            del self._waits[lease_id]

    def finish(self, now: float) -> None:
        for lease_id, (session_id, _) in self._waits.items():
            self.violate("lease_unanswered", session_id, f"lease {lease_id} was never answered", now)

    def lease_sent(self, session_id: str, lease_id: str, now: float) -> None:
        """A session told its pool ``LeaseKey``: an answer is owed within ``lease_bound``."""
        self.counts["leases"] += 1
        self._waits[lease_id] = (session_id, now)
        self._order.append((now, lease_id))
        if now + self.lease_bound < self.next_due:
            self.next_due = now + self.lease_bound

    def _check(self, now: float) -> None:
        order, waits = self._order, self._waits
        while order:
            sent, lease_id = order[0]
            waiting = waits.get(lease_id)
            if waiting is not None and waiting[1] == sent:
                if now - sent <= self.lease_bound:
                    return
                del waits[lease_id]
                self.violate("lease_unanswered", waiting[0], f"lease {lease_id} was not answered within {self.lease_bound:g} s", now)
            order.popleft()

    def answered(self, session_id: str, lease_id: str, key_id: str | None, benched_until: float, key: KeyState | None, now: float) -> None:
        """The pool answered a lease: it granted ``key_id`` (whose bench, in the state it decided
        from, ended at ``benched_until``; ``key``: the key as the pool shows it after), or None:
        no key was available."""
        if self._waits.pop(lease_id, None) is not None and self._order[0][1] == lease_id:
            self._order.popleft()  # answered in order, as nearly always: no later look needed
        if key_id is None or key is None:
            return
        known = self._leased.get(lease_id)
        if known is None:
            if benched_until > now:
                self.violate("benched_key_granted", session_id, f"lease {lease_id} was granted {key_id}, benched for {benched_until - now:.3f} s more", now)
            self._leased[lease_id] = key_id
        self._ledger.grant(lease_id, key_id)
        self.usage(session_id, key_id, key, now)

    def reported(self, session_id: str, outcome: ReportKey, keys: Mapping[str, KeyState], now: float) -> None:
        """The pool handled ``outcome`` (``keys``: its keys as it shows them after)."""
        ledger = self._ledger
        ledger.outcome(outcome.lease_id, outcome.key_id)
        key_id = ledger.granted[outcome.lease_id]
        key = keys.get(key_id)
        if key is not None:
            self.usage(session_id, key_id, key, now)

    def mark(self) -> int:
        """Where a save sent now stands in the ledger (give it to :meth:`saved` at its commit)."""
        return len(self._ledger.log)

    def saved(self, mark: int) -> None:
        self._ledger.saved = mark

    def reverted(self, keys: Mapping[str, KeyState], now: float) -> None:
        """The pool (re)started from its saved state (``keys``): what came after the save is forgotten."""
        self.counts["pool_restarts"] += 1
        self._ledger.revert()
        for key_id, key in keys.items():
            self.usage("-", key_id, key, now)

    def usage(self, session_id: str, key_id: str, key: KeyState, now: float) -> None:
        """What the pool shows of ``key_id`` now must match the ledger: grants and outcomes."""
        ledger = self._ledger
        granted, outcomes = key.granted, key.successes + key.failures
        if granted == ledger.grants[key_id] and outcomes == ledger.outcomes[key_id]:
            return
        for what, shown, due in (("grants", granted, ledger.grants[key_id]), ("outcomes", outcomes, ledger.outcomes[key_id])):
            rule = "usage_double_counted" if shown > due else "usage_uncounted"
            if shown != due and (rule, key_id) not in self._usage_reported:
                self._usage_reported.add((rule, key_id))
                self.violate(rule, session_id, f"the pool shows {shown} {what} for {key_id}, but {due} distinct lease ids were counted", now)

    def model_key(self, session_id: str, lease_id: str, key_id: str, now: float) -> None:
        """A model call starts on ``key_id`` under lease ``lease_id``."""
        granted = self._leased.get(lease_id)
        if granted != key_id:
            told = f"granted it {granted}" if granted else "never granted it"
            self.violate("model_key_not_leased", session_id, f"a model call ran on {key_id} under lease {lease_id}; the pool {told}", now)
        elif lease_id in self._used:
            self.violate("model_key_not_leased", session_id, f"lease {lease_id} served a second model call", now)
        self._used.add(lease_id)
