"""The HTTP/1.1 client's connections: cancel, reuse, retry, the idle cap and expiry; proxies (httpx carries them) and TLS."""

import contextlib
import functools
import socket
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from actors.agent import ModelClients, ModelSettings, _http1
from actors.agent._http1 import Endpoint
from actors.agent._model import ModelFailure, ModelReply
from actors.chaos import HttpError, TextReply, open_model_server
from tests.agent.http1_kit import Peer, ask, delta, event, failure_of, reply_of, response, sse, tiny_server
from tests.conftest import DEADLINE

# -- connections: cancel, reuse, retry -----------------------------------------------------------------


class FirstDelta:
    """Stands for the session hub: notes the first delta published."""

    def __init__(self) -> None:
        self.seen = trio.Event()

    def publish(self, item: Any) -> Any:
        self.seen.set()
        return item


async def test_cancelling_a_call_mid_stream_closes_its_connection_at_once(clients: ModelClients) -> None:
    closed = trio.Event()

    async def handler(stream: trio.SocketStream) -> None:
        peer = Peer(stream)
        assert await peer.request() is not None
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        first = event(delta("streaming"))
        await stream.send_all(head + b"%x\r\n%s\r\n" % (len(first), first))
        assert await peer.rest() == b""  # then nothing until the client closes
        closed.set()

    hub = FirstDelta()
    async with tiny_server(handler) as base_url:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(ask, clients, base_url, hub=hub))
            with trio.fail_after(DEADLINE):
                await hub.seen.wait()
            nursery.cancel_scope.cancel()
        with trio.fail_after(DEADLINE):
            await closed.wait()


async def test_an_idle_connection_the_server_closed_is_dropped_unused(clients: ModelClients) -> None:
    connections = 0
    hung_up, stale_closed = trio.Event(), trio.Event()
    stale: list[bytes] = []

    async def handler(stream: trio.SocketStream) -> None:
        nonlocal connections
        connections += 1
        first = connections == 1
        peer = Peer(stream)
        assert await peer.request() is not None
        await stream.send_all(response(sse("answer")))
        if first:
            stream.socket.shutdown(socket.SHUT_WR)  # FIN: the client's idle socket turns readable
            hung_up.set()
            stale.append(await peer.rest())  # what the client still sends on it before closing it
            stale_closed.set()

    async with tiny_server(handler) as base_url:
        reply_of(await ask(clients, base_url))
        with trio.fail_after(DEADLINE):
            await hung_up.wait()
            idle = clients._pool._idle[("http", "127.0.0.1", int(base_url.split(":")[2].split("/")[0]))]
            await trio.lowlevel.wait_readable(idle[-1].socket)  # the FIN has arrived
        assert reply_of(await ask(clients, base_url)).content == "answer"
        with trio.fail_after(DEADLINE):
            await stale_closed.wait()
    assert connections == 2 and stale == [b""]  # the stale connection was closed without a byte written


async def test_a_reused_connection_closed_before_any_response_byte_is_retried_once_on_a_new_one(clients: ModelClients) -> None:
    requests: list[int] = []

    async def handler(stream: trio.SocketStream) -> None:
        number = len(set(requests)) + 1
        peer = Peer(stream)
        while await peer.request() is not None:
            requests.append(number)
            if number == 1 and len(requests) == 2:
                return  # read the second request, then hang up without a word (the keep-alive race)
            await stream.send_all(response(sse("answer")))

    async with tiny_server(handler) as base_url:
        reply_of(await ask(clients, base_url))
        assert reply_of(await ask(clients, base_url)).content == "answer"
    assert requests == [1, 1, 2]


async def test_a_reused_connection_that_breaks_after_a_response_byte_is_not_retried(clients: ModelClients) -> None:
    requests = 0

    async def handler(stream: trio.SocketStream) -> None:
        nonlocal requests
        peer = Peer(stream)
        while await peer.request() is not None:
            requests += 1
            if requests == 2:
                await stream.send_all(b"HTTP/1.1 200 OK\r\n")  # half a head, then gone
                return
            await stream.send_all(response(sse("answer")))

    async with tiny_server(handler) as base_url:
        reply_of(await ask(clients, base_url))
        failure = failure_of(await ask(clients, base_url))  # a retry would have been answered
    assert (failure.kind, failure.detail) == ("transport", "the connection closed before the response started")
    assert requests == 2


async def test_a_new_connection_closed_before_the_response_is_not_retried(clients: ModelClients) -> None:
    connections = 0

    async def handler(stream: trio.SocketStream) -> None:
        nonlocal connections
        connections += 1
        peer = Peer(stream)
        while await peer.request() is not None:
            if connections == 1:
                return
            await stream.send_all(response(sse("answer")))

    async with tiny_server(handler) as base_url:
        failure = failure_of(await ask(clients, base_url))
    assert (failure.kind, failure.detail) == ("transport", "the connection closed before the response started")


async def test_a_response_that_asks_to_close_is_not_pooled_and_aclose_closes_idle_ones(clients: ModelClients) -> None:
    connections = 0
    closed: list[bytes] = []
    both_closed = trio.Event()

    async def handler(stream: trio.SocketStream) -> None:
        nonlocal connections
        connections += 1
        first = connections == 1
        peer = Peer(stream)
        assert await peer.request() is not None
        await stream.send_all(response(sse("answer"), headers=b"connection: close\r\n" if first else b""))
        closed.append(await peer.rest())  # nothing more arrives on either connection until it closes
        if len(closed) == 2:
            both_closed.set()

    async with tiny_server(handler) as base_url:
        reply_of(await ask(clients, base_url))  # "connection: close": closed after the response
        reply_of(await ask(clients, base_url))  # a new connection, kept idle...
        await clients.aclose()  # ...until now
        with trio.fail_after(DEADLINE):
            await both_closed.wait()
    assert closed == [b"", b""] and connections == 2


async def test_a_call_that_ends_after_aclose_closes_its_connection_instead_of_pooling_it(clients: ModelClients) -> None:
    go_on, closed = trio.Event(), trio.Event()
    rest: list[bytes] = []

    async def handler(stream: trio.SocketStream) -> None:
        peer = Peer(stream)
        assert await peer.request() is not None
        body = sse("late")
        head = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body)
        cut = len(event(delta("late")))
        await stream.send_all(head + body[:cut])  # the first delta...
        await go_on.wait()
        await stream.send_all(body[cut:])  # ...the rest once the clients were closed
        rest.append(await peer.rest())
        closed.set()

    hub = FirstDelta()
    results: list[ModelReply | ModelFailure] = []

    async def call(base_url: str) -> None:
        results.append(await ask(clients, base_url, hub=hub))

    async with tiny_server(handler) as base_url:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, base_url)
            with trio.fail_after(DEADLINE):
                await hub.seen.wait()
            await clients.aclose()
            go_on.set()
        with trio.fail_after(DEADLINE):
            await closed.wait()
    assert reply_of(results[0]).content == "late" and rest == [b""]


async def test_idle_connections_beyond_the_cap_are_closed(clients: ModelClients, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_http1, "MAX_IDLE", 1)
    connections = 0
    arrived: list[trio.Event] = []

    async def handler(stream: trio.SocketStream) -> None:
        nonlocal connections
        connections += 1
        peer = Peer(stream)
        while await peer.request() is not None:
            ready = arrived[-1]
            ready.set()
            if len(arrived) % 2:
                arrived.append(trio.Event())
            with trio.fail_after(DEADLINE):
                await arrived[-1].wait()  # answer a pair only once both requests are in
            arrived[-1].set()
            await stream.send_all(response(sse("answer")))

    async def pair(base_url: str) -> None:
        arrived.append(trio.Event())
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, clients, base_url)
            nursery.start_soon(ask, clients, base_url)

    async with tiny_server(handler) as base_url:
        await pair(base_url)  # two connections at once; one stays idle
        await pair(base_url)  # one reused, one new
    assert connections == 3


async def test_an_idle_connection_past_its_keepalive_expiry_is_not_reused(clients: ModelClients, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_http1, "KEEPALIVE_EXPIRY", -1.0)  # every idle connection has expired
    async with open_model_server() as server:
        reply_of(await ask(clients, server.base_url))
        reply_of(await ask(clients, server.base_url))
    assert [r.connection for r in server.requests] == [1, 2]


# -- proxies: httpx carries them ------------------------------------------------------------------


@pytest.fixture
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for name in list(os.environ):
        if name.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
            monkeypatch.delenv(name)
    return monkeypatch


@pytest.mark.parametrize(
    ("environment", "url", "via_httpx"),
    [
        ({}, "https://api.example.com/v1", False),
        ({"HTTPS_PROXY": "http://proxy.invalid:3128"}, "https://api.example.com/v1", True),
        ({"HTTPS_PROXY": "http://proxy.invalid:3128"}, "http://api.example.com/v1", False),
        ({"http_proxy": "http://proxy.invalid:3128"}, "http://api.example.com/v1", True),
        ({"ALL_PROXY": "http://proxy.invalid:3128"}, "http://127.0.0.1:8000/v1", True),
        ({"ALL_PROXY": "http://proxy.invalid:3128", "NO_PROXY": "127.0.0.1,localhost"}, "http://127.0.0.1:8000/v1", False),
        ({"HTTPS_PROXY": "http://proxy.invalid:3128", "NO_PROXY": ".example.com"}, "https://api.example.com/v1", False),
    ],
)
async def test_an_endpoint_behind_a_proxy_is_routed_through_httpx(
    no_proxies: pytest.MonkeyPatch, environment: dict[str, str], url: str, via_httpx: bool
) -> None:
    for name, value in environment.items():
        no_proxies.setenv(name, value)
    clients = ModelClients()
    try:
        route = clients.get(ModelSettings(model="m", base_url=url, api_key="k"))
        assert isinstance(route, httpx.AsyncClient if via_httpx else Endpoint)
    finally:
        await clients.aclose()


async def test_the_httpx_path_streams_classifies_and_cuts_like_ours(clients: ModelClients) -> None:
    async with open_model_server() as server:
        base_url = server.base_url.replace("http://", "http://user:pw@")  # user info: left to httpx
        assert isinstance(clients.get(ModelSettings(model="m", base_url=base_url, api_key="k")), httpx.AsyncClient)
        server.script([TextReply(content="via httpx"), HttpError(status=503, message="busy", retry_after=2), TextReply(content="cut", cut_after_chunks=1)])
        assert reply_of(await ask(clients, base_url)).content == "via httpx"
        busy = failure_of(await ask(clients, base_url))
        cut = failure_of(await ask(clients, base_url))
    assert (busy.kind, busy.status, busy.detail, busy.retry_after) == ("overloaded", 503, "busy", 2.0)
    assert cut.kind == "transport" and cut.detail.startswith("RemoteProtocolError")


# -- TLS ----------------------------------------------------------------------------------------------


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (made by the openssl command) and its key."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=DEADLINE,
    )  # fmt: skip
    return cert, key


async def test_https_is_verified_against_ssl_cert_file_and_an_untrusted_certificate_fails(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import ssl

    cert, key = certificate
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)

    async def handler(stream: trio.SocketStream) -> None:
        tls = trio.SSLStream(stream, server_context, server_side=True)
        with contextlib.suppress(trio.BrokenResourceError):  # the untrusting client hangs up in the handshake
            await tls.do_handshake()
            peer = Peer(tls)
            while await peer.request() is not None:
                await tls.send_all(response(sse("secret")))

    async with tiny_server(handler) as base_url:
        base_url = base_url.replace("http://", "https://")
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        trusting = ModelClients()
        try:
            assert reply_of(await ask(trusting, base_url)).content == "secret"
            assert reply_of(await ask(trusting, base_url)).content == "secret"
        finally:
            await trusting.aclose()
        monkeypatch.delenv("SSL_CERT_FILE")  # certifi's bundle does not know this certificate
        untrusting = ModelClients()
        try:
            failure = failure_of(await ask(untrusting, base_url))
        finally:
            await untrusting.aclose()
    assert failure.kind == "transport"
    assert failure.detail.startswith(f"the TLS handshake with 127.0.0.1:{base_url.split(':')[2].split('/')[0]} failed (")
    assert "CERTIFICATE_VERIFY_FAILED" in failure.detail
