"""The remote session handle: HTTP to a running ``hermes serve`` (``hermes attach``).

Events come from ``GET /v1/sessions/{id}/events`` (typed JSON, SSE id = the session's
sequence number). When the stream drops, the handle reconnects with ``Last-Event-ID`` set
to the last number it saw, so no event is lost or repeated (the server keeps 2,048 events
for that; beyond it, a ``gap`` notice says to reload the transcript). Commands are the
attach routes: ``POST .../turns``, ``.../cancel``, ``.../answer``; sessions come from the
sessions REST routes, the tree from ``GET /health/detailed``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import urllib.parse
from typing import Any

import httpx
import msgspec

from actors.credentials._report import pool_lines
from protocols import AnySessionEvent, ApprovalChoice, ChatMessage, NodeSnapshot, PoolStatus, SessionEvent, SessionRecord, ToolCall, TreeSnapshot, from_json

from ._handle import EventSink, RequestRefused, ServerUnreachable, StreamNotice
from ._sse import SseParser

log = logging.getLogger(__name__)

FROM_NOW = 2**62
"""An ``after`` above any sequence number: the server replays nothing and streams new events."""
READ_TIMEOUT = 60.0
"""The server sends a keepalive every 15 s; this long without a byte means the stream is dead."""
RECONNECT_FIRST, RECONNECT_MAX = 0.2, 5.0
ATTACH_TIMEOUT = 10.0


def base_url_of(url: str) -> str:
    """``http://host:port`` from what a person types (a trailing ``/v1`` or ``/`` is dropped)."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    return url.removesuffix("/v1")


def _quote(session_id: str) -> str:
    return urllib.parse.quote(session_id, safe="")


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
        return str(body["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}"


def _message(item: dict[str, Any]) -> ChatMessage:
    calls = tuple(
        ToolCall(id=str(c.get("id", "")), name=str(c["function"]["name"]), arguments=str(c["function"].get("arguments", "")))
        for c in item.get("tool_calls") or ()
    )
    return ChatMessage(
        role=item["role"],
        content=item.get("content"),
        tool_calls=calls,
        tool_call_id=item.get("tool_call_id"),
        name=item.get("name"),
        reasoning=item.get("reasoning"),
    )


class _RemoteAttachment:
    def __init__(self, task: asyncio.Task[None]) -> None:
        self.task = task

    def close(self) -> None:
        self.task.cancel()


class RemoteSession:
    """Sessions of a ``hermes serve`` at ``url``, authenticated with ``key``."""

    def __init__(self, url: str, key: str, *, transport: httpx.AsyncBaseTransport | None = None, timeout: float = 10.0) -> None:
        self.base_url = base_url_of(url)
        self._client = httpx.AsyncClient(base_url=self.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=timeout, transport=transport)
        self._model = "?"
        self._attachments: list[_RemoteAttachment] = []

    @property
    def label(self) -> str:
        return self.base_url

    @property
    def model(self) -> str:
        return self._model

    async def _request(self, method: str, path: str, **options: Any) -> httpx.Response:
        try:
            response = await self._client.request(method, path, **options)
        except httpx.TransportError as exc:
            msg = f"no hermes server answers at {self.base_url} ({type(exc).__name__}); start one with 'hermes serve' or pass --url"
            raise ServerUnreachable(msg) from None
        if response.status_code == 401:
            msg = f"the server at {self.base_url} refused the API key; pass --key or set API_SERVER_KEY (HERMES_HOME/.env)"
            raise RequestRefused(msg)
        return response

    async def _json(self, method: str, path: str, **options: Any) -> Any:
        response = await self._request(method, path, **options)
        if response.status_code >= 400:
            raise RequestRefused(f"{method} {path}: {_error_text(response)}")
        return response.json()

    async def open(self) -> None:
        models = await self._json("GET", "/v1/models")
        data = models.get("data") or [{}]
        self._model = str(data[0].get("id", "?"))

    async def attach(self, session_id: str, sink: EventSink, *, after_seq: int | None = None, observer: bool = False) -> _RemoteAttachment:
        connected = asyncio.Event()
        task = asyncio.get_running_loop().create_task(self._follow(session_id, sink, FROM_NOW if after_seq is None else after_seq, observer, connected))
        # The server subscribes before it answers with headers: once connected, no event is missed.
        waiter = asyncio.ensure_future(connected.wait())
        await asyncio.wait((waiter, task), timeout=ATTACH_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if not connected.is_set():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            msg = f"the event stream of session {session_id} at {self.base_url} did not connect within {ATTACH_TIMEOUT:g} s; is 'hermes serve' running there?"
            raise ServerUnreachable(msg)
        attachment = _RemoteAttachment(task)
        self._attachments.append(attachment)
        return attachment

    async def _follow(self, session_id: str, sink: EventSink, after: int, observer: bool, connected: asyncio.Event) -> None:
        """Stream events to ``sink`` until cancelled, reconnecting after drops (exponential backoff)."""
        path = f"/v1/sessions/{_quote(session_id)}/events" + ("?observer=true" if observer else "")
        delay, dropped = RECONNECT_FIRST, False
        while True:
            try:
                async with self._client.stream("GET", path, headers={"Last-Event-ID": str(after)}, timeout=httpx.Timeout(10.0, read=READ_TIMEOUT)) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        if response.status_code < 500:
                            sink(StreamNotice(kind="failed", text=f"the server refused the event stream: {_error_text(response)}", session_id=session_id))
                            return
                        raise httpx.RemoteProtocolError(f"HTTP {response.status_code}")
                    connected.set()
                    if dropped:
                        sink(StreamNotice(kind="connected", text="reconnected: no events were lost", session_id=session_id))
                    delay, dropped = RECONNECT_FIRST, False
                    parser = SseParser()
                    async for line in response.aiter_lines():
                        item = parser.feed(line)
                        if item is None:
                            continue
                        if item.event == "hermes.gap":
                            missed = msgspec.json.decode(item.data).get("missed", "some")
                            sink(
                                StreamNotice(
                                    kind="gap", text=f"{missed} events were missed while disconnected; /resume reloads the transcript", session_id=session_id
                                )
                            )
                            continue
                        event: SessionEvent = from_json(item.data, AnySessionEvent)
                        after = event.seq
                        sink(event)
            except (httpx.TransportError, msgspec.DecodeError) as exc:
                log.debug("session %s: event stream dropped: %s", session_id, exc)
            if not dropped:
                sink(StreamNotice(kind="reconnecting", text=f"the event stream from {self.base_url} dropped; reconnecting...", session_id=session_id))
            dropped = True
            await asyncio.sleep(delay)
            delay = min(RECONNECT_MAX, delay * 2)

    async def start_turn(self, session_id: str, text: str, *, title: str | None = None) -> str:
        if title:
            await self._json("POST", "/v1/sessions", json={"id": session_id, "title": title})
        body = await self._json("POST", f"/v1/sessions/{_quote(session_id)}/turns", json={"text": text, "policy": "queue"})
        return str(body["turn_id"])

    async def compress(self, session_id: str, focus: str) -> str:
        # Not waited for here: the compression's turn reports on the event stream like any turn.
        body = await self._json("POST", f"/v1/sessions/{_quote(session_id)}/compress", json={"focus": focus, "wait": False})
        return str(body["turn_id"])

    async def cancel_turn(self, session_id: str) -> None:
        await self._json("POST", f"/v1/sessions/{_quote(session_id)}/cancel", json={})

    async def resolve_approval(self, session_id: str, request_id: str, choice: ApprovalChoice) -> None:
        await self._json("POST", f"/v1/sessions/{_quote(session_id)}/answer", json={"request_id": request_id, "choice": choice})

    async def answer_clarification(self, session_id: str, request_id: str, answer: str) -> None:
        await self._json("POST", f"/v1/sessions/{_quote(session_id)}/answer", json={"request_id": request_id, "answer": answer})

    async def undo(self, session_id: str) -> tuple[int, str | None]:
        response = await self._request("POST", f"/v1/sessions/{_quote(session_id)}/undo")
        if response.status_code == 404:
            raise RequestRefused("there is nothing to undo: the session has no stored messages yet")
        if response.status_code >= 400:
            raise RequestRefused(_error_text(response))
        body = response.json()
        return int(body["removed"]), body.get("text")

    async def switch_model(self, session_id: str, model: str) -> None:
        if await self.get_session(session_id) is None:
            await self._json("POST", "/v1/sessions", json={"id": session_id})
        await self._json("PATCH", f"/v1/sessions/{_quote(session_id)}", json={"model": model})

    async def list_sessions(self, limit: int = 100) -> list[SessionRecord]:
        body = await self._json("GET", "/v1/sessions", params={"limit": min(limit, 100)})
        return [msgspec.convert(item, SessionRecord) for item in body.get("data", [])]

    async def get_session(self, session_id: str) -> SessionRecord | None:
        response = await self._request("GET", f"/v1/sessions/{_quote(session_id)}")
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise RequestRefused(f"GET session {session_id}: {_error_text(response)}")
        return msgspec.convert(response.json(), SessionRecord)

    async def transcript(self, session_id: str) -> list[ChatMessage]:
        response = await self._request("GET", f"/v1/sessions/{_quote(session_id)}/messages")
        if response.status_code == 404:
            return []
        if response.status_code >= 400:
            raise RequestRefused(f"GET messages of {session_id}: {_error_text(response)}")
        return [_message(item) for item in response.json().get("data", []) if item.get("role") != "system"]

    async def tree(self) -> str:
        from actors.cli import render_tree

        body = await self._json("GET", "/health/detailed")
        root = msgspec.convert(body["tree"], NodeSnapshot)
        lag = float(body.get("reactor_lag_ms", 0.0))
        # render_tree's last line reports reactor figures the route does not send: replace it.
        lines = render_tree(TreeSnapshot(root=root, reactor_lag_ms=lag, reactor_lag_max_ms=lag, reactor_waits=0, reactor_faults=0)).splitlines()[:-1]
        lines.append(f"reactor: lag {lag:.2f} ms; {body.get('active_turns', 0)} turns running ({self.base_url})")
        pools = [msgspec.convert(item, PoolStatus) for item in body.get("credentials", ())]
        return "\n".join([*lines, *pool_lines(pools, time.time())])

    async def tools(self) -> list[str] | None:
        return None  # the server does not publish its tool list

    async def jobs(self) -> list[str] | None:
        response = await self._request("GET", "/api/jobs")
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise RequestRefused(f"GET /api/jobs: {_error_text(response)}")
        return [_job_line(job) for job in response.json().get("jobs", [])]

    async def reset_session(self, old_session_id: str, new_session_id: str) -> None:
        return None  # the server's hooks see sessions, not a client's switch between them

    async def reload(self) -> list[str]:
        msg = f"/reload reloads a runtime in this process; the server at {self.base_url} reloads config.yaml on SIGHUP (kill -HUP <its pid>)"
        raise RequestRefused(msg)

    async def aclose(self) -> None:
        for attachment in self._attachments:
            attachment.close()
        for attachment in self._attachments:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await attachment.task
        self._attachments.clear()
        await self._client.aclose()


def _job_line(job: dict[str, Any]) -> str:
    last = f", last {job['last_status']}" if job.get("last_status") else ""
    return f"{job['id']}  {job['name']}  {job['schedule_display']}  {job['state']}  next {job.get('next_run_at') or '-'}  deliver {job['deliver']}{last}"
