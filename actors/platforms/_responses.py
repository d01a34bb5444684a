"""The Responses API: ``POST /v1/responses`` (plain or streamed), ``GET`` / ``DELETE /v1/responses/{id}``.

A response is one session turn. ``previous_response_id`` continues the session of that
response; ``conversation`` names a session; without either a response starts a session
of its own. Stored responses live in the session store (``responses`` table, bounded:
the oldest go first), so chains survive a restart of the server.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from protocols import (
    CancelTurn,
    DeleteResponse,
    PutResponse,
    ChatMessage,
    StartTurn,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnRejected,
)

from ._app import ApiContext, new_id
from ._asgi import HttpError, Request, Send, send_json, sse, start_sse
from ._bridge import TrioSubscriber
from ._chat import _bool, _failure, _text
from ._sessions_api import _read, _write
from ._turns import follow_turn, watch_disconnect

def _parse_input(value: Any) -> tuple[tuple[ChatMessage, ...], str]:
    """``(history, new user text)`` from a string or an array of input items."""
    if isinstance(value, str) and value:
        return (), value
    if not isinstance(value, list) or not value:
        raise HttpError(400, "'input' is required: a string or a non-empty list of input items", param="input", code="missing_field")
    messages: list[ChatMessage] = []
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise HttpError(400, f"input[{index}] must be an object", param=f"input[{index}]", code="invalid_item")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise HttpError(400, f"input[{index}].role must be user, assistant or system", param=f"input[{index}].role", code="invalid_role")
            messages.append(ChatMessage(role="system" if role in ("system", "developer") else role, content=_text(item.get("content"))))
        elif kind == "function_call_output":
            messages.append(ChatMessage(role="tool", tool_call_id=str(item.get("call_id", "")), content=str(item.get("output", ""))))
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    if not users:
        raise HttpError(400, "'input' has no user message to answer", param="input", code="missing_user_message")
    last = users[-1]
    return tuple(m for m in messages[:last] if m.role != "system"), messages[last].content or ""


def _message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []}


def _base(response_id: str, model: str, created: int, previous: str | None, instructions: str | None) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": "in_progress",
        "model": model,
        "output": [],
        "previous_response_id": previous,
        "instructions": instructions,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": None,
        "incomplete_details": None,
        "metadata": {},
        "usage": None,
    }


async def create_response(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    body = await request.json()
    history, text = _parse_input(body.get("input"))
    previous = body.get("previous_response_id")
    conversation = body.get("conversation")
    if previous and conversation:
        raise HttpError(400, "use previous_response_id or conversation, not both", param="conversation", code="conflicting_parameters")
    response_id = new_id("resp_")
    if previous:
        found = await _stored(ctx, str(previous))
        if found is None:
            raise HttpError(404, f"no stored response {previous!r} to continue", param="previous_response_id", code="response_not_found")
        session_id = found[0]
    elif conversation:
        name = conversation.get("id") if isinstance(conversation, dict) else conversation
        if not isinstance(name, str) or not name or len(name) > 200 or "/" in name:
            raise HttpError(400, "conversation must be a name of 1-200 characters without '/'", param="conversation", code="invalid_conversation")
        session_id = f"conv-{name}"
    else:
        session_id = f"resp-{response_id}"
    instructions = body.get("instructions") if isinstance(body.get("instructions"), str) else None
    stream = _bool(body.get("stream"), "stream")
    keep = _bool(body.get("store", True), "store")
    model = str(body.get("model") or ctx.model_name)
    base = _base(response_id, model, int(time.time()), previous, instructions)
    ctx.admit()
    subscriber = TrioSubscriber(ctx.reactor, turn_id=response_id)
    hub = ctx.hubs.get(session_id)
    hub.subscribe(subscriber, after_seq=hub.last_seq)
    try:
        ctx.tell(session_id, StartTurn(text=text, turn_id=response_id, instructions=instructions, history=history, policy="queue"))
        headers = {"x-hermes-session-id": session_id}
        async def remember(final: dict[str, Any]) -> None:
            # Stored (committed) before the client hears of it, so a follow-up can chain at once.
            if keep:
                body = msgspec.json.encode({k: v for k, v in final.items() if k != "_error"}).decode()
                await _write(ctx, PutResponse(response_id=response_id, session_id=session_id, body=body, created_at=time.time()))

        async with watch_disconnect(request) as gone:
            if stream:
                await _stream(ctx, send, subscriber, base, headers, remember)
            else:
                final = await _collect(subscriber, base)
                await remember(final)
                if final["status"] == "failed":
                    error = final["_error"]
                    await send_json(send, error.status, error.body(), {**headers, **error.headers})
                else:
                    await send_json(send, 200, final, headers)
        if gone.cancelled_caught:
            ctx.tell(session_id, CancelTurn(turn_id=response_id, reason="the client disconnected"))
    finally:
        hub.unsubscribe(subscriber)
        ctx.release()


def _tool_items(event: Any, items: list[dict[str, Any]]) -> dict[str, Any] | None:
    if isinstance(event, ToolStarted):
        item = {"type": "function_call", "id": f"fc_{event.call_id}", "call_id": event.call_id, "name": event.name, "arguments": event.arguments, "status": "completed"}
        items.append(item)
        return item
    if isinstance(event, ToolFinished):
        item = {"type": "function_call_output", "id": f"fco_{event.call_id}", "call_id": event.call_id, "output": event.preview, "status": "completed"}
        items.append(item)
        return item
    return None


def _finish(base: dict[str, Any], items: list[dict[str, Any]], event: Any) -> dict[str, Any]:
    final = dict(base)
    if isinstance(event, TurnCompleted):
        final["status"] = "completed"
        final["output"] = [*items, _message_item(new_id("msg_"), event.text, "completed")]
        final["usage"] = {"input_tokens": event.input_tokens, "output_tokens": event.output_tokens, "total_tokens": event.input_tokens + event.output_tokens}
    else:
        error = _failure(event)
        final["status"] = "failed"
        final["output"] = items
        final["error"] = {"code": error.code or "server_error", "message": error.message}
        final["_error"] = error
    return final


async def _collect(subscriber: TrioSubscriber, base: dict[str, Any]) -> dict[str, Any]:
    follower = follow_turn(subscriber)
    items: list[dict[str, Any]] = []
    while True:
        event = await follower.next()
        _tool_items(event, items)
        if isinstance(event, TurnCompleted | TurnFailed | TurnCancelled | TurnRejected):
            return _finish(base, items, event)


async def _stream(
    ctx: ApiContext,
    send: Send,
    subscriber: TrioSubscriber,
    base: dict[str, Any],
    headers: dict[str, str],
    remember: Callable[[dict[str, Any]], Awaitable[None]],
) -> None:
    sequence = 0

    async def emit(kind: str, payload: dict[str, Any]) -> None:
        nonlocal sequence
        await send({"type": "http.response.body", "body": sse({"type": kind, "sequence_number": sequence, **payload}, event=kind), "more_body": True})
        sequence += 1

    await start_sse(send, headers)
    await emit("response.created", {"response": base})
    items: list[dict[str, Any]] = []
    message_id = new_id("msg_")
    text: list[str] = []
    opened = False
    follower = follow_turn(subscriber, keepalive=ctx.keepalive)
    while True:
        event = await follower.next()
        if event is None:
            await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
            continue
        tool_item = _tool_items(event, items)
        if tool_item is not None:
            await emit("response.output_item.added", {"output_index": len(items) - 1, "item": tool_item})
            await emit("response.output_item.done", {"output_index": len(items) - 1, "item": tool_item})
        elif isinstance(event, TextDelta):
            if not opened:
                opened = True
                await emit("response.output_item.added", {"output_index": len(items), "item": _message_item(message_id, "", "in_progress")})
                await emit("response.content_part.added", {"item_id": message_id, "output_index": len(items), "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}})
            text.append(event.text)
            await emit("response.output_text.delta", {"item_id": message_id, "output_index": len(items), "content_index": 0, "delta": event.text})
        elif isinstance(event, TurnCompleted | TurnFailed | TurnCancelled | TurnRejected):
            final = _finish(base, items, event)
            if isinstance(event, TurnCompleted):
                message = _message_item(message_id, event.text, "completed")
                final["output"] = [*items, message]
            await remember(final)
            if isinstance(event, TurnCompleted):
                if opened:
                    await emit("response.output_text.done", {"item_id": message_id, "output_index": len(items), "content_index": 0, "text": event.text})
                    await emit("response.content_part.done", {"item_id": message_id, "output_index": len(items), "content_index": 0, "part": message["content"][0]})
                await emit("response.output_item.done", {"output_index": len(items), "item": message})
                await emit("response.completed", {"response": final})
            else:
                shown = {k: v for k, v in final.items() if k != "_error"}
                await emit("response.failed", {"response": shown})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return


async def _stored(ctx: ApiContext, response_id: str) -> tuple[str, str] | None:
    found: tuple[str, str] | None = await _read(ctx, lambda r: r.get_response(response_id))
    return found


async def get_response(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    found = await _stored(ctx, params["response_id"])
    if found is None:
        raise HttpError(404, f"no stored response {params['response_id']!r}", code="response_not_found")
    await send_json(send, 200, msgspec.json.decode(found[1]))


async def delete_response(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    reply = await _write(ctx, DeleteResponse(response_id=params["response_id"]))
    if not reply.deleted:
        raise HttpError(404, f"no stored response {params['response_id']!r}", code="response_not_found")
    await send_json(send, 200, {"id": params["response_id"], "object": "response", "deleted": True})
