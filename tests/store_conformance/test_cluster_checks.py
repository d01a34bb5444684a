"""The three-node run's checks (``cluster_checks``) on hand-made rows: silent on a clean run, and each
one catching the violation it is for (planted in a copy of clean rows)."""

from __future__ import annotations

import dataclasses
import itertools
import json

from tests.store_conformance.cluster_checks import (
    StoredMessage,
    StoredTurn,
    a_turn_per_user_message,
    answered_after_takeover,
    no_write_after_losing,
    one_writer_per_turn,
    reply_mark,
    takeover_delays,
    tool_calls_answered_once,
    turns_terminal,
    user_messages_stored_once,
    writer_of,
)


class Rows:
    """A session's rows as a node would write them (ids rising over all sessions)."""

    def __init__(self) -> None:
        self.rows: list[StoredMessage] = []
        self._ids = itertools.count(1)

    def add(self, session: str, role: str, content: str | None, **extra: str | None) -> StoredMessage:
        row = StoredMessage(id=next(self._ids), session_id=session, role=role, content=content, **extra)
        self.rows.append(row)
        return row

    def tool_turn(self, session: str, node: str, text: str, call: str, *, answered: bool = True) -> None:
        """A user message, a call, its output and (``answered``) the answer, all by ``node``."""
        self.add(session, "user", text)
        self.add(session, "assistant", f"{reply_mark(node)} running the tool", tool_calls=json.dumps([{"id": call, "type": "function"}]))
        self.add(session, "tool", f'{{"output": "RAN-ON-{node.upper()}"}}', tool_call_id=call)
        if answered:
            self.add(session, "assistant", f"{reply_mark(node)} {session} answered")


def clean() -> tuple[Rows, list[tuple[str, str]]]:
    """Two sessions; s2 was taken over from node-1 by node-2 mid-tool (the settle's result is unmarked)."""
    rows = Rows()
    rows.tool_turn("s1", "node-1", "s1 turn 0 try 0", "c1")
    rows.tool_turn("s1", "node-2", "s1 turn 1 try 0", "c2")
    rows.add("s2", "user", "s2 turn 0 try 0")
    rows.add("s2", "assistant", "[node-1] running the tool", tool_calls=json.dumps([{"id": "c3", "type": "function"}]))
    rows.add("s2", "tool", "outcome unknown: the node running it died (echo ran-on-node-1 | tr a-z A-Z)", tool_call_id="c3")
    rows.tool_turn("s2", "node-2", "s2 turn 1 try 1", "c4")
    sent = [("s1", "s1 turn 0 try 0"), ("s1", "s1 turn 1 try 0"), ("s2", "s2 turn 0 try 0"), ("s2", "s2 turn 1 try 0"), ("s2", "s2 turn 1 try 1")]
    return rows, sent


def test_clean_rows_of_a_takeover_pass_every_check() -> None:
    rows, sent = clean()
    acknowledged = [("s1", "s1 turn 0 try 0"), ("s1", "s1 turn 1 try 0"), ("s2", "s2 turn 1 try 1")]
    turns = [StoredTurn("s1", "t1", "completed", ""), StoredTurn("s1", "t2", "completed", ""), StoredTurn("s2", "t3", "failed", "interrupted")]
    turns += [StoredTurn("s2", "t4", "completed", ""), StoredTurn("s2", "t5", "cancelled", "the client disconnected")]
    assert user_messages_stored_once(rows.rows, sent, acknowledged) == []
    assert tool_calls_answered_once(rows.rows) == []
    assert one_writer_per_turn(rows.rows) == []
    assert no_write_after_losing(rows.rows) == []
    assert turns_terminal(turns) == []
    assert a_turn_per_user_message(rows.rows, turns) == []
    assert [writer_of(m) for m in rows.rows if m.session_id == "s2"] == [None, "node-1", None, None, "node-2", "node-2", "node-2"]


def test_a_duplicated_unacknowledged_or_unknown_user_message_is_caught() -> None:
    rows, sent = clean()
    first = rows.rows[0]
    duplicated = [*rows.rows, dataclasses.replace(first, id=100)]
    assert user_messages_stored_once(duplicated, sent, [("s1", first.content or "")]) == [
        "s1: acknowledged user message 's1 turn 0 try 0' stored 2 times",
        "s1: user message 's1 turn 0 try 0' stored 2 times",
    ]
    assert user_messages_stored_once(rows.rows, sent, [("s2", "s2 turn 1 try 0")]) == ["s2: acknowledged user message 's2 turn 1 try 0' stored 0 times"]
    assert user_messages_stored_once(rows.rows, sent[1:], []) == ["s1: user message 's1 turn 0 try 0' stored but never sent"]


def test_a_tool_call_with_two_results_none_or_a_result_without_a_call_is_caught() -> None:
    rows, _ = clean()
    result = next(m for m in rows.rows if m.role == "tool")
    assert tool_calls_answered_once([*rows.rows, dataclasses.replace(result, id=100)]) == ["s1: tool call c1 has 2 results"]
    assert tool_calls_answered_once([m for m in rows.rows if m != result]) == ["s1: tool call c1 has 0 results"]
    orphan = StoredMessage(id=101, session_id="s1", role="tool", content="x", tool_call_id="nobody")
    assert tool_calls_answered_once([*rows.rows, orphan]) == ["s1: tool result for 'nobody', which no assistant message called"]


def test_a_stale_reply_after_a_takeover_is_caught_by_both_writer_checks() -> None:
    rows, _ = clean()
    # node-1 wakes up and writes its answer to s2's first turn after node-2's rows.
    stale = StoredMessage(id=100, session_id="s2", role="assistant", content="[node-1] s2 answered")
    assert one_writer_per_turn([*rows.rows, stale]) == ["s2: the turn of rows 12..100 has replies from node-1, node-2"]
    assert no_write_after_losing([*rows.rows, stale]) == [
        "s2: row 100 written by node-1 after node-2 had taken the session from it, with no new user message between"
    ]


def test_a_node_holding_a_session_again_for_a_new_request_is_not_a_stale_write() -> None:
    rows, _ = clean()
    rows.tool_turn("s2", "node-1", "s2 turn 2 try 0", "c5")
    assert no_write_after_losing(rows.rows) == []
    assert one_writer_per_turn(rows.rows) == []


def test_a_running_turn_or_one_failed_for_another_reason_is_not_terminal() -> None:
    turns = [StoredTurn("s1", "t1", "running", ""), StoredTurn("s1", "t2", "failed", "store"), StoredTurn("s1", "t3", "cancelled", "")]
    assert turns_terminal(turns) == ["s1: turn t1 is running ''", "s1: turn t2 is failed 'store'"]


def test_a_user_message_without_its_turn_is_caught() -> None:
    rows, _ = clean()
    assert a_turn_per_user_message(rows.rows, [StoredTurn("s1", "t1", "completed", "")]) == [
        "s1: 2 user messages but 1 turns",
        "s2: 2 user messages but 0 turns",
    ]


def test_a_killed_nodes_session_answered_late_or_never_is_caught() -> None:
    expiries = {"s1": 103.0, "s2": 103.5, "s3": 104.0}
    answers = [("s1", 99.0), ("s1", 104.0), ("s1", 120.0), ("s2", 109.0), ("s4", 105.0)]
    assert answered_after_takeover(expiries, answers, killed_at=100.0, within=5.0) == [
        "s2: answered 5.50 s after its lease expired (limit 5.0 s)",
        "s3: never answered after its node was killed",
    ]
    assert takeover_delays(expiries, answers, killed_at=100.0) == [1.0, 5.5]
