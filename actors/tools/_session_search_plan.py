"""What ``session_search`` summarises, and how it says it; pure (no store, no model, no clock).

The tool (:mod:`._session_search`) searches, reads the chosen sessions' transcripts and asks
the model; every choice is made here:

- :func:`choose_sessions`: the hits grouped by session, best session first (a session's rank is
  its best hit's), the calling session left out, at most ``limit`` sessions.
- :func:`excerpt`: a session's transcript around its hits, at most ``budget`` characters: each
  hit message first, then its neighbours outward, one message further each round, so every
  hit is in before any context is; each message clipped to :data:`MESSAGE_CHARS`; a gap of
  left-out messages is marked.
- :func:`summary_request`: one request per session (the calls run in parallel under one
  deadline, and one session's failure leaves the others' summaries): the query, what the
  session is, and its excerpt; the model is asked for a short factual summary.
- :func:`render`: the answer: per session its title, source and date, then its summary, or
  its raw snippets with a note saying why there is no summary.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Collection, Sequence

from protocols import ChatMessage, SearchHit, SessionRecord, StoredMessage

EXCERPT_CHARS = 12_000
"""The most of one session's transcript a summary request carries."""
MESSAGE_CHARS = 2_000
"""One message's most characters in an excerpt (its start and end kept)."""
SNIPPETS_PER_SESSION = 3
HITS_PER_SESSION = 10
"""Hits fetched per wanted session, so that a few chatty sessions do not crowd out the rest."""

SUMMARY_SYSTEM = (
    "You summarise one past conversation for an assistant that is searching its own history. "
    "Say, in at most six short sentences, what in this conversation bears on the search: facts, decisions, "
    "commands or answers that worked, and how it ended. Use only what the transcript says; if it says nothing "
    "relevant, say so in one sentence. Write plain text, no preamble."
)


@dataclasses.dataclass(frozen=True, slots=True)
class Chosen:
    """One session to show: its hits, best first."""

    session_id: str
    hits: tuple[SearchHit, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Found:
    """One chosen session as the answer shows it."""

    session_id: str
    session: SessionRecord | None
    hits: tuple[SearchHit, ...]
    summary: str | None = None
    """The model's summary; None: show the snippets (with ``note`` saying why)."""
    note: str = ""


def choose_sessions(hits: Sequence[SearchHit], current: str, limit: int) -> list[Chosen]:
    """``hits`` (best first) grouped by session, best first, without ``current``, at most ``limit``."""
    grouped: dict[str, list[SearchHit]] = {}
    for hit in hits:  # best first, so each session's first hit is its best and dicts keep that order
        if hit.session_id != current:
            grouped.setdefault(hit.session_id, []).append(hit)
    return [Chosen(session_id=sid, hits=tuple(found)) for sid, found in list(grouped.items())[: max(0, limit)]]


def excerpt(messages: Sequence[StoredMessage], hit_ids: Sequence[int], budget: int = EXCERPT_CHARS) -> str:
    """The transcript around the messages ``hit_ids`` (best first), in order, within ``budget`` characters."""
    lines = [_line(m.message) for m in messages]
    index = {m.id: i for i, m in enumerate(messages)}
    seeds = [index[i] for i in hit_ids if i in index] or ([len(messages) - 1] if messages else [])
    taken: set[int] = set()
    used = 0

    def take(i: int) -> bool:
        nonlocal used
        if i in taken or not 0 <= i < len(lines):
            return True
        cost = len(lines[i]) + 1
        if used + cost > budget:
            return False
        taken.add(i)
        used += cost
        return True

    for i in seeds:
        take(i)
    for reach in range(1, len(lines)):  # one message further out from every hit each round
        for i in seeds:
            take(i - reach)
            take(i + reach)
        if used >= budget:
            break
    out: list[str] = []
    last = -1
    for i in sorted(taken):
        if i > last + 1:
            out.append(_gap(i - last - 1))
        out.append(lines[i])
        last = i
    if last < len(lines) - 1 and taken:
        out.append(_gap(len(lines) - 1 - last))
    return "\n".join(out)


def summary_request(query: str, about: str, text: str) -> tuple[ChatMessage, ...]:
    """The request that asks for one session's summary."""
    user = f"Search: {query}\nConversation: {about}\n\nTranscript (excerpt around the matches):\n{text}"
    return (ChatMessage(role="system", content=SUMMARY_SYSTEM), ChatMessage(role="user", content=user))


def describe(session_id: str, session: SessionRecord | None) -> str:
    """``session ID, 'title', source, date`` (what the store knows of it)."""
    about = [f"session {session_id}"]
    if session is not None:
        if session.title:
            about.append(repr(session.title))
        about.append(session.source)
        about.append(when(session.started_at))
    return ", ".join(about)


def render(query: str, found: Sequence[Found]) -> str:
    """The tool's answer: a summary per session, or its snippets and why there is no summary."""
    plural = "s" if len(found) != 1 else ""
    lines = [f"Past sessions matching {query!r} ({len(found)} session{plural}, best first):"]
    for number, entry in enumerate(found, 1):
        count = len(entry.hits)
        matching = f"{count}{'+' if count >= HITS_PER_SESSION else ''} matching message{'s' if count != 1 else ''}"
        lines.append(f"\n{number}. {describe(entry.session_id, entry.session)} ({matching})")
        if entry.summary is not None:
            lines.extend(f"   {line}" for line in entry.summary.splitlines() if line.strip())
            continue
        if entry.note:
            lines.append(f"   [no summary: {entry.note}; the matching messages:]")
        for hit in entry.hits[:SNIPPETS_PER_SESSION]:
            snippet = " ".join(hit.snippet.split())
            lines.append(f"   - {hit.role} at {when(hit.timestamp)}: {snippet}")
    return "\n".join(lines)


def hit_ids(hits: Collection[SearchHit]) -> list[int]:
    return [hit.message_id for hit in hits]


def when(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _line(message: ChatMessage) -> str:
    text = " ".join((message.content or "").split())
    if message.tool_calls:
        calls = ", ".join(f"{c.name}({' '.join(c.arguments.split())})" for c in message.tool_calls)
        text = f"{text} [calls {calls}]".strip()
    label = f"tool {message.name}" if message.role == "tool" and message.name else message.role
    line = f"[{label}] {text}"
    if len(line) > MESSAGE_CHARS:
        keep = (MESSAGE_CHARS - 20) // 2
        line = f"{line[:keep]} [...] {line[-keep:]}"
    return line


def _gap(count: int) -> str:
    return f"[... {count} message{'s' if count != 1 else ''} left out ...]"
