"""Helpers for the HTTP/1.1 client tests: a ModelClients fixture, calls with deadlines, tiny servers."""

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import h11
import pytest
import trio
import trio.testing

from actors.agent import ModelClients, ModelSettings
from actors.agent._model import ModelFailure, ModelReply, call_model
from protocols import ChatMessage
from tests.conftest import DEADLINE

USER = (ChatMessage(role="user", content="hi"),)


@pytest.fixture
async def clients() -> AsyncIterator[ModelClients]:
    made = ModelClients()
    yield made
    await made.aclose()


async def ask(
    clients: ModelClients, base_url: str, *, hub: Any = None, extra: dict[str, str] | None = None, messages: tuple[ChatMessage, ...] = USER
) -> ModelReply | ModelFailure:
    settings = ModelSettings(model="test-model", base_url=base_url, api_key="test-key", extra_headers=extra or {})
    with trio.fail_after(DEADLINE):
        return await call_model(clients, settings, messages, [], hub=hub, turn_id="t1", session_id="s1")


def reply_of(result: ModelReply | ModelFailure) -> ModelReply:
    assert isinstance(result, ModelReply), result
    return result


def failure_of(result: ModelReply | ModelFailure) -> ModelFailure:
    assert isinstance(result, ModelFailure), result
    return result


# -- tiny servers -------------------------------------------------------------------------------


def event(payload: dict[str, Any] | str, end: bytes = b"\n\n") -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return b"data: " + data.encode() + end


def delta(text: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}


def sse(*pieces: str) -> bytes:
    """A whole stream: content deltas, the finish, usage, ``[DONE]``."""
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}}
    return b"".join(event(delta(p)) for p in pieces) + event(finish) + event(usage) + event("[DONE]")


def response(body: bytes, *, status: int = 200, headers: bytes = b"content-type: text/event-stream\r\n") -> bytes:
    """A whole HTTP/1.1 response with a Content-Length."""
    return b"HTTP/1.1 %d X\r\n%scontent-length: %d\r\n\r\n%s" % (status, headers, len(body), body)


class Peer:
    """The server side of one connection: reads requests with h11, writes raw bytes."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.http = h11.Connection(h11.SERVER)

    async def request(self) -> tuple[h11.Request, bytes] | None:
        """The next request (head, body), or None when the client closed the connection."""
        head: h11.Request | None = None
        body = b""
        while True:
            got = self.http.next_event()
            if got is h11.NEED_DATA:
                self.http.receive_data(await self.stream.receive_some(65536))
            elif isinstance(got, h11.Request):
                head = got
            elif isinstance(got, h11.Data):
                body += got.data
            elif isinstance(got, h11.EndOfMessage):
                assert head is not None
                self.http = h11.Connection(h11.SERVER)  # the reply is written raw: start afresh
                return head, body
            else:
                return None

    async def rest(self) -> bytes:
        """Whatever the client still sends, until it closes the connection."""
        data = b""
        with contextlib.suppress(trio.BrokenResourceError):
            while piece := await self.stream.receive_some(65536):
                data += piece
        return data


@contextlib.asynccontextmanager
async def tiny_server(handler: Callable[[trio.SocketStream], Awaitable[None]]) -> AsyncIterator[str]:
    """Serve ``handler`` per connection on 127.0.0.1; yields the base URL ``http://127.0.0.1:PORT/v1``."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handler, listeners)
        try:
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            nursery.cancel_scope.cancel()
