"""Settling at start: what ``settle_interrupted`` costs on a store a killed process left open.

Measured, in one invocation, on copies of one store built in a temporary directory (through
the store's own write path, ``append_messages``, so counters, turns and the FTS5 index are
as the writer leaves them):

- 1,000 **open** sessions: an earlier turn that completed (a user message, a tool call and
  its result, an answer), then a turn still ``running`` whose assistant asked for 1-3 tool
  calls, the first of them answered in a third of the sessions;
- 4,000 **settled** sessions (1,000 with ``--quick``) with four completed turns each
  (16 messages), which settling must skip;
- 200 sessions written **before schema 4** (no ``turns`` rows), half of them ending with an
  unanswered call (settled by the last-message rule).

Metrics (median over rounds, a fresh copy of the store each round):

- ``settle``: :func:`actors.store.settle_interrupted` on the copy, opening the file included:
  1,000 turns failed and every unanswered call answered, in one transaction. Goal: <= 1 s.
- ``settle_again``: the same call on the settled copy: nothing is open, the cost every start
  pays.
- ``baseline``: in the same round, a plain read of every session's last message (one indexed
  query per session on a read-only connection, no write).

Run from the repository root: ``python bench/bench_recovery.py [--quick] [--json]``.
Bounded run time: about 5 s (under 2 s with ``--quick``).
"""

from __future__ import annotations

import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import apsw
from _common import parse_options, print_header, print_json, versions

from actors.store import open_reader, open_writer, settle_interrupted
from actors.store._writes import append_messages, create_session
from protocols import ChatMessage, ToolCall
from protocols._store import AppendMessages, CreateSession, TurnMark

GOAL_S = 1.0
OPEN_SESSIONS = 1_000
LEGACY_SESSIONS = 200
RESULT = "[not finished] the runtime stopped while this tool ran; its outcome is unknown"


# -- the store ------------------------------------------------------------------------------------


def _calls(prefix: str, count: int) -> ChatMessage:
    return ChatMessage(
        role="assistant",
        content=None,
        tool_calls=tuple(ToolCall(id=f"{prefix}_{i}", name="terminal", arguments='{"command": "ls -la /tmp"}') for i in range(count)),
    )


def _result(call_id: str) -> ChatMessage:
    return ChatMessage(role="tool", tool_call_id=call_id, name="terminal", content="total 0\ndrwxrwxrwt 2 root root 40 .")


def _turn(db: apsw.Connection, session_id: str, turn_id: str, at: float, *, end: bool) -> None:
    """One turn: the user message (start), a call and its result, the answer (end, if ``end``)."""
    append_messages(
        db,
        AppendMessages(
            session_id=session_id,
            messages=(ChatMessage(role="user", content=f"please look at {turn_id}"),),
            timestamp=at,
            turn=TurnMark(turn_id=turn_id, event="started"),
        ),
    )
    append_messages(db, AppendMessages(session_id=session_id, messages=(_calls(turn_id, 1), _result(f"{turn_id}_0")), timestamp=at + 1))
    if end:
        answer = ChatMessage(role="assistant", content=f"The directory is empty ({turn_id}).", finish_reason="stop")
        append_messages(db, AppendMessages(session_id=session_id, messages=(answer,), timestamp=at + 2, turn=TurnMark(turn_id=turn_id, event="completed")))


def build_store(path: Path, settled_sessions: int, rng: random.Random) -> int:
    """Write the store; return how many calls settling must answer."""
    expected = 0
    db = open_writer(path)
    try:
        db.execute("BEGIN IMMEDIATE")
        sessions = [f"open-{i}" for i in range(OPEN_SESSIONS)] + [f"done-{i}" for i in range(settled_sessions)]
        sessions += [f"legacy-{i}" for i in range(LEGACY_SESSIONS)]
        rng.shuffle(sessions)  # interleaved in the files, as real sessions are
        for n, session_id in enumerate(sessions):
            at = 1_000.0 + n
            create_session(db, CreateSession(session_id=session_id, source="bench", started_at=at))
            if session_id.startswith("done-"):
                for t in range(4):
                    _turn(db, session_id, f"{session_id}-t{t}", at + 10 * t, end=True)
            elif session_id.startswith("open-"):
                _turn(db, session_id, f"{session_id}-t0", at, end=True)
                _turn(db, session_id, f"{session_id}-t1", at + 10, end=False)
                count = rng.randint(1, 3)
                append_messages(db, AppendMessages(session_id=session_id, messages=(_calls(f"{session_id}-x", count),), timestamp=at + 13))
                answered = 1 if rng.random() < 1 / 3 else 0
                if answered:
                    append_messages(db, AppendMessages(session_id=session_id, messages=(_result(f"{session_id}-x_0"),), timestamp=at + 14))
                expected += count - answered
            else:  # written before schema 4: no turns rows
                user = ChatMessage(role="user", content="an old question")
                tail = (_calls(session_id, 1),) if int(session_id.split("-")[1]) % 2 else (ChatMessage(role="assistant", content="an old answer"),)
                append_messages(db, AppendMessages(session_id=session_id, messages=(user, *tail), timestamp=at))
                expected += len(tail[0].tool_calls)
        db.execute("COMMIT")
    finally:
        db.close()  # the last connection: the WAL is checkpointed into the file
    return expected


# -- one round ------------------------------------------------------------------------------------


def read_last_messages(path: Path) -> float:
    """Seconds to read every session's last message (the baseline)."""
    started = time.perf_counter()
    db = open_reader(path)
    try:
        for (session_id,) in db.execute("SELECT id FROM sessions").fetchall():
            db.execute("SELECT role, tool_calls FROM messages WHERE session_id = ? ORDER BY timestamp DESC, id DESC LIMIT 1", (session_id,)).fetchall()
    finally:
        db.close()
    return time.perf_counter() - started


def one_round(template: Path, copy: Path, expected: int) -> tuple[float, float, float]:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(template, copy)
    baseline = read_last_messages(copy)
    started = time.perf_counter()
    report = settle_interrupted(copy, result_text=RESULT)
    settle = time.perf_counter() - started
    calls = sum(s.settled_calls for s in report.sessions.values())
    turns = sum(len(s.turn_ids) for s in report.sessions.values())
    if calls != expected or turns != OPEN_SESSIONS:
        raise SystemExit(f"settled {calls} calls and {turns} turns; expected {expected} and {OPEN_SESSIONS}")
    started = time.perf_counter()
    again = settle_interrupted(copy, result_text=RESULT)
    settle_again = time.perf_counter() - started
    if again.sessions:
        raise SystemExit(f"a second settle changed {len(again.sessions)} sessions")
    return settle, settle_again, baseline


def emit(row: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json([row])
        return
    goal = f"   goal <= {row['goal_ms']:,} ms {'met' if row['meets_goal'] else 'MISSED'}" if "goal_ms" in row else ""
    print(
        f"{row['metric']:<13} median {row['median_ms']:>8.1f} ms   baseline {row['baseline_median_ms']:>7.1f} ms   ratio {row['ratio']:.2f}{goal}",
        flush=True,
    )


def main() -> int:
    options = parse_options(__doc__)
    rounds = 3 if options.quick else 7
    settled_sessions = 1_000 if options.quick else 4_000
    info = versions(("sqlite", apsw.sqlite_lib_version()), ("apsw", apsw.apsw_version()), "msgspec")
    print_header(
        "recovery",
        info,
        options.json,
        f"rounds {rounds}: {OPEN_SESSIONS:,} open sessions, {settled_sessions:,} settled, {LEGACY_SESSIONS} written before schema 4",
    )
    with tempfile.TemporaryDirectory(prefix="bench_recovery_") as tmp:
        template, copy = Path(tmp) / "template.db", Path(tmp) / "round.db"
        expected = build_store(template, settled_sessions, random.Random(7))
        counter = apsw.Connection(str(template))
        messages = int(counter.execute("SELECT count(*) FROM messages").fetchall()[0][0])
        counter.close()
        settles, agains, baselines = [], [], []
        for _ in range(rounds):
            settle, again, baseline = one_round(template, copy, expected)
            settles.append(settle)
            agains.append(again)
            baselines.append(baseline)
    base = statistics.median(baselines)
    shared = {"bench": "recovery", "rounds": rounds, "open_sessions": OPEN_SESSIONS, "settled_calls": expected, "store_messages": messages}
    for metric, values in (("settle", settles), ("settle_again", agains)):
        median = statistics.median(values)
        row: dict[str, Any] = {
            **shared,
            "metric": metric,
            "median_ms": round(median * 1000, 1),
            "baseline_median_ms": round(base * 1000, 1),
            "ratio": round(median / base, 2),
        }
        if metric == "settle":
            row["goal_ms"] = int(GOAL_S * 1000)
            row["meets_goal"] = median <= GOAL_S
        emit(row, options.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
