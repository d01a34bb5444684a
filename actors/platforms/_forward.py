"""Forwarding a request to the node that owns its session (cluster mode), at the ASGI level.

The receiving node has checked the client (its API key); it sends the request as it came
(method, path, query, headers, body) to the owner's internal address, signed with the
cluster's shared secret (``HERMES_CLUSTER_SECRET``), and passes the owner's answer back as it
arrives: status, headers and body chunks, so an SSE stream flows through unchanged.

The signature is an HMAC-SHA256 of the method, the path with its query, a timestamp, a nonce
and the body's SHA-256. The owner accepts a signed request only when the signature matches,
the timestamp is within :data:`MAX_SKEW` seconds of its clock, and the nonce was not seen in
that window (:class:`Replays`): a captured request cannot be sent again. A forwarded request is
never forwarded again (one hop): if the session moved meanwhile, the owner answers 503.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping

import httpx

from ._asgi import HttpError, Request, Send

FROM_HEADER = "x-hermes-cluster-from"
"""The node that forwarded the request (its node id)."""
TIMESTAMP_HEADER = "x-hermes-cluster-timestamp"
NONCE_HEADER = "x-hermes-cluster-nonce"
SIGNATURE_HEADER = "x-hermes-cluster-signature"
CLUSTER_HEADERS = frozenset({FROM_HEADER, TIMESTAMP_HEADER, NONCE_HEADER, SIGNATURE_HEADER})
MAX_SKEW = 30.0
"""Seconds a signed request's timestamp may differ from the owner's clock."""
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length"})
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 900.0
"""Seconds the owner may stay silent mid-answer (its SSE streams send a comment every 15 s)."""


def signature(secret: bytes, method: str, target: str, timestamp: str, nonce: str, body: bytes) -> str:
    """The HMAC-SHA256 (hex) of a forwarded request."""
    text = "\n".join((method.upper(), target, timestamp, nonce, hashlib.sha256(body).hexdigest()))
    return hmac.new(secret, text.encode(), hashlib.sha256).hexdigest()


def target_of(request: Request) -> str:
    """The request's path with its query string."""
    return request.path + (f"?{request.query}" if request.query else "")


class Replays:
    """Nonces of accepted signed requests, kept while their timestamp is within the window."""

    def __init__(self) -> None:
        self.seen: dict[str, float] = {}

    def fresh(self, nonce: str, now: float) -> bool:
        """True (and remembered) when ``nonce`` was not seen within the window."""
        if len(self.seen) > 1024:
            self.seen = {n: until for n, until in self.seen.items() if until > now}
        until = self.seen.get(nonce)
        if until is not None and until > now:
            return False
        self.seen[nonce] = now + 2 * MAX_SKEW
        return True


def check_signed(secret: bytes, replays: Replays, method: str, target: str, headers: Mapping[str, str], body: bytes, now: float) -> str | None:
    """None when the signed headers are valid for this request; else what is wrong."""
    stamp, nonce, given = headers.get(TIMESTAMP_HEADER, ""), headers.get(NONCE_HEADER, ""), headers.get(SIGNATURE_HEADER, "")
    try:
        at = float(stamp)
    except ValueError:
        return "the forwarded request has no valid timestamp"
    if abs(now - at) > MAX_SKEW:
        return f"the forwarded request's timestamp is {now - at:.0f} s off this node's clock (at most {MAX_SKEW:g}); check the nodes' clocks"
    if not nonce or not hmac.compare_digest(signature(secret, method, target, stamp, nonce, body), given):
        return "the forwarded request's signature does not match: set the same HERMES_CLUSTER_SECRET on every node"
    if not replays.fresh(nonce, now):
        return "the forwarded request was already received once (a replay)"
    return None


def signed_headers(secret: bytes, node_id: str, method: str, target: str, body: bytes) -> dict[str, str]:
    stamp, nonce = f"{time.time():.3f}", secrets.token_hex(16)
    return {
        FROM_HEADER: node_id,
        TIMESTAMP_HEADER: stamp,
        NONCE_HEADER: nonce,
        SIGNATURE_HEADER: signature(secret, method, target, stamp, nonce, body),
    }


def new_client() -> httpx.AsyncClient:
    timeout = httpx.Timeout(connect=CONNECT_TIMEOUT, read=READ_TIMEOUT, write=60.0, pool=CONNECT_TIMEOUT)
    return httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=1000, max_keepalive_connections=100), trust_env=False)


async def forward(client: httpx.AsyncClient, request: Request, send: Send, address: str, secret: bytes, node_id: str, owner: str) -> None:
    """Send ``request`` to ``address`` (the owner ``owner``), signed as ``node_id``; pass its answer on.

    Raises:
        HttpError: 503 when the owner cannot be reached or fails before answering (retry: the
            session is taken over once the owner's heartbeat stops).
    """
    body = await request.body()
    target = target_of(request)
    headers = {k: v for k, v in request.headers.items() if k not in HOP_BY_HOP and k not in CLUSTER_HEADERS and k != "origin"}
    headers.update(signed_headers(secret, node_id, request.method, target, body))
    started = False
    try:
        async with client.stream(request.method, address.rstrip("/") + target, headers=headers, content=body) as upstream:
            passed = [
                (k.encode("latin-1"), v.encode("latin-1"))
                for k, v in upstream.headers.multi_items()
                if k.lower() not in HOP_BY_HOP and k.lower() != "x-request-id"
            ]
            await send({"type": "http.response.start", "status": upstream.status_code, "headers": passed})
            started = True
            async for chunk in upstream.aiter_raw():
                if chunk:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    except httpx.HTTPError as exc:
        if started:  # mid-answer: end it; the client sees a cut stream, as if the owner had died
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        raise HttpError(
            503,
            f"the node that owns this session ({owner}) did not answer ({type(exc).__name__}); retry: once its heartbeat stops, another node takes the session over",
            type="server_error",
            code="owner_unreachable",
            headers={"retry-after": "1"},
        ) from None
