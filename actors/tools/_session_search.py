"""The ``session_search`` tool (toolset "session_search"): full-text search over past sessions.

It opens its own read-only :class:`actors.store.StoreReader` on ``context.store_file`` in a
reactor worker thread (readers never block the store writer), searches the FTS5 index,
and groups the hits by session, best session first, with a few snippets each. The calling
session is left out: its conversation is already in the model's context.
"""

from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path
from typing import Annotated

import msgspec
import trio

from actors.agent import ToolContext, ToolOutput, ToolTraits
from actors.store import StoreError, StoreReader
from protocols import SearchHit, SessionRecord

from ._registry import tool

MAX_SESSIONS = 20
SNIPPETS_PER_SESSION = 3
HITS_PER_SESSION = 10
"""Hits fetched per wanted session, so that a few chatty sessions do not crowd out the rest."""

DESCRIPTION = """\
Search the transcripts of past sessions (full text) to recall what was said or done before:
earlier decisions, commands that worked, facts the user mentioned. Answers matching
sessions, best first, with snippets where >>>matches<<< are marked. Words are matched as
written; a trailing * matches a prefix (deploy*); OR between words finds either."""


class SessionSearchArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    query: Annotated[str, msgspec.Meta(description="The words to look for.")]
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_SESSIONS, description="How many sessions to show at most.")] = 5


@dataclasses.dataclass(frozen=True, slots=True)
class _Found:
    session: SessionRecord | None
    session_id: str
    hits: list[SearchHit]


@tool(name="session_search", toolset="session_search", description=DESCRIPTION, traits=ToolTraits(read_only=True))
async def session_search(context: ToolContext, args: SessionSearchArgs) -> ToolOutput:
    if context.store_file is None:
        return _error("this session has no session store, so there are no past sessions to search")
    if not args.query.strip():
        return _error("the query is empty: give the words to look for")
    try:
        found = await trio.to_thread.run_sync(_search, context.store_file, args.query, args.limit, context.session_id)
    except StoreError as exc:
        return _error(f"the session store cannot be read: {exc}")
    if not found:
        return ToolOutput(content=f"No past session matches {args.query!r}.")
    return ToolOutput(content=_render(args.query, found))


def _search(store_file: str | Path, query: str, limit: int, current: str) -> list[_Found]:
    with StoreReader(store_file) as reader:
        hits = reader.search(query, limit=limit * HITS_PER_SESSION + HITS_PER_SESSION)
        grouped: dict[str, list[SearchHit]] = {}
        for hit in hits:  # best first, so each session's first hit is its best
            if hit.session_id != current:
                grouped.setdefault(hit.session_id, []).append(hit)
        chosen = list(grouped.items())[:limit]
        return [_Found(session=reader.get_session(sid), session_id=sid, hits=session_hits) for sid, session_hits in chosen]


def _render(query: str, found: list[_Found]) -> str:
    plural = "s" if len(found) != 1 else ""
    lines = [f"Past sessions matching {query!r} ({len(found)} session{plural}, best first):"]
    for number, entry in enumerate(found, 1):
        about = [f"session {entry.session_id}"]
        if entry.session is not None:
            if entry.session.title:
                about.append(repr(entry.session.title))
            about.append(entry.session.source)
            about.append(_when(entry.session.started_at))
        count = len(entry.hits)
        lines.append(f"\n{number}. {', '.join(about)} ({count}{'+' if count >= HITS_PER_SESSION else ''} matching message{'s' if count != 1 else ''})")
        for hit in entry.hits[:SNIPPETS_PER_SESSION]:
            snippet = " ".join(hit.snippet.split())
            lines.append(f"   - {hit.role} at {_when(hit.timestamp)}: {snippet}")
    return "\n".join(lines)


def _when(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _error(text: str) -> ToolOutput:
    return ToolOutput(content=f"[error] session_search: {text}", ok=False)
