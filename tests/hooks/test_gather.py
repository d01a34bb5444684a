"""``Gather``: a call's answers; the reactor blocks briefly for them, else parks and is woken once."""

from __future__ import annotations

from collections.abc import Callable

from actors.hooks._lane import Gather


def test_answers_in_before_the_wait_need_no_wake_up() -> None:
    woken: list[Callable[[], object]] = []
    gather = Gather(woken.append, 2)
    gather.answer("a", (1,), None)
    gather.answer("b", (), "RuntimeError: x")
    assert gather.wait_briefly(0.0) and woken == []
    assert gather.answers == {"a": ((1,), None), "b": ((), "RuntimeError: x")}


def test_a_parked_call_is_woken_once_by_its_last_answer() -> None:
    woken: list[Callable[[], object]] = []
    gather = Gather(woken.append, 2)
    gather.answer("a", (), None)
    assert not gather.wait_briefly(0.0)  # parked: the reactor awaits ``done``
    gather.answer("b", (), None)
    gather.answer("b", (), None)  # a second "last" answer (a late duplicate) wakes nobody
    assert len(woken) == 1
    woken[0]()
    assert gather.done.is_set()


def test_park_without_the_brief_wait_sees_a_complete_call() -> None:
    woken: list[Callable[[], object]] = []
    gather = Gather(woken.append, 1)
    gather.answer("a", (), None)
    assert gather.park() and woken == []
