"""Schedules: what a job's ``schedule`` text means and when it next fires (pure).

Four kinds, as Hermes users write them:

- a duration, ``"30m"`` / ``"2h"`` / ``"1d"`` / ``"90s"``: once, that long after the job was made;
- ``"every 30m"`` / ``"every 2 hours"`` / ``"every day"``: repeatedly, from the job's anchor;
- a 5-field cron expression, ``"0 8 * * 1-5"``: in the job's time zone (cronsim);
- an ISO time, ``"2026-05-01T08:00"``: once (a time without an offset is in the job's zone).

Times are aware ``datetime``s; instants are compared in UTC. An interval counts real elapsed
time (``every 1d`` is 86,400 s, also across a DST change); a cron expression counts wall-clock
time in its zone (``0 8 * * *`` is 08:00 local on both sides of a DST change: cronsim skips a
time that does not exist and fires an ambiguous one once).

Invariant: ``next_after(s, t) > t`` whenever it is not None.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import zoneinfo

from cronsim import CronSim, CronSimError

UTC = dt.UTC

_UNITS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "h": 3600,
    "hr": 3600,
    "hour": 3600,
    "d": 86400,
    "day": 86400,
    "w": 604800,
    "week": 604800,
}
_DURATION = re.compile(r"^\s*(\d+)\s*([a-z]+?)s?\s*$")
_EVERY = re.compile(r"^\s*every\s+(?:(\d+)\s*)?([a-z]+?)s?\s*$")

BASE_GRACE = 120.0
"""Seconds after its instant an occurrence may still fire (Hermes's window)."""
MAX_GRACE = 2 * 3600.0
"""The longest grace any schedule gets."""


class ScheduleError(ValueError):
    """A schedule text that is none of the four kinds (the message says what is allowed)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Once:
    at: dt.datetime


@dataclasses.dataclass(frozen=True, slots=True)
class Interval:
    seconds: float
    anchor: dt.datetime
    """Occurrences are ``anchor + k * seconds`` for k >= 1."""


@dataclasses.dataclass(frozen=True, slots=True)
class Cron:
    expression: str
    zone: zoneinfo.ZoneInfo


Schedule = Once | Interval | Cron


def zone_of(name: str) -> zoneinfo.ZoneInfo:
    """The time zone called ``name`` (empty: UTC)."""
    try:
        return zoneinfo.ZoneInfo(name or "UTC")
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError(f"unknown time zone {name!r}; use an IANA name such as 'Europe/Paris' or 'UTC'") from exc


def _seconds(count: str | None, unit: str) -> float | None:
    factor = _UNITS.get(unit)
    if factor is None:
        return None
    n = int(count) if count else 1
    return float(n * factor) if n > 0 else None


def parse_schedule(text: str, *, created: dt.datetime, zone: str = "") -> Schedule:
    """What ``text`` means for a job made at ``created`` (aware) in time zone ``zone``.

    Raises:
        ScheduleError: the text is not a schedule, or the zone is unknown.
    """
    tz = zone_of(zone)
    raw = text.strip()
    lowered = raw.lower()
    if m := _EVERY.match(lowered):
        seconds = _seconds(m.group(1), m.group(2))
        if seconds is None:
            raise ScheduleError(f"{raw!r}: 'every' takes a count and a unit: 'every 30m', 'every 2 hours', 'every day'")
        return Interval(seconds=seconds, anchor=created.astimezone(UTC))
    if m := _DURATION.match(lowered):
        seconds = _seconds(m.group(1), m.group(2))
        if seconds is None:
            raise ScheduleError(f"{raw!r}: a duration is a count and a unit (s, m, h, d, w): '30m', '2h'")
        return Once(at=(created + dt.timedelta(seconds=seconds)).astimezone(UTC))
    if len(raw.split()) == 5:
        try:
            CronSim(raw, dt.datetime(2000, 1, 1, tzinfo=tz))
        except CronSimError as exc:
            raise ScheduleError(f"{raw!r} is not a valid cron expression ({exc}); five fields: minute hour day month weekday") from exc
        return Cron(expression=raw, zone=tz)
    try:
        at = dt.datetime.fromisoformat(raw)
    except ValueError:
        pass
    else:
        if at.tzinfo is None:
            at = at.replace(tzinfo=tz)
        return Once(at=at.astimezone(UTC))
    raise ScheduleError(f"{raw!r} is not a schedule; use a duration ('30m'), 'every 2h', a cron expression ('0 8 * * 1-5') or an ISO time ('2026-05-01T08:00')")


def next_after(schedule: Schedule, after: dt.datetime) -> dt.datetime | None:
    """The first occurrence strictly after ``after`` (aware), in UTC; None: there is none."""
    after = after.astimezone(UTC)
    match schedule:
        case Once(at=at):
            return at if at > after else None
        case Interval(seconds=seconds, anchor=anchor):
            if after < anchor:
                return anchor + dt.timedelta(seconds=seconds)
            k = int((after - anchor).total_seconds() // seconds) + 1
            candidate = anchor + dt.timedelta(seconds=k * seconds)
            while candidate <= after:  # float rounding at the boundary
                candidate += dt.timedelta(seconds=seconds)
            return candidate
        case Cron(expression=expression, zone=zone):
            # cronsim yields times strictly after its start, at whole minutes.
            start = after.astimezone(zone)
            for fire in CronSim(expression, start):
                result = fire.astimezone(UTC)
                if result > after:
                    return result
            return None  # pragma: no cover - cronsim's iterator does not end
    raise AssertionError(schedule)  # pragma: no cover


def period_of(schedule: Schedule, around: dt.datetime) -> float | None:
    """Seconds between two occurrences near ``around`` (None: fires once)."""
    match schedule:
        case Once():
            return None
        case Interval(seconds=seconds):
            return seconds
        case Cron():
            first = next_after(schedule, around)
            second = next_after(schedule, first) if first is not None else None
            if first is None or second is None:
                return None
            return (second - first).total_seconds()
    raise AssertionError(schedule)  # pragma: no cover


def grace_seconds(schedule: Schedule, around: dt.datetime) -> float:
    """How late an occurrence may fire: 120 s, or a tenth of a longer period (at most 2 h).

    A job that runs once a day and missed its 08:00 by ten minutes still runs; a job that runs
    every five minutes does not catch up on an occurrence the next one replaces anyway.
    """
    period = period_of(schedule, around)
    if period is None:
        return BASE_GRACE
    return max(BASE_GRACE, min(MAX_GRACE, period / 10))


def describe(schedule: Schedule) -> str:
    """A short human reading (``hermes cron list``)."""
    match schedule:
        case Once(at=at):
            return f"once at {at.isoformat()}"
        case Interval(seconds=seconds):
            for unit, factor in (("d", 86400), ("h", 3600), ("m", 60)):
                if seconds % factor == 0:
                    return f"every {int(seconds // factor)}{unit}"
            return f"every {int(seconds)}s"
        case Cron(expression=expression, zone=zone):
            return f"cron {expression} ({zone.key})"
    raise AssertionError(schedule)  # pragma: no cover
