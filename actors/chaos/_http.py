"""HTTP/1.1 on one connection with h11: read requests, send planned responses, apply faults.

Written against h11 directly (no web framework) because the faults live at the byte
level: a stall is a pause between two body chunks, a cut is closing the socket in the
middle of a chunked body.

Invariant: every wait has a deadline: the next request on a keep-alive connection
(``IDLE_TIMEOUT``), each read inside a request and each write (``IO_TIMEOUT``); latency
and stalls sleep for their scripted time. A missed deadline closes the connection. The one
exception is a scripted silence, which by design waits for the client to close the
connection (or for the server to stop, which cancels every connection).
"""

from __future__ import annotations

import dataclasses
import http
from collections.abc import Callable

import h11
import trio

from ._render import Planned, error

IDLE_TIMEOUT = 60.0
"""Seconds a keep-alive connection may sit idle between requests before it is closed."""
IO_TIMEOUT = 30.0
"""Seconds one read inside a request, or one write of a response, may take."""
_RECEIVE_SIZE = 65536


@dataclasses.dataclass(frozen=True, slots=True)
class Incoming:
    """One complete request as read from the wire."""

    method: str
    path: str
    """Without the query string."""
    headers: dict[str, str]
    """Lower-case names; a repeated header keeps its last value."""
    body: bytes
    connection: int


async def serve_connection(stream: trio.SocketStream, connection: int, respond: Callable[[Incoming], Planned]) -> None:
    """Answer requests on ``stream`` until the client closes it, a deadline passes, or a cut.

    Raises whatever the stream raises when the peer goes away (``trio.BrokenResourceError``),
    and ``trio.TooSlowError`` when a write misses its deadline; the stream is closed in all
    cases.
    """
    conn = h11.Connection(h11.SERVER)
    async with stream:
        while True:
            try:
                incoming = await _read_request(conn, stream, connection)
            except h11.RemoteProtocolError as exc:
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    bad = error(exc.error_status_hint, f"test model server: malformed HTTP request: {exc}")
                    await _send(conn, stream, bad, head_only=False)
                return
            if incoming is None:
                return
            finished = await _send(conn, stream, respond(incoming), head_only=incoming.method == "HEAD")
            if not finished or conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()


async def _read_request(conn: h11.Connection, stream: trio.SocketStream, connection: int) -> Incoming | None:
    """The next request, or None when the client closed the connection or went idle."""
    head: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            if conn.they_are_waiting_for_100_continue:
                await _write(stream, conn.send(h11.InformationalResponse(status_code=100, headers=[])))
            with trio.move_on_after(IDLE_TIMEOUT if head is None else IO_TIMEOUT):
                conn.receive_data(await stream.receive_some(_RECEIVE_SIZE))
                continue
            return None
        if isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None  # h11 emits EndOfMessage only after a Request
            target = head.target.decode("latin-1").split("?", 1)[0]
            headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in head.headers}
            return Incoming(head.method.decode("ascii"), target, headers, bytes(body), connection)
        else:  # ConnectionClosed (or PAUSED, which a server that answers in turn never sees)
            return None


async def _send(conn: h11.Connection, stream: trio.SocketStream, planned: Planned, *, head_only: bool) -> bool:
    """Send ``planned`` with its faults; False when the connection must now be closed (a cut)."""
    faults = planned.faults
    chunks = [] if head_only else planned.chunks
    stall_at = cut_at = silent_at = None
    if faults is not None:
        await trio.sleep(faults.latency)
        if faults.stall_after_chunks is not None:
            stall_at = min(faults.stall_after_chunks, len(chunks))
        if faults.cut_after_chunks is not None:
            cut_at = min(faults.cut_after_chunks, len(chunks))
        if faults.silent_after_chunks is not None:
            silent_at = min(faults.silent_after_chunks, len(chunks))
    headers = list(planned.headers)
    if not any(name.lower() == "server" for name, _ in headers):
        headers.append(("server", "hermes-test-model"))
    if not planned.streaming:
        headers.append(("content-length", str(sum(map(len, planned.chunks)))))
    await _write(stream, conn.send(h11.Response(status_code=planned.status, headers=headers, reason=_reason(planned.status))))
    for sent in range(len(chunks) + 1):
        if sent == stall_at and faults is not None:
            await trio.sleep(faults.stall_seconds)
        if sent == cut_at:
            return False
        if sent == silent_at:
            await _wait_for_close(stream)
            return False
        if sent < len(chunks):
            await _write(stream, conn.send(h11.Data(data=chunks[sent])))
    await _write(stream, conn.send(h11.EndOfMessage()))
    return True


async def _write(stream: trio.SocketStream, data: bytes) -> None:
    with trio.fail_after(IO_TIMEOUT):
        await stream.send_all(data)


async def _wait_for_close(stream: trio.SocketStream) -> None:
    """Send nothing and wait until the client closes its side (anything it sends is dropped)."""
    while await stream.receive_some(_RECEIVE_SIZE):
        pass


def _reason(status: int) -> bytes:
    """The standard reason phrase; none for a status HTTP does not name (529), which HTTP/1.1 allows."""
    try:
        return http.HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b""
