"""The model calls' HTTP/1.1 client (``actors/agent/_http1.py``) over real sockets on 127.0.0.1.

Ordinary replies, errors and faults come from the test model server; odd server behaviour
(closing an idle connection, answering half a status line, CRLF lines split across reads,
TLS) from tiny trio servers written here. Every wait has a deadline.
"""

import contextlib
import gzip
import json
import socket
from typing import Any

import h11
import pytest
import trio
import trio.testing

from actors.agent import ModelClients, _http1
from actors.agent._http1 import Endpoint
from actors.chaos import HttpError, TextReply, open_model_server
from protocols import ChatMessage
from tests.agent.http1_kit import Peer, ask, delta, event, failure_of, reply_of, response, sse, tiny_server

# -- the ordinary path ----------------------------------------------------------------------------


async def test_a_streamed_reply_arrives_whole_and_the_next_call_reuses_its_connection(clients: ModelClients) -> None:
    async with open_model_server() as server:
        first = reply_of(await ask(clients, server.base_url))
        second = reply_of(await ask(clients, server.base_url))
    assert first.content == second.content == "echo: hi"
    assert first.finish_reason == "stop" and first.input_tokens == 1 and first.output_tokens == 2
    assert [r.connection for r in server.requests] == [1, 1]


@pytest.mark.parametrize("suffix", ["/v1", "/v1/", ""])
async def test_the_request_goes_to_the_base_urls_path_with_its_headers(clients: ModelClients, suffix: str) -> None:
    seen: list[tuple[h11.Request, bytes]] = []

    async def handler(stream: trio.SocketStream) -> None:
        peer = Peer(stream)
        while (got := await peer.request()) is not None:
            seen.append(got)
            await stream.send_all(response(sse("ok")))

    async with tiny_server(handler) as base_url:
        base_url = base_url.removesuffix("/v1") + suffix
        reply_of(await ask(clients, base_url, extra={"X-Extra": "yes", "User-Agent": "mine"}))
    ((head, body),) = seen
    headers = {name.decode(): value.decode() for name, value in head.headers}
    assert len(headers) == len(head.headers)  # no header twice
    assert head.method == b"POST"
    assert head.target == (b"/v1/chat/completions" if suffix else b"/chat/completions")
    port = base_url.split(":")[2].split("/")[0]
    assert headers == {
        "host": f"127.0.0.1:{port}",
        "authorization": "Bearer test-key",
        "content-type": "application/json",
        "accept": "text/event-stream",
        "accept-encoding": "identity",
        "user-agent": "mine",  # the settings' extra headers win, whatever their case
        "x-hermes-session-id": "s1",
        "x-extra": "yes",
        "content-length": str(len(body)),
    }
    sent = json.loads(body)
    assert sent["model"] == "test-model" and sent["stream"] is True and sent["messages"] == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [
        ("http://127.0.0.1:8000/v1", (("http", "127.0.0.1", 8000), "/v1/chat/completions", "127.0.0.1:8000")),
        ("https://api.example.com/v1/", (("https", "api.example.com", 443), "/v1/chat/completions", "api.example.com")),
        ("HTTP://Example.com", (("http", "example.com", 80), "/chat/completions", "example.com")),
        ("http://[::1]:9/openai/v1?api-version=2", (("http", "::1", 9), "/openai/v1/chat/completions?api-version=2", "[::1]:9")),
        ("http://h/a b", (("http", "h", 80), "/a%20b/chat/completions", "h")),
        ("ftp://example.com/v1", None),
        ("http://user:secret@example.com/v1", None),
        ("https://bücher.example/v1", None),
        ("http://example.com:notaport/v1", None),
        ("/v1", None),
    ],
)
def test_a_base_url_parses_into_origin_target_and_host_or_is_left_to_httpx(base_url: str, expected: tuple[Any, ...] | None) -> None:
    endpoint = Endpoint.parse(base_url, "chat/completions")
    assert (None if endpoint is None else (endpoint.origin, endpoint.target, endpoint.host_header)) == expected


async def test_sse_lines_split_across_reads_with_crlf_and_a_last_line_without_newline_are_read(clients: ModelClients) -> None:
    body = (
        b": a comment\r\nevent: message\r\n"
        + event(delta("Hel"), b"\r\n\r\n")
        + event(delta("lo, "), b"\r\r")  # bare CR line ends are SSE too
        + event(delta("world"), b"\n\n")
        + event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}, b"\r\n\r\n")
        + b"data: [DONE]"  # the body ends without a newline
    )

    async def handler(stream: trio.SocketStream) -> None:
        peer = Peer(stream)
        while await peer.request() is not None:
            whole = response(body)
            for start in range(0, len(whole), 3):  # every line and every CRLF is cut somewhere
                await stream.send_all(whole[start : start + 3])

    async with tiny_server(handler) as base_url:
        reply = reply_of(await ask(clients, base_url))
    assert reply.content == "Hello, world"
    assert reply.finish_reason == "stop"


async def test_a_gzip_body_sent_despite_identity_is_decompressed(clients: ModelClients) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        peer = Peer(stream)
        while await peer.request() is not None:
            await stream.send_all(response(gzip.compress(sse("packed ", "text")), headers=b"content-encoding: gzip\r\n"))

    async with tiny_server(handler) as base_url:
        assert reply_of(await ask(clients, base_url)).content == "packed text"


# -- errors ---------------------------------------------------------------------------------------


async def test_an_http_error_comes_back_classified_with_retry_after_and_its_connection_is_reused(clients: ModelClients) -> None:
    async with open_model_server() as server:
        server.script([HttpError(status=429, message="slow down", retry_after=3), TextReply(content="after")])
        failure = failure_of(await ask(clients, server.base_url))
        assert reply_of(await ask(clients, server.base_url)).content == "after"
    assert (failure.kind, failure.status, failure.detail, failure.retry_after) == ("rate_limit", 429, "slow down", 3.0)
    assert [r.connection for r in server.requests] == [1, 1]


async def test_an_error_body_longer_than_the_limit_is_cut_and_its_connection_not_reused(clients: ModelClients) -> None:
    connections = 0

    async def handler(stream: trio.SocketStream) -> None:
        nonlocal connections
        connections += 1
        peer = Peer(stream)
        while await peer.request() is not None:
            if connections == 1:
                with contextlib.suppress(trio.BrokenResourceError):
                    await stream.send_all(response(b"x" * (3 << 20), status=500, headers=b""))
                return
            await stream.send_all(response(sse("fine")))

    async with tiny_server(handler) as base_url:
        failure = failure_of(await ask(clients, base_url))
        assert reply_of(await ask(clients, base_url)).content == "fine"
    assert (failure.kind, failure.status, failure.detail) == ("server", 500, "x" * 300)
    assert connections == 2


async def test_an_answer_sent_before_the_server_stopped_reading_the_request_is_still_read(clients: ModelClients) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        http = h11.Connection(h11.SERVER)
        while not isinstance(http.next_event(), h11.Request):  # the head only, never the body
            http.receive_data(await stream.receive_some(65536))
        too_long = b'{"error": {"message": "the context length is exceeded"}}'
        await stream.send_all(response(too_long, status=413, headers=b"connection: close\r\n"))
        # Returning closes the socket with the body unread: the client's send breaks.

    huge = (ChatMessage(role="user", content="x" * (16 << 20)),)
    async with tiny_server(handler) as base_url:
        failure = failure_of(await ask(clients, base_url, messages=huge))
    assert (failure.kind, failure.status, failure.detail) == ("context_overflow", 413, "the context length is exceeded")


async def test_an_error_inside_the_stream_is_classified_by_its_code(clients: ModelClients) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        peer = Peer(stream)
        while await peer.request() is not None:
            await stream.send_all(response(event(delta("par")) + event({"error": {"message": "overloaded", "code": "server_error"}})))

    async with tiny_server(handler) as base_url:
        failure = failure_of(await ask(clients, base_url))
    assert (failure.kind, failure.status, failure.detail) == ("overloaded", None, "overloaded")


async def test_a_stream_cut_mid_body_fails_as_transport_and_the_next_call_opens_a_new_connection(clients: ModelClients) -> None:
    async with open_model_server() as server:
        server.script([TextReply(content="one two three four", cut_after_chunks=2), TextReply(content="whole")])
        failure = failure_of(await ask(clients, server.base_url))
        assert reply_of(await ask(clients, server.base_url)).content == "whole"
    assert (failure.kind, failure.detail) == ("transport", "the connection closed before the response ended")
    assert [r.connection for r in server.requests] == [1, 2]


async def test_a_body_that_ends_without_done_fails_as_transport(clients: ModelClients) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        peer = Peer(stream)
        while await peer.request() is not None:
            await stream.send_all(response(event(delta("half"))))

    async with tiny_server(handler) as base_url:
        failure = failure_of(await ask(clients, base_url))
    assert (failure.kind, failure.detail) == ("transport", "the stream ended before [DONE]")


async def test_malformed_http_fails_as_transport_and_says_so(clients: ModelClients) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        if await Peer(stream).request() is not None:
            await stream.send_all(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")

    async with tiny_server(handler) as base_url:
        failure = failure_of(await ask(clients, base_url))
    assert failure.kind == "transport" and failure.detail.startswith("the provider sent malformed HTTP (")


async def test_a_refused_connection_fails_as_transport_naming_the_address(clients: ModelClients) -> None:
    with socket.socket() as probe:  # a port nobody listens on (bound, never listening)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        failure = failure_of(await ask(clients, f"http://127.0.0.1:{port}/v1"))
    assert failure.kind == "transport" and failure.detail.startswith(f"could not connect to 127.0.0.1:{port} (")


async def test_a_connect_that_takes_too_long_fails_as_timeout(
    clients: ModelClients, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    async def never(host: str, port: int) -> trio.SocketStream:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    monkeypatch.setattr(trio, "open_tcp_stream", never)
    monkeypatch.setattr(_http1, "CONNECT_TIMEOUT", 2.0)
    failure = failure_of(await ask(clients, "http://127.0.0.1:9/v1"))
    assert (failure.kind, failure.detail) == ("timeout", "could not connect to 127.0.0.1:9 within 2 s")
