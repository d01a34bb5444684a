"""The invariants of a cluster run, checked on rows read from the shared store (pure).

Each check takes rows (and what the clients saw) and returns a list of violations, one line
each, empty when the invariant holds; nothing here reads a database or a clock, so each check
is unit-tested on hand-made rows (``test_cluster_checks.py``) and run on the rows of a real
three-node run (``test_three_nodes.py``).

Who wrote a row: the store does not record it, so the test model server of each node writes
its node into what it answers. An assistant message's content starts with ``[node-N]``; a
tool's output holds ``RAN-ON-NODE-N`` (the command echoes it in lower case through ``tr``, so
a synthetic result that quotes the command does not match). Rows without a mark (user
messages, the synthetic results of a takeover's settling) name no writer.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re
from collections.abc import Iterable, Mapping, Sequence


def ended(status: str, reason: str) -> bool:
    """How a turn may end in a run with a killed and a paused node: completed, cancelled (a client
    gone, a stop), or failed ``interrupted`` (its node died and another settled it)."""
    return status in ("completed", "cancelled") or (status, reason) == ("failed", "interrupted")


_REPLY_MARK = re.compile(r"^\[(node-\d+)\]")
_TOOL_MARK = re.compile(r"RAN-ON-NODE-(\d+)")


@dataclasses.dataclass(frozen=True)
class StoredMessage:
    """One ``messages`` row (the columns the checks read)."""

    id: int
    session_id: str
    role: str
    content: str | None
    tool_call_id: str | None = None
    tool_calls: str | None = None
    """The JSON column: a list of OpenAI-shaped calls, or None."""


@dataclasses.dataclass(frozen=True)
class StoredTurn:
    """One ``turns`` row."""

    session_id: str
    turn_id: str
    status: str
    reason: str


def reply_mark(node: str) -> str:
    """The prefix a node's model replies carry (``writer_of`` reads it back)."""
    return f"[{node}]"


def tool_mark_command(node: str) -> str:
    """A shell fragment printing the mark of a tool run on ``node`` (upper case: the command itself does not match)."""
    return f"echo ran-on-{node} | tr a-z A-Z"


def writer_of(message: StoredMessage) -> str | None:
    """The node whose model or tool produced ``message``, None when it carries no mark."""
    text = message.content or ""
    if message.role == "assistant":
        found = _REPLY_MARK.match(text)
        return found.group(1) if found else None
    if message.role == "tool":
        tool = _TOOL_MARK.search(text)
        return f"node-{tool.group(1)}" if tool else None
    return None


def by_session(messages: Iterable[StoredMessage]) -> dict[str, list[StoredMessage]]:
    """Messages grouped per session, each group in row order."""
    out: dict[str, list[StoredMessage]] = collections.defaultdict(list)
    for message in sorted(messages, key=lambda m: m.id):
        out[message.session_id].append(message)
    return dict(out)


def user_messages_stored_once(messages: Iterable[StoredMessage], sent: Iterable[tuple[str, str]], acknowledged: Iterable[tuple[str, str]]) -> list[str]:
    """Every acknowledged ``(session, text)`` stored exactly once; none stored twice; none stored that was never sent.

    ``sent``: every user message a client posted (acknowledged or not: a request cut by a
    node's death may or may not have been stored); each text is unique in its session.
    """
    counts = collections.Counter((m.session_id, m.content or "") for m in messages if m.role == "user")
    known = set(sent)
    out = [f"{s}: acknowledged user message {t!r} stored {counts[s, t]} times" for s, t in sorted(set(acknowledged)) if counts[s, t] != 1]
    out += [f"{s}: user message {t!r} stored {n} times" for (s, t), n in sorted(counts.items()) if n > 1 and (s, t) in known]
    out += [f"{s}: user message {t!r} stored but never sent" for (s, t) in sorted(counts) if (s, t) not in known]
    return out


def tool_calls_answered_once(messages: Iterable[StoredMessage]) -> list[str]:
    """Every tool call has exactly one result in its session, and every result answers a call."""
    out: list[str] = []
    for session, rows in sorted(by_session(messages).items()):
        calls: collections.Counter[str] = collections.Counter()
        for row in rows:
            if row.role == "assistant" and row.tool_calls:
                calls.update(str(call["id"]) for call in json.loads(row.tool_calls))
        results = collections.Counter(row.tool_call_id or "" for row in rows if row.role == "tool")
        out += [f"{session}: tool call {c} requested {n} times" for c, n in sorted(calls.items()) if n > 1]
        out += [f"{session}: tool call {c} has {results[c]} results" for c in sorted(calls) if results[c] != 1]
        out += [f"{session}: tool result for {c!r}, which no assistant message called" for c in sorted(results) if c not in calls]
    return out


def turn_segments(rows: Sequence[StoredMessage]) -> list[list[StoredMessage]]:
    """A session's rows cut at each user message: one segment per turn (each turn sends one user message)."""
    segments: list[list[StoredMessage]] = []
    for row in rows:
        if row.role == "user" or not segments:
            segments.append([])
        segments[-1].append(row)
    return segments


def one_writer_per_turn(messages: Iterable[StoredMessage]) -> list[str]:
    """No turn holds replies (assistant messages, tool outputs) produced by two nodes."""
    out: list[str] = []
    for session, rows in sorted(by_session(messages).items()):
        for segment in turn_segments(rows):
            writers = sorted({w for w in map(writer_of, segment) if w is not None})
            if len(writers) > 1:
                ids = [m.id for m in segment]
                out.append(f"{session}: the turn of rows {ids[0]}..{ids[-1]} has replies from {', '.join(writers)}")
    return out


def no_write_after_losing(messages: Iterable[StoredMessage]) -> list[str]:
    """A node that another node followed in a session writes there again only for a new user message.

    Node A wrote, then node B (A's lease lapsed or B took the session over): A may hold the
    session again only through a new lease, at a new request, whose user message comes before
    A's next reply. A's reply straight after B's rows, with no user message between, is a
    write under a superseded epoch (a stale fence that was let through). Not seen here: a stale
    reply that lands alone after a user message B stored (the user message names no writer);
    :func:`one_writer_per_turn` sees it once B replies in that turn.
    """
    out: list[str] = []
    for session, rows in sorted(by_session(messages).items()):
        followed: set[str] = set()
        current: str | None = None
        for row in rows:
            if row.role == "user":
                followed.clear()  # a new request: any node may hold the session afresh
                continue
            writer = writer_of(row)
            if writer is None or writer == current:
                continue
            if writer in followed:
                out.append(f"{session}: row {row.id} written by {writer} after {current} had taken the session from it, with no new user message between")
            if current is not None:
                followed.add(current)
            current = writer
    return out


def turns_terminal(turns: Iterable[StoredTurn]) -> list[str]:
    """Every turn :func:`ended`."""
    return [f"{t.session_id}: turn {t.turn_id} is {t.status} {t.reason!r}" for t in turns if not ended(t.status, t.reason)]


def a_turn_per_user_message(messages: Iterable[StoredMessage], turns: Iterable[StoredTurn]) -> list[str]:
    """Each stored user message has its turn (a turn stores its user message when it starts; a turn
    whose start was refused has a row and no message, so turns may outnumber user messages)."""
    users = collections.Counter(m.session_id for m in messages if m.role == "user")
    started = collections.Counter(t.session_id for t in turns)
    return [f"{s}: {users[s]} user messages but {started[s]} turns" for s in sorted(users) if users[s] > started[s]]


def first_answers(sessions: Iterable[str], answers: Iterable[tuple[str, float]], after: float) -> dict[str, float]:
    """Per session of ``sessions``, the time of its first answer later than ``after``."""
    wanted, first = set(sessions), dict[str, float]()
    for session, at in answers:
        if session in wanted and at > after:
            first[session] = min(at, first.get(session, at))
    return first


def answered_after_takeover(expiries: Mapping[str, float], answers: Iterable[tuple[str, float]], killed_at: float, within: float) -> list[str]:
    """Each session the killed node held is answered within ``within`` s of its lease's expiry.

    ``expiries``: the killed node's leases when it died (session → ``expires_at``, the store's
    clock: this machine's, the server running here); ``answers``: ``(session, time)`` of every
    successful answer a client got, on the same clock.
    """
    first = first_answers(expiries, answers, killed_at)
    out: list[str] = []
    for session, expiry in sorted(expiries.items()):
        if session not in first:
            out.append(f"{session}: never answered after its node was killed")
        elif first[session] - expiry > within:
            out.append(f"{session}: answered {first[session] - expiry:.2f} s after its lease expired (limit {within} s)")
    return out


def takeover_delays(expiries: Mapping[str, float], answers: Iterable[tuple[str, float]], killed_at: float) -> list[float]:
    """Per killed session answered after the kill: its first answer's time minus its lease's expiry, sorted (for the report)."""
    return sorted(at - expiries[s] for s, at in first_answers(expiries, answers, killed_at).items())
