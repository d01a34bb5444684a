"""The ``session_search`` tool (toolset "session_search"): past sessions that match, summarised.

It opens its own read-only :class:`actors.store.StoreReader` on ``context.store_file`` in a
reactor worker thread (readers never block the store writer), searches the FTS5 index, and
for each matching session (best first, at most ``limit``, default 3; the calling session is
left out: its conversation is already in the model's context) reads its transcript. Then it
asks the session's side-call model (``context.auxiliary``: ``compression.summary_model``
when config.yaml names one, else the session's model) for one summary per session, the calls
in parallel under one deadline (``AuxiliaryModel.timeout``). A session whose call fails or is
not answered in time is shown with its raw snippets and a note saying why, as are all of
them when the session has no model to ask: the hits are never lost to a model's failure.
What to send and how to show it is decided in :mod:`._session_search_plan`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import msgspec
import trio

from actors.agent import ToolContext, ToolOutput, ToolTraits
from actors.agent._auxiliary import AuxiliaryFailed, AuxiliaryModel
from actors.store import StoreError, StoreReader
from protocols import SessionRecord

from ._registry import tool
from ._session_search_plan import HITS_PER_SESSION, Chosen, Found, choose_sessions, describe, excerpt, hit_ids, render, summary_request

MAX_SESSIONS = 20

DESCRIPTION = """\
Search the transcripts of past sessions (full text) to recall what was said or done before:
earlier decisions, commands that worked, facts the user mentioned. Answers the matching
sessions, best first, each with its title, source, date and a short summary of what in it
bears on the search (or its snippets, where >>>matches<<< are marked). Words are matched as
written; a trailing * matches a prefix (deploy*); OR between words finds either."""


class SessionSearchArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    query: Annotated[str, msgspec.Meta(description="The words to look for.")]
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_SESSIONS, description="How many sessions to show (and summarise) at most.")] = 3


@dataclasses.dataclass(frozen=True, slots=True)
class _Read:
    chosen: Chosen
    session: SessionRecord | None
    excerpt: str


@tool(name="session_search", toolset="session_search", description=DESCRIPTION, traits=ToolTraits(read_only=True))
async def session_search(context: ToolContext, args: SessionSearchArgs) -> ToolOutput:
    if context.store_file is None:
        return _error("this session has no session store, so there are no past sessions to search")
    if not args.query.strip():
        return _error("the query is empty: give the words to look for")
    try:
        read = await trio.to_thread.run_sync(_read, context.store_file, args.query, args.limit, context.session_id)
    except StoreError as exc:
        return _error(f"the session store cannot be read: {exc}")
    if not read:
        return ToolOutput(content=f"No past session matches {args.query!r}.")
    return ToolOutput(content=render(args.query, await _summarise(context.auxiliary, args.query, read)))


def _read(store_file: str | Path, query: str, limit: int, current: str) -> list[_Read]:
    with StoreReader(store_file) as reader:
        hits = reader.search(query, limit=limit * HITS_PER_SESSION + HITS_PER_SESSION)
        out = []
        for chosen in choose_sessions(hits, current, limit):
            text = excerpt(reader.load_stored_messages(chosen.session_id, every_segment=True), hit_ids(chosen.hits))
            out.append(_Read(chosen=chosen, session=reader.get_session(chosen.session_id), excerpt=text))
        return out


async def _summarise(model: AuxiliaryModel | None, query: str, read: list[_Read]) -> list[Found]:
    """One summary per session, asked in parallel under one deadline; the snippets where none came."""
    found = [Found(session_id=r.chosen.session_id, session=r.session, hits=r.chosen.hits) for r in read]
    if model is None:
        return [dataclasses.replace(f, note="this session has no model to summarise with") for f in found]
    answers: dict[int, str] = {}
    failures: dict[int, str] = {}

    async def ask(number: int, entry: _Read) -> None:
        request = summary_request(query, describe(entry.chosen.session_id, entry.session), entry.excerpt)
        try:
            answers[number] = await model.ask(request)
        except AuxiliaryFailed as exc:
            failures[number] = f"the model {model.model} failed: {exc}"
        except Exception as exc:  # whatever else breaks a side call, the hits are kept (trio.Cancelled is no Exception)
            failures[number] = f"the model {model.model} could not be asked: {type(exc).__name__}: {exc}"

    with trio.move_on_after(model.timeout):
        async with trio.open_nursery() as nursery:
            for number, entry in enumerate(read):
                nursery.start_soon(ask, number, entry)
    late = f"the model {model.model} did not answer within {model.timeout:g} s"
    return [dataclasses.replace(f, summary=answers[n]) if n in answers else dataclasses.replace(f, note=failures.get(n, late)) for n, f in enumerate(found)]


def _error(text: str) -> ToolOutput:
    return ToolOutput(content=f"[error] session_search: {text}", ok=False)
