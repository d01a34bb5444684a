"""The Responses API: ``POST /v1/responses`` (plain or streamed), ``GET`` / ``DELETE /v1/responses/{id}``.

A response is one session turn. ``previous_response_id`` continues the session of that
response; ``conversation`` names a session; without either a response starts a session
of its own. Stored responses live in the session store (``responses`` table, bounded:
the oldest go first), so chains survive a restart of the server.

The tools the server runs appear in ``output`` as ``mcp_call`` items (hosted calls:
``server_label`` ``"hermes"``, ``output``, ``error``, ``status``), never as
``function_call``, which a client would try to execute itself. A client that sends a
previous response's output back as ``input`` may include them: they are skipped.
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
    StartTurn,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnRejected,
)

from ._app import ApiContext, check_session_id, new_id
from ._asgi import HttpError, Request, Send, send_json, sse, start_sse
from ._bridge import TrioSubscriber
from ._chat import _bool, _failure
from ._responses_request import parse_input, parse_response_options
from ._sessions_api import _write, read_store
from ._turns import follow_turn, watch_disconnect

SERVER_LABEL = "hermes"
"""The ``server_label`` of the ``mcp_call`` items that stand for the tools the server runs."""


def _message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    content = [] if status == "in_progress" else [{"type": "output_text", "text": text, "annotations": []}]
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": content}


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
    talk = parse_input(body.get("input"))
    options = parse_response_options(body)
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
        session_id = check_session_id(f"conv-{name}", "conversation")  # printable: it names an actor
    else:
        session_id = f"resp-{response_id}"
    instructions = body.get("instructions") if isinstance(body.get("instructions"), str) else None
    if talk.system:
        instructions = "\n\n".join(filter(None, (instructions, talk.system)))
    stream = _bool(body.get("stream"), "stream")
    keep = _bool(body.get("store", True), "store")
    model = str(body.get("model") or ctx.model_name)
    base = _base(response_id, model, int(time.time()), previous, instructions)
    ctx.admit()
    subscriber = TrioSubscriber(ctx.reactor, turn_id=response_id)
    hub = ctx.hubs.get(session_id)
    hub.subscribe(subscriber, after_seq=hub.last_seq)
    try:
        start = StartTurn(
            text=talk.text,
            turn_id=response_id,
            instructions=instructions,
            history=talk.history,
            tool_results=talk.tool_results,
            options=options,
            policy="queue",
        )
        ctx.tell(session_id, start)
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


class _Output:
    """A response's output items, in order, built from its turn's events.

    Tools the server runs become ``mcp_call`` items (``server_label`` ``"hermes"``): hosted
    calls that clients show but never execute, unlike ``function_call``. Text streamed before
    a tool call is a message item of its own; the answer after the last call is the final
    message. :meth:`feed` returns the stream events an event causes, as ``(type, payload)``;
    output indices are the items' places in :attr:`items`, in the order they were added.
    """

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.calls: dict[str, int] = {}
        """Call id -> index of its running ``mcp_call`` item."""
        self.message: int | None = None
        """Index of the message item that text deltas go to, while one is open."""
        self.text: list[str] = []

    def feed(self, event: Any) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        if isinstance(event, TextDelta):
            if self.message is None:
                out += self._open_message()
            self.text.append(event.text)
            out.append(("response.output_text.delta", {**self._where(self.message), "content_index": 0, "delta": event.text}))
        elif isinstance(event, ToolStarted):
            out += self._close_message("".join(self.text), "completed")
            index = self._add(_mcp_item(new_id("mcp_"), event.name, event.arguments), out)
            self.calls[event.call_id] = index
            out.append(("response.mcp_call_arguments.done", {**self._where(index), "arguments": event.arguments}))
            out.append(("response.mcp_call.in_progress", self._where(index)))
        elif isinstance(event, ToolFinished):
            found = self.calls.pop(event.call_id, None)
            if found is not None:
                index = found
            else:  # a finish without its start (the start fell out of a replay): the item whole
                index = self._add(_mcp_item(new_id("mcp_"), event.name, ""), out)
            item = self.items[index]
            item.update(status="completed" if event.ok else "failed", output=event.preview, error=None if event.ok else event.preview)
            out.append(("response.mcp_call.completed" if event.ok else "response.mcp_call.failed", self._where(index)))
            out.append(("response.output_item.done", {"output_index": index, "item": item}))
        elif isinstance(event, TurnCompleted):
            if self.message is None and (event.text or not event.tool_calls):
                out += self._open_message()
            out += self._close_message(event.text, "completed")
            for call in event.tool_calls:  # the client's own function tools: the client runs them
                index = self._add(_function_item(call.id, call.name, call.arguments), out)
                out.append(("response.function_call_arguments.done", {**self._where(index), "arguments": call.arguments}))
                out.append(("response.output_item.done", {"output_index": index, "item": self.items[index]}))
        elif isinstance(event, TurnFailed | TurnCancelled | TurnRejected):
            out += self._close_message("".join(self.text), "incomplete")
            for index in self.calls.values():  # calls the turn's end cut short
                self.items[index]["status"] = "incomplete"
                out.append(("response.output_item.done", {"output_index": index, "item": self.items[index]}))
            self.calls.clear()
        return out

    def _where(self, index: int | None) -> dict[str, Any]:
        assert index is not None
        return {"item_id": self.items[index]["id"], "output_index": index}

    def _add(self, item: dict[str, Any], out: list[tuple[str, dict[str, Any]]]) -> int:
        self.items.append(item)
        out.append(("response.output_item.added", {"output_index": len(self.items) - 1, "item": dict(item)}))
        return len(self.items) - 1

    def _open_message(self) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        self.message = self._add(_message_item(new_id("msg_"), "", "in_progress"), out)
        out.append(
            ("response.content_part.added", {**self._where(self.message), "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}})
        )
        return out

    def _close_message(self, text: str, status: str) -> list[tuple[str, dict[str, Any]]]:
        index, self.message, self.text = self.message, None, []
        if index is None:
            return []
        item = self.items[index] = _message_item(self.items[index]["id"], text, status)
        part = item["content"][0]
        where = self._where(index)
        return [
            ("response.output_text.done", {**where, "content_index": 0, "text": text}),
            ("response.content_part.done", {**where, "content_index": 0, "part": part}),
            ("response.output_item.done", {"output_index": index, "item": item}),
        ]


def _function_item(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": name, "arguments": arguments, "status": "completed"}


def _mcp_item(item_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "type": "mcp_call",
        "id": item_id,
        "server_label": SERVER_LABEL,
        "name": name,
        "arguments": arguments,
        "output": None,
        "error": None,
        "status": "in_progress",
    }


def _finish(base: dict[str, Any], output: _Output, event: Any) -> dict[str, Any]:
    final = dict(base)
    final["output"] = output.items
    if isinstance(event, TurnCompleted):
        final["status"] = "completed"
        final["usage"] = {
            "input_tokens": event.input_tokens,
            "input_tokens_details": {"cached_tokens": event.cache_read_tokens},
            "output_tokens": event.output_tokens,
            "total_tokens": event.input_tokens + event.output_tokens,
        }
    else:
        error = _failure(event)
        final["status"] = "failed"
        final["error"] = {"code": error.code or "server_error", "message": error.message}
        final["_error"] = error
    return final


async def _collect(subscriber: TrioSubscriber, base: dict[str, Any]) -> dict[str, Any]:
    follower = follow_turn(subscriber)
    output = _Output()
    while True:
        event = await follower.next()
        output.feed(event)
        if isinstance(event, TurnCompleted | TurnFailed | TurnCancelled | TurnRejected):
            return _finish(base, output, event)


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
    output = _Output()
    follower = follow_turn(subscriber, keepalive=ctx.keepalive)
    while True:
        event = await follower.next()
        if event is None:
            await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
            continue
        for kind, payload in output.feed(event):
            await emit(kind, payload)
        if isinstance(event, TurnCompleted | TurnFailed | TurnCancelled | TurnRejected):
            final = _finish(base, output, event)
            await remember(final)  # stored before the client hears of it: a follow-up can chain at once
            if isinstance(event, TurnCompleted):
                await emit("response.completed", {"response": final})
            else:
                await emit("response.failed", {"response": {k: v for k, v in final.items() if k != "_error"}})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return


async def _stored(ctx: ApiContext, response_id: str) -> tuple[str, str] | None:
    found: tuple[str, str] | None = await read_store(ctx, lambda r: r.get_response(response_id))
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
