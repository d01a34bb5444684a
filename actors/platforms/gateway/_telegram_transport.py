"""How one Telegram adapter incarnation reaches the Bot API (reactor thread only).

The JSON calls (``getUpdates``, ``sendMessage``, ``editMessageText``, ...) go through the h11
keep-alive pool the model calls use (``actors/agent/_http1.py``): reading a ``getUpdates``
answer cost 1.08 ms (median) from the server's write to the parsed result with httpx and
0.40 ms with the pool, on this 2-vCPU VM, and the gateway's whole inbound path is about 2 ms.
Multipart uploads, file downloads, and a Bot API URL the environment sends through a proxy
(HTTP(S)_PROXY, ALL_PROXY, NO_PROXY) or that the pool does not take stay with one
``httpx.AsyncClient``.
"""

from __future__ import annotations

import contextlib
import json
import ssl
from typing import Any

import httpx
import trio

from actors.agent._http1 import Endpoint, Pool, TransportError, proxied

from ._retry import CallFailed
from ._telegram_api import call, parse_answer

MAX_ANSWER = 64 * 1024 * 1024
"""Bytes of a Bot API answer read at most (``getUpdates`` answers up to 100 updates)."""
_HEADERS = (("content-type", "application/json"), ("accept", "application/json"))

_SSL: ssl.SSLContext | None = None
"""One TLS context for every adapter's calls: building one loads the CA bundle (~70 ms)."""


async def tls_context() -> ssl.SSLContext:
    """The shared TLS context, built once off the reactor thread."""
    global _SSL
    if _SSL is None:
        context = await trio.to_thread.run_sync(httpx.create_ssl_context)
        context.set_alpn_protocols(["http/1.1"])  # the pool speaks HTTP/1.1 only
        _SSL = context
    return _SSL


def _built_tls() -> ssl.SSLContext:
    assert _SSL is not None, "tls_context() is awaited before the first https call"
    return _SSL


class BotTransport:
    """The pool, the httpx client, and which of them each method's URL takes."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url
        self.token = token
        self.pool = Pool(_built_tls)
        self.http: httpx.AsyncClient | None = None
        self._routes: dict[str, Endpoint | None] = {}

    async def client(self) -> httpx.AsyncClient:
        """The httpx client (uploads, downloads, proxied URLs), made on first use."""
        if self.http is None:
            self.http = httpx.AsyncClient(verify=await tls_context())
        return self.http

    async def call(self, method: str, payload: dict[str, Any], timeout: float) -> Any:
        """``result`` of Bot API ``method``, or :class:`CallFailed` (status 0: no answer)."""
        if method not in self._routes:
            endpoint = Endpoint.parse(self.base_url, f"bot{self.token}/{method}")
            self._routes[method] = endpoint if endpoint is not None and not proxied(endpoint) else None
        endpoint = self._routes[method]
        if endpoint is None:
            return await call(await self.client(), self.base_url, self.token, method, payload, timeout=timeout)
        if endpoint.origin[0] == "https":
            await tls_context()
        body = json.dumps(payload).encode()
        try:
            with trio.fail_after(timeout):
                async with self.pool.post(endpoint, _HEADERS, body) as exchange:
                    data = await exchange.read(MAX_ANSWER)
        except trio.TooSlowError:
            raise CallFailed(0, f"{method}: no answer within {timeout:g} s") from None
        except TransportError as exc:
            raise CallFailed(0, f"{method}: {exc}".replace(self.token, "<token>")) from None
        return parse_answer(exchange.status, data)

    async def aclose(self) -> None:
        """Close both (best effort: a closing incarnation's system task must not raise)."""
        with contextlib.suppress(Exception):
            await self.pool.aclose()
        if self.http is not None:
            with contextlib.suppress(Exception):
                await self.http.aclose()
