"""The invariant checker on hand-made histories: it accepts the legal ones and names each breach."""

from __future__ import annotations

import msgspec

from actors.chaos._invariants import RECOVERY_BOUND, Invariants
from protocols import ChatMessage, ChildExited, ChildRestarted, ChildStarted, ToolCall
from protocols._session import (
    SessionEvent,
    SessionRecovered,
    ToolStarted,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnQueued,
    TurnStarted,
    UserMessageSaved,
)

S = "s1"


def feed(checker: Invariants, *events: SessionEvent, subscriber: object = None, start: float = 0.0) -> None:
    for i, event in enumerate(events):
        checker.event(S, event, start + i * 0.1, subscriber=subscriber)


def rules(checker: Invariants, now: float = 100.0) -> list[str]:
    return [v.rule for v in checker.finish(now)]


def numbered(*events: SessionEvent) -> list[SessionEvent]:
    return [msgspec.structs.replace(e, seq=i + 1) for i, e in enumerate(events)]


def test_a_turn_that_starts_queues_another_and_ends_in_order_breaks_nothing() -> None:
    checker = Invariants(turn_timeout=10)
    feed(
        checker,
        *numbered(
            TurnStarted(turn_id="a", text="hi"),
            UserMessageSaved(turn_id="a"),
            TurnQueued(turn_id="b", position=1),
            TurnCompleted(turn_id="a", text="done"),
            TurnStarted(turn_id="b", text="more"),
            TurnCancelled(turn_id="b", reason="user"),
        ),
        subscriber="sub",
    )
    checker.durable_transcript(S, [ChatMessage(role="user", content="hi"), ChatMessage(role="assistant", content="done")], 1.0)
    assert rules(checker) == []


def test_a_second_terminal_event_a_sequence_gap_and_an_endless_turn_are_each_named() -> None:
    checker = Invariants(turn_timeout=10)
    checker.event(S, TurnStarted(turn_id="a", text="hi", seq=1), 0.0, subscriber="sub")
    checker.event(S, TurnCompleted(turn_id="a", text="x", seq=2), 0.1, subscriber="sub")
    checker.event(S, TurnFailed(turn_id="a", error="late", seq=4), 0.2, subscriber="sub")
    checker.event(S, TurnStarted(turn_id="b", text="again", seq=5), 0.3, subscriber="sub")
    assert rules(checker) == ["seq_gap", "terminal_count", "deadline_missed"]


def test_a_turn_ending_after_its_deadline_plus_slack_is_late() -> None:
    checker = Invariants(turn_timeout=1.0, slack=0.5)
    checker.event(S, TurnStarted(turn_id="a", text="hi"), 0.0)
    checker.event(S, TurnFailed(turn_id="a", error="deadline", kind="deadline"), 1.4)
    checker.event(S, TurnStarted(turn_id="b", text="hi"), 2.0)
    checker.event(S, TurnFailed(turn_id="b", error="deadline", kind="deadline"), 3.6)
    assert rules(checker) == ["deadline_missed"]


def test_a_turn_whose_actor_died_at_its_deadline_may_end_late_only_by_the_recoverys_prompt_verdict() -> None:
    checker = Invariants(turn_timeout=1.0, slack=0.1)
    for turn_id, start in (("a", 0.0), ("b", 10.0), ("c", 20.0), ("d", 30.0)):
        checker.event(S, TurnStarted(turn_id=turn_id, text="hi"), start)
        crash_at = start + (1.5 if turn_id == "d" else 1.0)  # d's actor died after its deadline had passed
        checker.crashed(S, crash_at)
        if turn_id == "a":  # the recovery fails it 0.3 s after the deadline: the restart's cost
            checker.event(S, TurnFailed(turn_id="a", error="restarted", kind="restarted"), crash_at + 0.3)
        elif turn_id == "b":  # the recovery came, but far later than a restart takes
            checker.event(S, TurnFailed(turn_id="b", error="restarted", kind="restarted"), crash_at + RECOVERY_BOUND + 1.0)
        else:  # a turn that carries on past its deadline after the restart, or was already late
            checker.event(
                S, TurnCompleted(turn_id=turn_id, text="x") if turn_id == "c" else TurnFailed(turn_id=turn_id, error="r", kind="restarted"), crash_at + 0.3
            )
    assert [(v.rule, v.detail.split()[1]) for v in checker.finish(100.0)] == [("deadline_missed", "b"), ("deadline_missed", "c"), ("deadline_missed", "d")]
    assert checker.counts["ended_late_by_restart"] == 1


def test_a_crash_is_settled_by_the_recoverys_turnless_failure_but_a_queued_turn_it_lost_is_reported() -> None:
    checker = Invariants(turn_timeout=10)
    feed(checker, TurnStarted(turn_id="a", text="hi"), TurnQueued(turn_id="b", position=1))
    checker.supervision(ChildStarted(path="/sessions/s1", incarnation=1), 0.0)
    checker.supervision(ChildRestarted(path="/sessions/s1", incarnation=2, restarts=1), 1.0)
    checker.supervision(ChildExited(path="/sessions/s1", child_id=S, incarnation=1, kind="crashed"), 1.0)
    checker.event(S, SessionRecovered(settled_calls=0, resumed=False), 1.1)
    checker.event(S, TurnFailed(error="restarted", kind="restarted"), 1.1)
    found = checker.finish(5.0)
    assert [(v.rule, "b" in v.detail) for v in found] == [("turn_never_ended", True)]


def test_a_recovery_that_fails_a_turn_when_none_was_open_is_spurious() -> None:
    checker = Invariants(turn_timeout=10)
    feed(checker, TurnStarted(turn_id="a", text="hi"), TurnFailed(turn_id="a", error="auth", kind="auth"))
    checker.supervision(ChildStarted(path="/sessions/s1", incarnation=1), 1.0)
    checker.event(S, SessionRecovered(settled_calls=0, resumed=False), 1.1)
    checker.event(S, TurnFailed(error="restarted", kind="restarted"), 1.1)
    assert rules(checker) == ["spurious_recovery"]


def test_a_resumed_turn_carries_on_the_turn_the_crash_interrupted() -> None:
    checker = Invariants(turn_timeout=10)
    feed(checker, TurnStarted(turn_id="a", text="hi"))
    checker.supervision(ChildStarted(path="/sessions/s1", incarnation=1), 0.0)
    checker.supervision(ChildRestarted(path="/sessions/s1", incarnation=2, restarts=1), 1.0)
    checker.supervision(ChildExited(path="/sessions/s1", child_id=S, incarnation=1, kind="crashed"), 1.0)
    checker.event(S, SessionRecovered(settled_calls=1, resumed=True), 1.1)
    checker.event(S, ToolStarted(turn_id="r1", call_id="c", name="x", arguments="{}"), 1.2)
    checker.event(S, TurnCompleted(turn_id="r1", text="carried on"), 1.3)
    assert rules(checker) == []


def test_tools_run_twice_or_before_their_call_is_durable_are_named() -> None:
    checker = Invariants(turn_timeout=10)
    checker.tool_ran(S, "c1", 0.0)
    checker.tool_ran(S, "c2", 0.1, write_ahead=False)
    checker.tool_ran(S, "c1", 0.2)
    assert rules(checker) == ["tool_before_write_ahead", "tool_ran_twice"]


def test_a_stored_transcript_with_a_lonely_call_an_orphan_result_or_a_repeated_acknowledged_message_is_named() -> None:
    call = ToolCall(id="c1", name="read_file", arguments="{}")
    checker = Invariants(turn_timeout=10)
    feed(checker, TurnStarted(turn_id="a", text="hi"), UserMessageSaved(turn_id="a"), TurnCompleted(turn_id="a", text="x"))
    checker.durable_transcript(S, [ChatMessage(role="user", content="hi"), ChatMessage(role="assistant", tool_calls=(call,))], 1.0)
    orphan = ChatMessage(role="tool", tool_call_id="zz", content="?")
    checker.durable_transcript(S, [ChatMessage(role="user", content="hi"), orphan, ChatMessage(role="user", content="hi")], 1.0)
    assert rules(checker) == ["durable_unpaired", "durable_unpaired", "user_message_count"]


def test_a_model_sent_an_unanswered_call_is_named() -> None:
    call = ToolCall(id="c1", name="read_file", arguments="{}")
    checker = Invariants(turn_timeout=10)
    checker.model_called(S, [ChatMessage(role="system", content="sys"), ChatMessage(role="assistant", tool_calls=(call,))], 0.0)
    assert rules(checker) == ["unsanitized_model_input"]


def test_the_kernels_restart_order_is_one_live_actor_but_two_overlapping_incarnations_are_not() -> None:
    checker = Invariants(turn_timeout=10)
    checker.supervision(ChildStarted(path="/sessions/s1", incarnation=1), 0.0)
    checker.supervision(ChildRestarted(path="/sessions/s1", incarnation=2, restarts=1), 1.0)
    checker.supervision(ChildExited(path="/sessions/s1", child_id=S, incarnation=1, kind="crashed"), 1.0)
    assert rules(checker) == []
    checker.supervision(ChildStarted(path="/sessions/s2", incarnation=1), 0.0)
    checker.supervision(ChildStarted(path="/sessions/s2", incarnation=2), 0.5)
    assert rules(checker) == ["two_live_actors"]


def test_more_restarts_within_the_window_than_the_intensity_allows_are_named() -> None:
    checker = Invariants(turn_timeout=10, max_restarts=2, within=5.0)
    for n in range(2, 5):
        checker.supervision(ChildRestarted(path=f"/sessions/s{n}", incarnation=2, restarts=1), float(n))
    assert rules(checker) == ["restart_intensity"]
    spaced = Invariants(turn_timeout=10, max_restarts=2, within=5.0)
    for n in range(2, 5):
        spaced.supervision(ChildRestarted(path=f"/sessions/s{n}", incarnation=2, restarts=1), n * 6.0)
    assert [v.rule for v in spaced.finish(100.0) if v.rule == "restart_intensity"] == []
