"""``POST /v1/chat/completions``: OpenAI's request and response shapes over a session turn."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from protocols import (
    CancelTurn,
    ChatMessage,
    Role,
    StartTurn,
    TextDelta,
    ToolCall,
    ToolFinished,
    ToolStarted,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnRejected,
)

from ._app import ApiContext, new_id, now, session_id_from
from ._asgi import HttpError, Request, Send, send_json, sse, start_sse
from ._bridge import TrioSubscriber
from ._turns import follow_turn, watch_disconnect

_ROLES: dict[str, Role] = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
FAILURE_STATUS = {"store": 500, "deadline": 504, "restarted": 500}


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text"))
    raise HttpError(400, "message content must be a string or a list of content parts", param="messages", code="invalid_content")


def _bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if value is None:
        return False
    raise HttpError(400, f"{name} must be true or false", param=name, code="invalid_type")


def parse_messages(raw: Any) -> list[ChatMessage]:
    if not isinstance(raw, list) or not raw:
        raise HttpError(400, "'messages' is required: a non-empty list of {role, content}", param="messages", code="missing_field")
    out = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or item.get("role") not in ("system", "developer", "user", "assistant", "tool"):
            raise HttpError(400, f"messages[{index}] needs a role of system, user, assistant or tool", param=f"messages[{index}].role", code="invalid_role")
        role: Role = _ROLES[item["role"]]
        calls = tuple(
            ToolCall(id=str(c.get("id", "")), name=str(c.get("function", {}).get("name", "")), arguments=str(c.get("function", {}).get("arguments", "")))
            for c in item.get("tool_calls") or ()
            if isinstance(c, dict)
        )
        out.append(ChatMessage(role=role, content=_text(item.get("content")), tool_calls=calls, tool_call_id=item.get("tool_call_id"), name=item.get("name")))
    return out


def split_conversation(messages: Sequence[ChatMessage]) -> tuple[str | None, tuple[ChatMessage, ...], str]:
    """``(ephemeral system prompt, history, new user text)``: the last user message is the turn."""
    system = "\n\n".join(m.content or "" for m in messages if m.role == "system") or None
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    if not users:
        raise HttpError(400, "'messages' has no user message to answer", param="messages", code="missing_user_message")
    last = users[-1]
    history = tuple(m for m in messages[:last] if m.role != "system")
    return system, history, messages[last].content or ""


async def chat_completions(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    body = await request.json()
    messages = parse_messages(body.get("messages"))
    stream = _bool(body.get("stream"), "stream")
    system, history, text = split_conversation(messages)
    first_user = next(m.content or "" for m in messages if m.role == "user")
    session_id = session_id_from(request, system, first_user)
    model = str(body.get("model") or ctx.model_name)
    turn_id = new_id("chatcmpl-")
    headers = {"x-hermes-session-id": session_id}
    ctx.admit()
    try:
        subscriber = TrioSubscriber(ctx.reactor, turn_id=turn_id)
        hub = ctx.hubs.get(session_id)
        hub.subscribe(subscriber, after_seq=hub.last_seq)
        try:
            ctx.tell(session_id, StartTurn(text=text, turn_id=turn_id, instructions=system, history=history, policy="queue"))
            async with watch_disconnect(request) as gone:
                if stream:
                    await _stream(ctx, send, subscriber, turn_id, model, headers)
                else:
                    await _reply(send, subscriber, turn_id, model, headers)
            if gone.cancelled_caught:
                ctx.tell(session_id, CancelTurn(turn_id=turn_id, reason="the client disconnected"))
        finally:
            hub.unsubscribe(subscriber)
    finally:
        ctx.release()


def _usage(done: TurnCompleted) -> dict[str, int]:
    return {"prompt_tokens": done.input_tokens, "completion_tokens": done.output_tokens, "total_tokens": done.input_tokens + done.output_tokens}


def _failure(event: Any) -> HttpError:
    if isinstance(event, TurnFailed):
        status = FAILURE_STATUS.get(event.kind, 502)
        return HttpError(status, event.error, type="server_error" if status != 502 else "upstream_error", code=event.kind)
    if isinstance(event, TurnRejected):
        return HttpError(429, event.reason, type="rate_limit_error", code="session_busy", headers={"retry-after": "1"})
    return HttpError(409, f"the turn was cancelled: {event.reason}", type="invalid_request_error", code="cancelled")


async def _reply(send: Send, subscriber: TrioSubscriber, turn_id: str, model: str, headers: dict[str, str]) -> None:
    follower = follow_turn(subscriber)
    while True:
        event = await follower.next()
        if isinstance(event, TurnCompleted):
            payload = {
                "id": turn_id,
                "object": "chat.completion",
                "created": now(),
                "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": event.text}, "finish_reason": "stop"}],
                "usage": _usage(event),
            }
            await send_json(send, 200, payload, headers)
            return
        if isinstance(event, TurnFailed | TurnCancelled | TurnRejected):
            error = _failure(event)
            await send_json(send, error.status, error.body(), {**headers, **error.headers})
            return


async def _stream(ctx: ApiContext, send: Send, subscriber: TrioSubscriber, turn_id: str, model: str, headers: dict[str, str]) -> None:
    created = now()

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        return sse({"id": turn_id, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})

    await start_sse(send, headers)
    await send({"type": "http.response.body", "body": chunk({"role": "assistant", "content": ""}), "more_body": True})
    follower = follow_turn(subscriber, keepalive=ctx.keepalive)
    while not follower.done:
        event = await follower.next()
        if event is None:
            out = b": keepalive\n\n"
        elif isinstance(event, TextDelta):
            out = chunk({"content": event.text})
        elif isinstance(event, ToolStarted):
            out = sse({"tool": event.name, "call_id": event.call_id, "status": "started", "arguments": event.arguments}, event="hermes.tool.progress")
        elif isinstance(event, ToolFinished):
            out = sse({"tool": event.name, "call_id": event.call_id, "status": "completed", "ok": event.ok, "preview": event.preview}, event="hermes.tool.progress")
        elif isinstance(event, TurnCompleted):
            out = chunk({}, "stop", usage=_usage(event)) + b"data: [DONE]\n\n"
        elif isinstance(event, TurnFailed | TurnCancelled | TurnRejected):
            out = sse(_failure(event).body()) + b"data: [DONE]\n\n"
        else:
            continue
        await send({"type": "http.response.body", "body": out, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})

