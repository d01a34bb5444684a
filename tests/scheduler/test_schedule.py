"""The schedule core over a simulated month, across the DST changes of the job's zone."""

from __future__ import annotations

import datetime as dt
import itertools
import zoneinfo

import pytest
import trio
import trio.testing

from actors.scheduler import ScheduleError, decide, next_after, parse_schedule
from actors.scheduler._schedule import grace_seconds

UTC = dt.UTC
PARIS = zoneinfo.ZoneInfo("Europe/Paris")
NEW_YORK = zoneinfo.ZoneInfo("America/New_York")


def _fires(schedule_text: str, start: dt.datetime, end: dt.datetime, zone: str = "") -> list[dt.datetime]:
    schedule = parse_schedule(schedule_text, created=start, zone=zone)
    out: list[dt.datetime] = []
    cursor = next_after(schedule, start - dt.timedelta(microseconds=1))
    while cursor is not None and cursor <= end:
        out.append(cursor)
        cursor = next_after(schedule, cursor)
    return out


def test_a_weekday_cron_job_fires_at_eight_local_time_every_weekday_of_march_across_the_dst_change() -> None:
    start = dt.datetime(2025, 3, 1, tzinfo=PARIS)
    fires = _fires("0 8 * * 1-5", start, dt.datetime(2025, 3, 31, 23, 59, tzinfo=PARIS), zone="Europe/Paris")
    local = [f.astimezone(PARIS) for f in fires]
    assert all(t.hour == 8 and t.minute == 0 and t.weekday() < 5 for t in local)
    assert len(local) == 21  # the weekdays of March 2025
    # 07:00 UTC before the change on the 30th, 06:00 UTC after it
    assert fires[0] == dt.datetime(2025, 3, 3, 7, tzinfo=UTC)
    assert fires[-1] == dt.datetime(2025, 3, 31, 6, tzinfo=UTC)


def test_a_time_skipped_by_spring_forward_fires_once_after_the_gap_and_an_ambiguous_time_fires_once() -> None:
    spring = _fires("30 2 * * *", dt.datetime(2025, 3, 29, tzinfo=PARIS), dt.datetime(2025, 3, 31, 12, tzinfo=PARIS), zone="Europe/Paris")
    assert [f.astimezone(PARIS).strftime("%d %H:%M") for f in spring] == ["29 02:30", "30 03:00", "31 02:30"]
    autumn = _fires("30 2 * * *", dt.datetime(2025, 10, 25, tzinfo=PARIS), dt.datetime(2025, 10, 27, 12, tzinfo=PARIS), zone="Europe/Paris")
    assert [f.astimezone(PARIS).strftime("%d %H:%M") for f in autumn] == ["25 02:30", "26 02:30", "27 02:30"]
    assert len(set(autumn)) == 3


def test_an_interval_counts_elapsed_time_so_every_day_moves_an_hour_on_the_local_clock_across_dst() -> None:
    created = dt.datetime(2025, 10, 28, 9, tzinfo=NEW_YORK)
    fires = _fires("every 1d", created, dt.datetime(2025, 11, 26, 23, tzinfo=NEW_YORK), zone="America/New_York")
    assert len(fires) == 29
    gaps = {(b - a).total_seconds() for a, b in itertools.pairwise(fires)}
    assert gaps == {86400.0}
    assert fires[0].astimezone(NEW_YORK).hour == 9 and fires[-1].astimezone(NEW_YORK).hour == 8


def test_every_n_minutes_over_a_month_fires_exactly_the_expected_count() -> None:
    created = dt.datetime(2025, 3, 1, tzinfo=UTC)
    fires = _fires("every 30 minutes", created, created + dt.timedelta(days=31))
    assert len(fires) == 31 * 48
    assert fires[0] == created + dt.timedelta(minutes=30)


def test_a_duration_and_an_iso_time_fire_once() -> None:
    created = dt.datetime(2025, 3, 30, 0, 45, tzinfo=UTC)
    assert _fires("30m", created, created + dt.timedelta(days=31)) == [created + dt.timedelta(minutes=30)]
    iso = _fires("2025-03-30T02:30", created, created + dt.timedelta(days=31), zone="America/New_York")
    assert iso == [dt.datetime(2025, 3, 30, 6, 30, tzinfo=UTC)]


@pytest.mark.parametrize(
    ("text", "words"),
    [("every fortnight", "'every' takes a count"), ("5 parsecs", "a duration is a count"), ("61 * * * *", "not a valid cron"), ("soon", "is not a schedule")],
)
def test_a_schedule_that_is_none_of_the_kinds_says_what_is_allowed(text: str, words: str) -> None:
    with pytest.raises(ScheduleError, match=words):
        parse_schedule(text, created=dt.datetime(2025, 1, 1, tzinfo=UTC))


def test_an_unknown_time_zone_is_named() -> None:
    with pytest.raises(ScheduleError, match="unknown time zone 'Mars/Olympus'"):
        parse_schedule("0 8 * * *", created=dt.datetime(2025, 1, 1, tzinfo=UTC), zone="Mars/Olympus")


def test_grace_is_two_minutes_for_short_periods_and_a_tenth_of_a_long_period() -> None:
    at = dt.datetime(2025, 1, 1, tzinfo=UTC)
    assert grace_seconds(parse_schedule("every 5m", created=at), at) == 120.0
    assert grace_seconds(parse_schedule("0 8 * * *", created=at), at) == 7200.0  # a day: capped at 2 h
    assert grace_seconds(parse_schedule("every 1h", created=at), at) == 360.0
    assert grace_seconds(parse_schedule("30m", created=at), at) == 120.0


def test_after_downtime_the_latest_occurrence_within_grace_fires_and_the_rest_are_recorded_missed() -> None:
    created = dt.datetime(2025, 1, 1, tzinfo=UTC)
    schedule = parse_schedule("every 10m", created=created)
    first = created.timestamp() + 600
    within = decide(schedule, first, first + 3600 + 60, 120.0)  # down an hour; the 7th occurrence is 60 s old
    assert within.fire == first + 3600
    assert within.missed is not None and within.missed.count == 6 and within.missed.last == first + 3000
    assert within.next_at == first + 4200
    beyond = decide(schedule, first, first + 3600 + 300, 120.0)
    assert beyond.fire is None and beyond.missed is not None and beyond.missed.count == 7 and beyond.missed.last == first + 3600
    assert "missed 7 occurrences" in beyond.missed.describe()


def test_a_cron_occurrence_missed_while_down_is_one_record_and_the_next_is_tomorrow() -> None:
    created = dt.datetime(2025, 3, 1, tzinfo=PARIS)
    schedule = parse_schedule("0 8 * * *", created=created, zone="Europe/Paris")
    eight = dt.datetime(2025, 3, 2, 8, tzinfo=PARIS).timestamp()
    late = decide(schedule, eight, eight + 3 * 3600, grace_seconds(schedule, created))
    assert late.fire is None and late.missed is not None and late.missed.count == 1
    assert late.next_at == dt.datetime(2025, 3, 3, 8, tzinfo=PARIS).timestamp()


async def test_with_trios_virtual_clock_every_kind_fires_at_its_instants_over_a_month_across_dst(autojump_clock: trio.testing.MockClock) -> None:
    # Wall time is trio's virtual clock plus an offset; the loop sleeps until each decision's next instant.
    start = dt.datetime(2025, 3, 20, tzinfo=UTC)
    offset = start.timestamp() - trio.current_time()
    kinds = {
        "cron": parse_schedule("0 8 * * 1-5", created=start, zone="Europe/Paris"),
        "every": parse_schedule("every 6h", created=start),
        "once": parse_schedule("2025-04-01T09:15", created=start, zone="America/New_York"),
        "duration": parse_schedule("45m", created=start),
    }
    fired: dict[str, list[float]] = {name: [] for name in kinds}
    end = start.timestamp() + 31 * 86400

    async def run(name: str) -> None:
        schedule = kinds[name]
        following = next_after(schedule, start)
        nxt = following.timestamp() if following is not None else None
        while nxt is not None and nxt <= end:
            await trio.sleep_until(nxt - offset)
            decision = decide(schedule, nxt, trio.current_time() + offset, 120.0)
            assert decision.missed is None
            assert decision.fire is not None
            fired[name].append(decision.fire)
            nxt = decision.next_at

    async with trio.open_nursery() as nursery:
        for name in kinds:
            nursery.start_soon(run, name)
    cron_local = [dt.datetime.fromtimestamp(t, PARIS) for t in fired["cron"]]
    assert {(t.hour, t.minute) for t in cron_local} == {(8, 0)} and len(cron_local) == 22
    assert {t.utcoffset() for t in cron_local} == {dt.timedelta(hours=1), dt.timedelta(hours=2)}
    assert len(fired["every"]) == 31 * 4
    assert fired["once"] == [dt.datetime(2025, 4, 1, 13, 15, tzinfo=UTC).timestamp()]
    assert fired["duration"] == [start.timestamp() + 2700]
