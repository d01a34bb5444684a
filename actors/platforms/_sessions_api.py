"""Sessions REST: list, create, get, rename, delete, messages, fork, and search.

Reads open a read-only store connection in a worker thread; writes go to the store
writer and the answer comes after it committed.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import trio

from actors.agent import SESSIONS_PATH
from actors.store import store_address
from protocols import (
    AppendMessages,
    CreateSession,
    DeleteSession,
    EnsureSession,
    SessionRecord,
    StoreCommand,
    StoreFailed,
    SwitchModel,
    TerminateChild,
    UndoTurn,
    UpdateSessionTotals,
)

from ._app import ApiContext, check_session_id, new_id
from ._asgi import HttpError, Request, Send, send_json, whole_number
from ._bridge import TrioSubscriber

T = TypeVar("T")
STORE_TIMEOUT = 10.0
MAX_PAGE = 100
"""The most sessions (or search hits) one answer lists; a larger ``limit`` gets this many."""


async def read_store(ctx: ApiContext, work: Callable[[Any], T]) -> T:
    if ctx.store_file is None:
        raise HttpError(503, "this server has no session store", type="server_error", code="no_store")
    from actors.store import StoreError, StoreReader

    def run() -> T:
        with StoreReader(ctx.store_file) as reader:  # type: ignore[arg-type]
            return work(reader)

    # Right after start the writer may not have created the file yet: wait for it (bounded).
    deadline = trio.current_time() + STORE_TIMEOUT
    delay = 0.01
    while trio.current_time() < deadline:
        try:
            return await trio.to_thread.run_sync(run)
        except StoreError as exc:
            if "start the store writer first" not in str(exc) and "no schema_version" not in str(exc):
                raise HttpError(503, f"the session store cannot be read: {exc}", type="server_error", code="store_unavailable") from None
            await trio.sleep(delay)
            delay = min(0.2, delay * 2)
    raise HttpError(503, "the session store is not ready yet; retry in a moment", type="server_error", code="store_starting", headers={"retry-after": "1"})


async def _write(ctx: ApiContext, command: StoreCommand) -> Any:
    """Tell the store writer; return its reply (``StoreFailed`` becomes an HTTP error)."""
    reply_to = TrioSubscriber(ctx.reactor)
    store_address(ctx.registry).tell(msgspec.structs.replace(command, reply_to=reply_to))
    reply = await _answer(reply_to, "the session store")
    if isinstance(reply, StoreFailed):
        raise _refused(reply)
    return reply


def _refused(reply: StoreFailed) -> HttpError:
    """A store refusal as an answer: the client's conflict (409), a missing session (404), or ours (503)."""
    error = reply.error
    if "is used by another session" in error or "exists already" in error or "UNIQUE" in error:
        return HttpError(409, error, code="store_refused")
    if "no session" in error.lower():
        return HttpError(404, error, code="store_refused")
    return HttpError(503, error, type="server_error", code="store_refused", headers={"retry-after": "1"} if reply.retryable else None)


async def _ask(ctx: ApiContext, session_id: str, command: EnsureSession | SwitchModel | UndoTurn) -> Any:
    """Tell the session ``command``; return its answer (sent once the store committed)."""
    reply_to = TrioSubscriber(ctx.reactor)
    ctx.tell(session_id, msgspec.structs.replace(command, reply_to=reply_to))
    return await _answer(reply_to, f"session {session_id!r}")


async def _answer(reply_to: TrioSubscriber, who: str) -> Any:
    with trio.move_on_after(STORE_TIMEOUT):
        return await reply_to.get()
    raise HttpError(
        503,
        f"{who} did not answer within {STORE_TIMEOUT:g} s; the server is overloaded, retry later",
        type="server_error",
        code="timeout",
        headers={"retry-after": "5"},
    )


def _view(record: SessionRecord) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.to_builtins(record)
    out.pop("type", None)
    out.pop("system_prompt", None)
    out["object"] = "hermes.session"
    return out


def _query(request: Request) -> dict[str, str]:
    return {k: v[-1] for k, v in urllib.parse.parse_qs(request.query).items()}


def _int(query: dict[str, str], name: str, default: int, *, low: int, high: int | None = None) -> int:
    """A whole-number query parameter: ``default`` when absent, a 400 below ``low``, at most ``high``.

    Above ``high`` is not an error: a client asking for more (Hermes clients ask for 200) gets
    the most there is, as OpenAI's list endpoints do.
    """
    text = query.get(name)
    if text is None:
        return default
    number = whole_number(text)
    if number is None or number < low:
        most = f" (more than {high} lists {high})" if high is not None else ""
        raise HttpError(400, f"{name} must be a whole number of {low} or more{most}, not {text[:40]!r}", param=name, code="invalid_query")
    return number if high is None else min(number, high)


async def _record(ctx: ApiContext, session_id: str) -> SessionRecord:
    record = await read_store(ctx, lambda r: r.get_session(session_id))
    if record is None:
        raise HttpError(404, f"no session {session_id!r}", code="session_not_found")
    assert isinstance(record, SessionRecord)
    return record


async def list_sessions(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    query = _query(request)
    limit, offset = _int(query, "limit", 20, low=1, high=MAX_PAGE), _int(query, "offset", 0, low=0)
    records = await read_store(ctx, lambda r: r.list_sessions(limit=limit + 1, offset=offset, source=query.get("source")))
    await send_json(send, 200, {"object": "list", "data": [_view(r) for r in records[:limit]], "has_more": len(records) > limit})


async def create_session(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    body = await request.json(optional=True)
    title = body.get("title")
    if title is not None and (not isinstance(title, str) or len(title) > 200):
        raise HttpError(400, "title must be a string of at most 200 characters", param="title", code="invalid_title")
    session_id = check_session_id(body["id"], "id") if "id" in body else new_id("sess_")
    ready = await _ask(ctx, session_id, EnsureSession(title=title))
    record = await _record(ctx, session_id)
    await send_json(send, 201 if ready.created else 200, _view(record))


async def get_session(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    await send_json(send, 200, _view(await _record(ctx, params["session_id"])))


async def patch_session(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    """Rename (``title``) and/or switch the model the session calls (``model``)."""
    body = await request.json()
    title, model = body.get("title"), body.get("model")
    if title is None and model is None:
        raise HttpError(400, "send 'title' (rename) or 'model' (switch the model), or both", param="title", code="missing_field")
    if title is not None and (not isinstance(title, str) or not title.strip() or len(title) > 200):
        raise HttpError(400, "'title' must be a non-empty string of at most 200 characters", param="title", code="invalid_title")
    if model is not None and (not isinstance(model, str) or not model.strip() or len(model) > 200 or not model.isprintable()):
        raise HttpError(400, "'model' must be a model name: printable, 1 to 200 characters", param="model", code="invalid_model")
    session_id = params["session_id"]
    await _record(ctx, session_id)
    if title is not None:
        await _write(ctx, UpdateSessionTotals(session_id=session_id, title=title.strip()))
    if model is not None:
        # Through the session, so its next model call uses it; answered once it is saved.
        switched = await _ask(ctx, session_id, SwitchModel(model=model.strip()))
        if switched.error:
            raise HttpError(503, f"the model was not switched: {switched.error}; try again", type="server_error", code="store_refused")
    await send_json(send, 200, _view(await _record(ctx, session_id)))


async def undo_turn(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    """Take back the session's last exchange (its last user message and everything after it)."""
    session_id = params["session_id"]
    await _record(ctx, session_id)
    undone = await _ask(ctx, session_id, UndoTurn())
    if undone.error:
        raise HttpError(409, undone.error, code="nothing_to_undo" if "nothing" in undone.error else "session_busy")
    await send_json(send, 200, {"object": "hermes.session.undo", "session_id": session_id, "removed": undone.removed, "text": undone.text})


async def delete_session(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    session_id = params["session_id"]
    await _record(ctx, session_id)
    # Stop its actor first, so nothing appends to a session that is going away.
    ctx.registry.lookup(SESSIONS_PATH).tell(TerminateChild(child_id=session_id))
    ctx.conversations.forget(session_id)  # no chat continues or branches from it any more
    reply = await _write(ctx, DeleteSession(session_id=session_id))
    await send_json(send, 200, {"id": session_id, "object": "hermes.session", "deleted": True, "messages_deleted": reply.messages_deleted})


async def session_messages(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    session_id = params["session_id"]
    await _record(ctx, session_id)
    stored = await read_store(ctx, lambda r: r.load_stored_messages(session_id))
    data = [{"id": m.id, "timestamp": m.timestamp, **m.message.to_openai(), "reasoning": m.message.reasoning} for m in stored]
    await send_json(send, 200, {"object": "list", "data": data})


async def fork_session(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    source = await _record(ctx, params["session_id"])
    messages = await read_store(ctx, lambda r: r.load_messages(source.id))
    fork_id = new_id("sess_")
    await _write(
        ctx,
        CreateSession(
            session_id=fork_id,
            source=source.source,
            model=source.model,
            system_prompt=source.system_prompt,
            parent_session_id=source.id,
            title=None,
            started_at=time.time(),
        ),
    )
    if messages:
        await _write(ctx, AppendMessages(session_id=fork_id, messages=tuple(messages)))
    await send_json(send, 201, _view(await _record(ctx, fork_id)))


async def search_sessions(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    query = _query(request)
    text = query.get("q", "")
    if not text.strip():
        raise HttpError(400, "'q' is required: the words to search for", param="q", code="missing_query")
    limit = _int(query, "limit", 20, low=1, high=MAX_PAGE)
    session_id = query.get("session_id")
    hits = await read_store(ctx, lambda r: r.search(text, limit=limit, session_id=session_id))
    data = []
    for hit in hits:
        item = msgspec.to_builtins(hit)
        item.pop("type", None)
        data.append(item)
    await send_json(send, 200, {"object": "list", "data": data})
