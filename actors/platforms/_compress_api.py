"""``POST /v1/sessions/{id}/compress``: compress a session's conversation now (``/compress``).

The compression is a turn of the session's own (it queues behind a running turn, or follows
``policy``). By default the request waits for it and answers with what was saved; with
``"wait": false`` it answers 202 at once and the outcome arrives on the session's event stream
(``ContextCompressed``, then the turn's end), as it does for the TUI.
"""

from __future__ import annotations

from typing import Any

import trio

from protocols import CompressContext, ContextCompressed, TurnCancelled, TurnCompleted, TurnFailed, TurnRejected

from ._app import ApiContext, check_session_id, new_id
from ._asgi import HttpError, Request, Send, send_json
from ._bridge import TrioSubscriber
from ._sessions_api import read_store
from ._turns import follow_turn, watch_disconnect

MAX_FOCUS = 2_000
"""Characters of a focus topic at most (it goes into the summariser's instructions)."""
WAIT_LIMIT = 1_000.0
"""Seconds a waiting request is held at most; the turn's own deadline (900 s) ends it first."""


async def compress_session(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    session_id = check_session_id(params["session_id"], "session_id")
    body = await request.json(optional=True)
    focus = body.get("focus", "")
    if not isinstance(focus, str) or len(focus) > MAX_FOCUS:
        raise HttpError(
            400, f"'focus' must be a string of at most {MAX_FOCUS} characters: the topic the summary keeps in detail", param="focus", code="invalid_focus"
        )
    policy = body.get("policy", "queue")
    if policy not in ("queue", "interrupt", "reject"):
        raise HttpError(400, "'policy' must be queue, interrupt or reject", param="policy", code="invalid_policy")
    wait = body.get("wait", True)
    if not isinstance(wait, bool):
        raise HttpError(400, "'wait' must be true or false", param="wait", code="invalid_wait")
    if await read_store(ctx, lambda reader: reader.get_session(session_id)) is None:
        raise HttpError(404, f"no session {session_id!r}: there is no conversation to compress", code="session_not_found")
    turn_id = new_id("turn_")
    command = CompressContext(focus=focus.strip(), turn_id=turn_id, policy=policy)
    if not wait:
        ctx.tell(session_id, command)
        await send_json(send, 202, {"object": "hermes.session.compression", "session_id": session_id, "turn_id": turn_id, "status": "queued"})
        return
    ctx.admit()
    hub = ctx.hubs.get(session_id)
    subscriber = TrioSubscriber(ctx.reactor, turn_id=turn_id)
    hub.subscribe(subscriber, after_seq=hub.last_seq)
    try:
        ctx.tell(session_id, command)
        compressed, end = await _outcome(request, subscriber)
    finally:
        hub.unsubscribe(subscriber)
        ctx.release()
    if end is None:
        return  # the client went away; the compression goes on
    await send_json(send, 200, _answer(session_id, turn_id, compressed, end))


async def _outcome(request: Request, subscriber: TrioSubscriber) -> tuple[ContextCompressed | None, Any]:
    compressed: ContextCompressed | None = None
    end: Any = None
    with trio.move_on_after(WAIT_LIMIT) as deadline:
        async with watch_disconnect(request):
            follower = follow_turn(subscriber)
            while not follower.done:
                event = await follower.next()
                if isinstance(event, ContextCompressed):
                    compressed = event
                end = event
    if deadline.cancelled_caught:
        raise HttpError(
            504, f"the compression did not end within {WAIT_LIMIT:g} s; it goes on: watch the session's events", type="server_error", code="timeout"
        )
    return compressed, end if follower.done else None


def _answer(session_id: str, turn_id: str, compressed: ContextCompressed | None, end: Any) -> dict[str, Any]:
    match end:
        case TurnCompleted(text=text):
            out: dict[str, Any] = {"object": "hermes.session.compression", "session_id": session_id, "turn_id": turn_id}
            out["compressed"] = compressed is not None
            out["message"] = text
            if compressed is not None:
                out |= {"tokens_before": compressed.tokens_before, "tokens_after": compressed.tokens_after, "summarised": compressed.summarised}
            return out
        case TurnFailed(error=error):
            raise HttpError(502, f"the compression failed: {error}", type="server_error", code="compression_failed")
        case TurnRejected(reason=reason):
            raise HttpError(409, reason, code="session_busy")
        case TurnCancelled(reason=reason):
            raise HttpError(409, f"the compression was cancelled ({reason}); the conversation is unchanged", code="cancelled")
    raise HttpError(500, f"the compression ended with {type(end).__name__}", type="server_error", code="internal")
