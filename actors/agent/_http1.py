"""A small HTTP/1.1 client on h11 and trio: keep-alive connection pools for the model calls.

httpx + httpcore cost 1.0-1.5 ms of CPU per streamed completion here (this: 0.4-0.5 ms), in
layers this use needs none of; this does one POST, a streamed response, keep-alive.

- :class:`Endpoint`: a base URL parsed once (origin, request target, Host header).
- :class:`Pool`: idle connections per origin ``(scheme, host, port)``, newest first (LIFO),
  at most ``MAX_IDLE`` each, closed after ``KEEPALIVE_EXPIRY`` idle seconds. Taking and
  returning one is O(1) whatever the pool's size, so one pool serves every session.
- :class:`Exchange`: one request and its response: ``async with pool.post(...)``.

Rules: a connection is pooled again only after a complete exchange (h11: DONE on both
sides); an exception or a cancellation in the middle closes it at once, so a streaming
provider sees the stream end. An idle connection that has turned readable (the server
closed it, or sent junk) is dropped, not reused. A reused connection that fails before a
byte of the response arrived (the keep-alive race) is retried once on a new connection;
never after a response byte. Failures raise :class:`TransportError`, saying what happened.

Not here (the caller keeps httpx for those endpoints): proxies, URLs with user info, other
schemes; HTTP/2. A gzip/deflate body (sent despite ``accept-encoding: identity``) is decoded.
"""

from __future__ import annotations

import collections
import dataclasses
import select
import ssl
import urllib.parse
import urllib.request
import zlib
from collections.abc import Callable, Sequence
from types import TracebackType

import h11
import trio

CONNECT_TIMEOUT = 15.0
"""Seconds to open a connection (TCP and the TLS handshake)."""
WRITE_TIMEOUT = 60.0
"""Seconds to send one request. No read deadline: each call's own deadline governs."""
MAX_IDLE = 1024
"""Idle connections kept per origin; one returned to a full pool is closed. Measured with
``bench_server.py --levels 1000`` (8,000 calls): 256 opened 2,076 connections, 1,024 1,440."""
KEEPALIVE_EXPIRY = 5.0
"""Seconds an idle connection is kept for reuse (httpx's default)."""
RECEIVE_SIZE = 65536

Origin = tuple[str, str, int]


class TransportError(Exception):
    """The connection failed; the text says how. ``timeout``: a deadline passed."""

    def __init__(self, detail: str, *, timeout: bool = False) -> None:
        super().__init__(detail)
        self.timeout = timeout


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoint:
    """Where requests go: parsed once per base URL."""

    origin: Origin
    """``(scheme, host, port)``: connections are pooled per origin."""
    target: str
    """The request target: the path (and query) of the URL."""
    host_header: str

    @classmethod
    def parse(cls, base_url: str, path: str) -> Endpoint | None:
        """``base_url/path`` (without a doubled slash); None for a URL this client leaves to
        httpx: another scheme, user info, no host or a non-ASCII one (IDNA), a bad port."""
        try:
            parts = urllib.parse.urlsplit(base_url)
            port = parts.port
        except ValueError:
            return None
        scheme, host = parts.scheme.lower(), parts.hostname
        if scheme not in ("http", "https") or not host or not host.isascii() or parts.username is not None or parts.password is not None:
            return None
        default = 443 if scheme == "https" else 80
        port = default if port is None else port
        named = f"[{host}]" if ":" in host else host  # an IPv6 literal keeps its brackets
        target = urllib.parse.quote(f"{parts.path.rstrip('/')}/{path}", safe="/:@!$&'()*+,;=%-._~")
        target += f"?{parts.query}" if parts.query else ""
        return cls((scheme, host, port), target, named if port == default else f"{named}:{port}")


def proxied(endpoint: Endpoint) -> bool:
    """True when the environment routes ``endpoint`` through a proxy (HTTP(S)_PROXY, ALL_PROXY,
    NO_PROXY): this client does not do proxies, so such an endpoint stays with httpx."""
    scheme, _host, _ = endpoint.origin
    proxies = urllib.request.getproxies()
    if not (proxies.get(scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(endpoint.host_header)


@dataclasses.dataclass(slots=True, eq=False)
class _Connection:
    stream: trio.abc.Stream
    socket: trio.socket.SocketType
    """The TCP socket under ``stream`` (under TLS too): polled when idle, closed directly."""
    http: h11.Connection
    idle_since: float = 0.0

    def close(self) -> None:
        """Close at once, without awaiting: the peer sees the connection end (no TLS close_notify)."""
        self.socket.close()

    def readable(self) -> bool:
        """True when the socket has something to read: EOF, a reset, or stray bytes."""
        poller = select.poll()
        poller.register(self.socket.fileno(), select.POLLIN)
        return bool(poller.poll(0))


class Pool:
    """Keep-alive connections per origin, for one trio thread. ``tls`` gives the TLS context
    of each new https connection (the caller builds it once, lazily: it loads the CA bundle)."""

    def __init__(self, tls: Callable[[], ssl.SSLContext]) -> None:
        self._tls = tls
        self._idle: dict[Origin, collections.deque[_Connection]] = {}
        self._closed = False

    def post(self, endpoint: Endpoint, headers: Sequence[tuple[str, str]], body: bytes) -> Exchange:
        """``async with pool.post(...) as response``: on entry it is sent and its head read."""
        return Exchange(self, endpoint, headers, body)

    async def aclose(self) -> None:
        """Close the idle connections; those in use close when their exchange ends."""
        self._closed = True
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()
        await trio.lowlevel.checkpoint()

    def _take(self, origin: Origin) -> _Connection | None:
        """The newest idle connection that is still fit for a request, if any."""
        idle = self._idle.get(origin)
        oldest = trio.current_time() - KEEPALIVE_EXPIRY
        while idle:
            connection = idle.pop()
            if connection.idle_since >= oldest and not connection.readable():
                return connection
            connection.close()
        return None

    def _give_back(self, origin: Origin, connection: _Connection) -> None:
        """Pool a connection whose exchange is complete, unless it cannot serve another."""
        http = connection.http
        if self._closed or http.our_state is not h11.DONE or http.their_state is not h11.DONE:
            connection.close()  # the pool is closed, or the server said close (Connection: close, HTTP/1.0)
            return
        http.start_next_cycle()
        idle = self._idle.setdefault(origin, collections.deque())
        now = connection.idle_since = trio.current_time()
        while idle and idle[0].idle_since < now - KEEPALIVE_EXPIRY:
            idle.popleft().close()  # the oldest sit on the left
        if len(idle) < MAX_IDLE:
            idle.append(connection)
        else:
            connection.close()

    async def _connect(self, endpoint: Endpoint) -> _Connection:
        scheme, host, port = endpoint.origin
        with trio.move_on_after(CONNECT_TIMEOUT):
            try:
                tcp = await trio.open_tcp_stream(host, port)
            except OSError as error:
                raise TransportError(f"could not connect to {host}:{port} ({error})") from error
            if scheme == "http":
                return _Connection(tcp, tcp.socket, h11.Connection(h11.CLIENT))
            tls = trio.SSLStream(tcp, self._tls(), server_hostname=host, https_compatible=True)
            try:
                await tls.do_handshake()
            except BaseException as error:
                tcp.socket.close()
                if isinstance(error, trio.BrokenResourceError):
                    raise TransportError(f"the TLS handshake with {host}:{port} failed ({error.__cause__ or error})") from error
                raise
            return _Connection(tls, tcp.socket, h11.Connection(h11.CLIENT))
        raise TransportError(f"could not connect to {host}:{port} within {CONNECT_TIMEOUT:g} s", timeout=True)


class Exchange:
    """One POST and its response on one pooled connection. Entering sends the request and
    reads ``status`` and ``headers``; :meth:`receive` (or :meth:`read`) the body until ``b""``,
    and the connection returns to the pool. Leaving before that (error, cancel) closes it."""

    def __init__(self, pool: Pool, endpoint: Endpoint, headers: Sequence[tuple[str, str]], body: bytes) -> None:
        self._pool = pool
        self._endpoint = endpoint
        self._headers = [("host", endpoint.host_header), *headers, ("content-length", str(len(body)))]
        self._body = body
        self._connection: _Connection | None = None
        self._answered = False
        """A byte of the response arrived: the request must not be sent again."""
        self._eof = False
        self._inflate: zlib._Decompress | None = None
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []  # names in lower case

    def header(self, name: str) -> str | None:
        """The first value of response header ``name`` (lower case)."""
        key = name.encode("ascii")
        return next((value.decode("latin-1") for field, value in self.headers if field == key), None)

    async def __aenter__(self) -> Exchange:
        try:  # h11 checks the header names and values (ASCII, no line breaks) here
            request = h11.Request(method="POST", target=self._endpoint.target, headers=self._headers)
        except (h11.LocalProtocolError, UnicodeError) as error:
            raise TransportError(f"the request is not valid HTTP ({error}); check the API key and extra headers") from error
        connection = self._pool._take(self._endpoint.origin)
        while True:
            reused = connection is not None
            if connection is None:
                connection = await self._pool._connect(self._endpoint)
            self._connection = connection
            try:
                await self._start(connection, request)
                return self
            except TransportError as error:
                connection.close()
                if not reused or self._answered or error.timeout:
                    raise
                connection, self._eof = None, False  # the keep-alive race: once more, on a new connection
            except BaseException:
                connection.close()
                raise

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()  # the body was not read to its end

    async def _start(self, connection: _Connection, request: h11.Request) -> None:
        """Send the request; read the response's status line and headers."""
        http = connection.http
        data = b"".join(filter(None, (http.send(request), http.send(h11.Data(data=self._body)), http.send(h11.EndOfMessage()))))
        unsent: TransportError | None = None
        with trio.move_on_after(WRITE_TIMEOUT) as deadline:
            try:
                await connection.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as error:
                # The server may have answered before it stopped reading (a 413, say): read on.
                unsent = TransportError(f"the connection broke while sending the request ({error.__cause__ or error})")
        if deadline.cancelled_caught:
            raise TransportError(f"the request could not be sent within {WRITE_TIMEOUT:g} s", timeout=True)
        try:
            event = await self._next("started")
            while type(event) is h11.InformationalResponse:  # 1xx: not the response yet
                event = await self._next("started")
        except TransportError:
            if unsent is not None and not self._answered:
                raise unsent from None
            raise
        if type(event) is not h11.Response:  # ConnectionClosed
            raise TransportError("the connection closed before the response started")
        self.status = event.status_code
        self.headers = list(event.headers)
        encoding = self.header("content-encoding")
        if encoding in ("gzip", "deflate"):
            self._inflate = zlib.decompressobj(32 + zlib.MAX_WBITS)  # zlib or gzip header, detected
        elif encoding not in (None, "identity"):
            raise TransportError(f"the provider sent a body in the {encoding!r} encoding, which this client cannot decode")

    async def _next(self, phase: str) -> object:
        """The next h11 event of the response (never NEED_DATA), reading the socket as needed."""
        connection = self._connection
        assert connection is not None
        while True:
            try:
                event = connection.http.next_event()
            except h11.RemoteProtocolError as error:
                detail = f"the connection closed before the response {phase}" if self._eof else f"the provider sent malformed HTTP ({error})"
                raise TransportError(detail) from error
            if event is not h11.NEED_DATA:
                return event
            try:
                data = await connection.stream.receive_some(RECEIVE_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as error:
                raise TransportError(f"the connection broke while reading the response ({error.__cause__ or error})") from error
            self._answered = self._answered or bool(data)
            self._eof = not data
            connection.http.receive_data(data)  # type: ignore[arg-type]  # any bytes-like will do

    async def receive(self) -> bytes:
        """The next piece of the body; ``b""`` once it ended (the connection is then pooled)."""
        connection = self._connection
        if connection is None:
            return b""
        while True:
            event = await self._next("ended")
            if type(event) is h11.Data:
                data: bytes = event.data
                if self._inflate is not None:
                    try:
                        data = self._inflate.decompress(data)
                    except zlib.error as error:
                        raise TransportError(f"the provider's compressed body could not be decompressed ({error})") from error
                if data:
                    return data
            elif type(event) is h11.EndOfMessage:
                self._connection = None
                self._pool._give_back(self._endpoint.origin, connection)
                return b""
            else:  # ConnectionClosed: nothing marked the end of the body
                raise TransportError("the connection closed before the response ended")

    async def read(self, limit: int) -> bytes:
        """The body, up to ``limit`` bytes (a longer one is cut and its connection closed)."""
        body = b""
        while len(body) < limit and (data := await self.receive()):
            body += data
        return body[:limit]
