"""What to do about a job whose next occurrence has come (pure).

``decide(schedule, next_at, now, grace)`` looks at every occurrence from ``next_at`` up to
``now``: the latest one fires if it is at most ``grace`` seconds old; every other one is
missed (they are recorded together, as one row at the latest missed instant, so a server
that was down a week does not write ten thousand rows for a job that runs every minute).

Invariant: an occurrence is either fired or counted missed, never both, never neither; the
next occurrence returned is after ``now``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from ._schedule import Interval, Schedule, next_after

UTC = dt.UTC

_MAX_STEPS = 100_000
"""Occurrences walked one by one before an interval is jumped arithmetically (cron only walks)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Missed:
    count: int
    first: float
    last: float

    def describe(self) -> str:
        first = dt.datetime.fromtimestamp(self.first, UTC).isoformat(timespec="seconds")
        if self.count == 1:
            return f"missed: the server was not running at {first} (past the grace window)"
        last = dt.datetime.fromtimestamp(self.last, UTC).isoformat(timespec="seconds")
        return f"missed {self.count} occurrences from {first} to {last}: the server was not running (past the grace window)"


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    fire: float | None
    """The occurrence to run now (Unix time), or None."""
    missed: Missed | None
    next_at: float | None
    """The first occurrence after ``now`` (None: the schedule has no more)."""


def _ts(value: dt.datetime) -> float:
    return value.timestamp()


def _at(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts, UTC)


def decide(schedule: Schedule, next_at: float, now: float, grace: float) -> Decision:
    """Occurrences in ``[next_at, now]``: fire the latest within ``grace``, count the rest missed."""
    if next_at > now:
        return Decision(fire=None, missed=None, next_at=next_at)
    latest = next_at
    count = 1
    if isinstance(schedule, Interval):
        steps = int((now - next_at) // schedule.seconds)
        latest = next_at + steps * schedule.seconds
        count = steps + 1
    else:
        cursor = next_after(schedule, _at(next_at))
        while cursor is not None and _ts(cursor) <= now and count < _MAX_STEPS:
            latest = _ts(cursor)
            count += 1
            cursor = next_after(schedule, cursor)
    following = next_after(schedule, _at(max(now, latest)))
    nxt = _ts(following) if following is not None else None
    if now - latest <= grace:
        missed = Missed(count=count - 1, first=next_at, last=_previous(schedule, latest, next_at)) if count > 1 else None
        return Decision(fire=latest, missed=missed, next_at=nxt)
    return Decision(fire=None, missed=Missed(count=count, first=next_at, last=latest), next_at=nxt)


def _previous(schedule: Schedule, latest: float, first: float) -> float:
    """The occurrence before ``latest`` (at least ``first``)."""
    if isinstance(schedule, Interval):
        return max(first, latest - schedule.seconds)
    cursor: float = first
    while True:
        following = next_after(schedule, _at(cursor))
        if following is None or _ts(following) >= latest:
            return cursor
        cursor = _ts(following)


def first_occurrence(schedule: Schedule, created_at: float, last_at: float | None) -> float | None:
    """A job's next occurrence as the store left it: after its last recorded one, else its first."""
    if last_at is not None:
        following = next_after(schedule, _at(last_at))
    else:
        following = next_after(schedule, _at(created_at - 1e-6))
    return _ts(following) if following is not None else None
