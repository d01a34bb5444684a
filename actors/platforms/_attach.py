"""Attaching to a session over HTTP: its whole event stream, and the commands a person sends.

``GET /v1/sessions/{id}/events`` streams every event of the session (typed, tagged JSON,
SSE id = the session's sequence number; ``Last-Event-ID`` or ``?after=`` resumes exactly).
The TUI's remote handle (``hermes attach``) is built on these routes.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

import trio

from protocols import AnswerClarification, CancelTurn, EnsureSession, ResolveApproval, StartTurn, to_json

from ._app import ApiContext, check_session_id, new_id
from ._asgi import HttpError, Request, Send, send_json, sse, start_sse, whole_number
from ._bridge import TrioSubscriber
from ._sessions_api import read_store
from ._turns import watch_disconnect


async def session_events(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    session_id = check_session_id(params["session_id"], "session_id")
    query = {k: v[-1] for k, v in urllib.parse.parse_qs(request.query).items()}
    after = whole_number(request.headers.get("last-event-id") or query.get("after", "0"))
    if after is None:
        raise HttpError(400, "Last-Event-ID (or ?after=) must be the number of the last event seen", param="Last-Event-ID", code="invalid_last_event_id")
    hub = ctx.hubs.get(session_id)
    subscriber = TrioSubscriber(ctx.reactor)
    observer = query.get("observer") == "true"
    missed = hub.subscribe(subscriber, after_seq=after, observer=observer)
    if hub.last_seq == 0 and await read_store(ctx, lambda reader: reader.get_session(session_id)) is not None:
        # A stored session nothing has woken in this process: start it, so what its start
        # finds (a recovery after a restart: SessionRecovered, failed turns) reaches this client.
        ctx.tell(session_id, EnsureSession())
    try:
        await start_sse(send)
        if missed:
            notice = {"type": "ReplayGap", "missed": missed, "hint": "reload the transcript: GET /v1/sessions/{id}/messages"}
            await send({"type": "http.response.body", "body": sse(notice, event="hermes.gap"), "more_body": True})
        async with watch_disconnect(request):
            while True:
                event = await _next(subscriber, ctx.keepalive)
                if event is None:
                    await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
                    continue
                await send({"type": "http.response.body", "body": sse(to_json(event), event=type(event).__name__, id=event.seq), "more_body": True})
    finally:
        hub.unsubscribe(subscriber)


async def _next(subscriber: TrioSubscriber, keepalive: float) -> Any:
    """The next event, or None after ``keepalive`` idle seconds."""
    with trio.move_on_after(keepalive):
        return await subscriber.get()
    return None


async def session_turn(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    session_id = check_session_id(params["session_id"], "session_id")
    body = await request.json()
    text = body.get("text")
    if not isinstance(text, str) or not text.strip():
        raise HttpError(400, "'text' is required: the user message", param="text", code="missing_field")
    policy = body.get("policy", "queue")
    if policy not in ("queue", "interrupt", "reject"):
        raise HttpError(400, "'policy' must be queue, interrupt or reject", param="policy", code="invalid_policy")
    turn_id = new_id("turn_")
    ctx.tell(session_id, StartTurn(text=text, turn_id=turn_id, policy=policy))
    await send_json(send, 202, {"session_id": session_id, "turn_id": turn_id})


async def session_cancel(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    session_id = check_session_id(params["session_id"], "session_id")
    body = await request.json(optional=True)
    turn_id = body.get("turn_id", "")
    ctx.tell(session_id, CancelTurn(turn_id=turn_id if isinstance(turn_id, str) else "", reason="cancelled from an attached client"))
    await send_json(send, 202, {"session_id": session_id, "cancelling": True})


async def session_answer(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    """Answer an approval (``choice``) or a clarification (``answer``) by ``request_id``."""
    session_id = check_session_id(params["session_id"], "session_id")
    body = await request.json()
    request_id = body.get("request_id")
    if not isinstance(request_id, str) or not request_id:
        raise HttpError(400, "'request_id' is required", param="request_id", code="missing_field")
    if "choice" in body:
        if body["choice"] not in ("once", "session", "always", "deny"):
            raise HttpError(400, "'choice' must be once, session, always or deny", param="choice", code="invalid_choice")
        message: ResolveApproval | AnswerClarification = ResolveApproval(request_id=request_id, choice=body["choice"])
    elif isinstance(body.get("answer"), str):
        message = AnswerClarification(request_id=request_id, answer=body["answer"])
    else:
        raise HttpError(400, "send 'choice' (an approval) or 'answer' (a clarification)", param="choice", code="missing_field")
    ctx.tell(session_id, message)
    await send_json(send, 202, {"session_id": session_id, "request_id": request_id})
