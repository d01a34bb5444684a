"""The approval gate: only an explicit yes lets a dangerous command run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from actors.agent import ApprovalGate
from protocols._session import ApprovalRequested, ApprovalResolved


def gate(tmp_path: Path, **options: Any) -> tuple[ApprovalGate, list[Any]]:
    events: list[Any] = []
    return ApprovalGate(events.append, home=tmp_path, **options), events


async def ask(g: ApprovalGate, keys: tuple[str, ...] = ("rm-recursive",), timeout: float = 60) -> str:
    return await g.request(turn_id="t", call_id="c", command="rm -rf build", reasons=("recursive delete",), keys=keys, timeout=timeout)


async def answer_when_asked(g: ApprovalGate, events: list[Any], choice: str) -> None:
    await trio.testing.wait_all_tasks_blocked()
    request = next(e for e in events if isinstance(e, ApprovalRequested))
    assert g.resolve(request.request_id, choice)


async def test_a_request_is_published_and_an_answer_decides(tmp_path: Path) -> None:
    for choice in ("once", "deny"):
        g, events = gate(tmp_path)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer_when_asked, g, events, choice)
            assert await ask(g) == choice
        assert isinstance(events[-1], ApprovalResolved) and events[-1].choice == choice
        assert g.pending == []


async def test_no_answer_in_time_denies(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    g, events = gate(tmp_path)
    assert await ask(g, timeout=300) == "timeout"
    assert events[-1].choice == "timeout"


async def test_a_stale_or_unknown_answer_does_nothing(tmp_path: Path) -> None:
    g, events = gate(tmp_path)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer_when_asked, g, events, "once")
        await ask(g)
    request_id = events[0].request_id
    assert not g.resolve(request_id, "once")  # already settled
    assert not g.resolve("nope", "once")


async def test_session_and_always_approvals_cover_later_requests_and_always_is_saved(tmp_path: Path) -> None:
    g, events = gate(tmp_path)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer_when_asked, g, events, "session")
        await ask(g, keys=("chmod-777",))
    assert await ask(g, keys=("chmod-777",)) == "session"  # not asked again
    g2, events2 = gate(tmp_path)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer_when_asked, g2, events2, "always")
        await ask(g2, keys=("force-push",))
    fresh, _ = gate(tmp_path)  # a later session
    assert await ask(fresh, keys=("force-push",)) == "always"
    assert "force-push" in (tmp_path / "approved_patterns.txt").read_text()


async def test_cancelling_the_wait_never_approves(tmp_path: Path) -> None:
    g, events = gate(tmp_path)
    with trio.move_on_after(0.01):
        await ask(g)
    assert events[-1].choice == "cancelled"
    assert g.pending == []


async def test_yolo_skips_the_question(tmp_path: Path) -> None:
    g, events = gate(tmp_path, yolo=True)
    assert await ask(g) == "yolo"
    assert events == []
