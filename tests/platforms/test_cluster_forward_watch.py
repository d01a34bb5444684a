"""A forwarded request is given up when nobody can say the owner still holds its session.

A node forwards a request to the session's owner and watches the store meanwhile
(``ClusterRouter._forward_while_owner``): a stopped owner still accepts connections (the kernel
does) and would hold the request for ever. Here the owner is a real listener on loopback that
accepts and never answers, and the store cannot be read at all (its file is a directory): the
forward ends with a 503 ``store_unavailable`` (Retry-After) once a lease ttl of failed reads has
passed, not at the forward's 900 s read timeout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from actors.agent._locate import Forward
from actors.agent._node import NodeIdentity
from actors.platforms._asgi import HttpError, Request
from actors.platforms._cluster import ClusterRouter, Found
from actors.platforms._forward import new_client
from tests.conftest import DEADLINE

TTL = 1.5


async def test_a_forward_to_a_silent_owner_ends_when_the_store_cannot_be_read_for_a_ttl(tmp_path: Path) -> None:
    unreadable = tmp_path / "state.db"
    unreadable.mkdir()  # every read of the store fails
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    accepted: list[trio.SocketStream] = []

    async def hold(stream: trio.SocketStream) -> None:
        accepted.append(stream)  # read nothing, answer nothing: a stopped process
        await trio.sleep_forever()

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b'{"messages": []}', "more_body": False}

    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": [(b"x-hermes-session-id", b"s1")], "query_string": b""}
    request = Request.from_scope(scope, receive)
    router = ClusterRouter(node=NodeIdentity(node_id="node-b", lease_ttl=TTL), secret=b"s" * 32, store_file=str(unreadable))
    found = Found("s1", Forward(node_id="node-a", address=f"http://127.0.0.1:{port}"), reroute_in=0.0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, hold, listeners)
        began = trio.current_time()
        with trio.fail_after(DEADLINE), pytest.raises(HttpError) as raised:
            router.client = new_client()
            await router._forward_while_owner(request, send, f"http://127.0.0.1:{port}", "node-a", found, ("session", "s1"))
        waited = trio.current_time() - began
        await router.client.aclose()
        nursery.cancel_scope.cancel()
    assert accepted, "the request never reached the owner"
    assert raised.value.status == 503 and raised.value.code == "store_unavailable" and raised.value.headers.get("retry-after") == "1", raised.value
    assert "whether it still does is unknown" in str(raised.value), raised.value
    assert waited >= TTL, f"given up after {waited:.2f} s, before a ttl of failed reads"
    assert sent == [], "nothing of an answer was sent before the 503"
