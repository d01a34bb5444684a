"""``POST /v1/chat/completions``: OpenAI's request and response shapes over a session turn."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from protocols import (
    CancelTurn,
    StartTurn,
    TextDelta,
    ToolCall,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnRejected,
)

from ._app import ApiContext, new_id, now
from ._asgi import HttpError, Request, Send, send_json, sse, start_sse
from ._bridge import TrioSubscriber
from ._chat_request import parse_messages, parse_options, split_conversation
from ._chat_session import place, remember
from ._plain_chat import serve_plain
from ._progress import tool_progress_comment
from ._turns import follow_turn, watch_disconnect

FAILURE_STATUS = {"store": 500, "deadline": 504, "restarted": 500, "not_owner": 503}
"""HTTP status of a failed turn by its kind (``not_owner``: another node took the session; retry)."""


def _bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if value is None:
        return False
    raise HttpError(400, f"{name} must be true or false", param=name, code="invalid_type")


async def chat_completions(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    if await serve_plain(ctx, request, send):  # the plain model id: forwarded upstream, no session
        return
    body = await request.json()
    conversation = split_conversation(parse_messages(body.get("messages")))
    if conversation.has_images and ctx.upstream is not None and not ctx.upstream.sees_images:
        raise HttpError(
            400,
            f"the model {ctx.upstream.model!r} cannot see images; send text only, or set model.vision: true in config.yaml if it can",
            param="messages",
            code="images_not_supported",
        )
    options = parse_options(body)
    stream = _bool(body.get("stream"), "stream")
    stream_options = body.get("stream_options")
    include_usage = stream_options.get("include_usage") if isinstance(stream_options, dict) else None
    usage_chunk = stream and _bool(include_usage, "stream_options.include_usage")
    placement = await place(ctx, request, conversation)
    session_id = placement.session_id
    model = str(body.get("model") or ctx.model_name)
    turn_id = new_id("chatcmpl-")
    headers = {"x-hermes-session-id": session_id}

    def done(event: TurnCompleted) -> None:
        remember(ctx, placement, conversation, event.text, event.tool_calls)

    ctx.admit()
    try:
        subscriber = TrioSubscriber(ctx.reactor, turn_id=turn_id)
        hub = ctx.hubs.get(session_id)
        hub.subscribe(subscriber, after_seq=hub.last_seq)
        try:
            start = StartTurn(
                text=conversation.text,
                images=conversation.images,
                turn_id=turn_id,
                instructions=conversation.system,
                history=conversation.history if placement.seed else (),
                tool_results=conversation.tool_results,
                options=options,
                branched_from=placement.branched_from,
                policy="queue",
            )
            ctx.tell(session_id, start)
            async with watch_disconnect(request) as gone:
                if stream:
                    await _stream(ctx, send, subscriber, turn_id, model, headers, done=done, usage_chunk=usage_chunk)
                else:
                    await _reply(send, subscriber, turn_id, model, headers, done=done)
            if gone.cancelled_caught:
                ctx.tell(session_id, CancelTurn(turn_id=turn_id, reason="the client disconnected"))
        finally:
            hub.unsubscribe(subscriber)
    finally:
        ctx.release()


def _completion_chunks(chunk: Callable[..., bytes], frame: Callable[..., bytes], event: TurnCompleted, usage_chunk: bool) -> bytes:
    """The stream's end: client tool calls (if any), the finish reason, usage, ``[DONE]``."""
    out = b""
    if event.tool_calls:
        out += chunk({"tool_calls": [{"index": i, **call} for i, call in enumerate(_wire_calls(event.tool_calls))]})
    finish = "tool_calls" if event.tool_calls else "stop"
    if usage_chunk:  # OpenAI's shape for stream_options.include_usage: a last chunk without choices
        out += chunk({}, finish) + frame(choices=[], usage=_usage(event))
    else:
        out += chunk({}, finish, usage=_usage(event))
    return out + b"data: [DONE]\n\n"


def _usage(done: TurnCompleted) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": done.input_tokens,
        "completion_tokens": done.output_tokens,
        "total_tokens": done.input_tokens + done.output_tokens,
    }
    usage["prompt_tokens_details"] = {"cached_tokens": done.cache_read_tokens}
    return usage


def _failure(event: Any) -> HttpError:
    if isinstance(event, TurnFailed):
        status = FAILURE_STATUS.get(event.kind, 502)
        retry = {"retry-after": "1"} if status == 503 else None
        return HttpError(status, event.error, type="server_error" if status != 502 else "upstream_error", code=event.kind, headers=retry)
    if isinstance(event, TurnRejected) and event.owner:  # another node holds the session: a new connection may reach it
        retry = {"retry-after": str(max(1, math.ceil(event.retry_after))), "connection": "close"}
        return HttpError(409, event.reason, type="invalid_request_error", code="session_owned_elsewhere", headers=retry)
    if isinstance(event, TurnRejected):
        return HttpError(429, event.reason, type="rate_limit_error", code="session_busy", headers={"retry-after": "1"})
    return HttpError(409, f"the turn was cancelled: {event.reason}", type="invalid_request_error", code="cancelled")


def _wire_calls(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    return [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls]


async def _reply(send: Send, subscriber: TrioSubscriber, turn_id: str, model: str, headers: dict[str, str], *, done: Callable[[TurnCompleted], None]) -> None:
    follower = follow_turn(subscriber)
    while True:
        event = await follower.next()
        if isinstance(event, TurnCompleted):
            done(event)
            message: dict[str, Any] = {"role": "assistant", "content": event.text}
            if event.tool_calls:  # the model called the client's tools: the client runs them
                message = {"role": "assistant", "content": event.text or None, "tool_calls": _wire_calls(event.tool_calls)}
            payload = {
                "id": turn_id,
                "object": "chat.completion",
                "created": now(),
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if event.tool_calls else "stop"}],
                "usage": _usage(event),
            }
            await send_json(send, 200, payload, headers)
            return
        if isinstance(event, TurnFailed | TurnCancelled | TurnRejected):
            error = _failure(event)
            await send_json(send, error.status, error.body(), {**headers, **error.headers})
            return


async def _stream(
    ctx: ApiContext,
    send: Send,
    subscriber: TrioSubscriber,
    turn_id: str,
    model: str,
    headers: dict[str, str],
    *,
    done: Callable[[TurnCompleted], None],
    usage_chunk: bool,
) -> None:
    created = now()

    def frame(**fields: Any) -> bytes:
        return sse({"id": turn_id, "object": "chat.completion.chunk", "created": created, "model": model, **fields})

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        return frame(choices=[{"index": 0, "delta": delta, "finish_reason": finish}], **extra)

    await start_sse(send, headers)
    await send({"type": "http.response.body", "body": chunk({"role": "assistant", "content": ""}), "more_body": True})
    follower = follow_turn(subscriber, keepalive=ctx.keepalive)
    while not follower.done:
        event = await follower.next()
        if event is None:
            out = b": keepalive\n\n"
        elif isinstance(event, TextDelta):
            out = chunk({"content": event.text})
        elif isinstance(event, ToolStarted | ToolProgress | ToolFinished):
            progress = tool_progress_comment(ctx, event)  # SSE comments, and only when asked for
            if progress is None:
                continue
            out = progress
        elif isinstance(event, TurnCompleted):
            done(event)
            out = _completion_chunks(chunk, frame, event, usage_chunk)
        elif isinstance(event, TurnFailed | TurnCancelled | TurnRejected):
            out = sse(_failure(event).body()) + b"data: [DONE]\n\n"
        else:
            continue
        await send({"type": "http.response.body", "body": out, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
