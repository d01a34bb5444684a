"""The API server's ASGI app: routing, auth, CORS, admission, and the small routes.

Routes that run turns live in ``_chat.py`` and ``_runs.py``; they share :class:`ApiContext`.
Everything here runs in the reactor (hypercorn on trio): handlers only await. Every
request gets an ``X-Request-Id`` and one line in the access log (``_access.py``).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from actors import HermesError, Reactor, Registry
from actors.agent import SESSIONS_PATH, HubRegistry, tell_session
from actors.agent._reader import TrioSubscriber
from protocols import AdapterStatus, AdapterStatusRequest, PoolStatus, PoolStatusRequest, SessionCommand, TreeSnapshot, to_json

from ._access import REQUEST_ID_HEADER, AccessRecord, log_access, request_id_for, serve_request, served
from ._asgi import HttpError, Receive, Request, Scope, Send, send_error, send_json
from ._conversations import ConversationIndex
from ._idempotency import Idempotency
from ._keys import authorized

if TYPE_CHECKING:
    from actors.agent import ModelClients, ModelSettings

    from ._cluster import ClusterRouter

log = logging.getLogger(__name__)
Handler = Callable[["ApiContext", Request, Send, dict[str, str]], Awaitable[None]]
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
POOL_STATUS_TIMEOUT = 1.0
"""Seconds /health/detailed waits for each credential pool's status."""


@dataclasses.dataclass
class ApiContext:
    """What every route needs; one per server."""

    registry: Registry
    reactor: Reactor
    hubs: HubRegistry
    snapshot: Callable[[], TreeSnapshot]
    model_name: str
    key: str
    version: str
    allowed_origins: frozenset[str] = frozenset()
    store_file: str | Path | None = None
    max_concurrent: int = 10_000
    keepalive: float = 15.0
    active: int = 0
    draining: bool = False
    runs: dict[str, Any] = dataclasses.field(default_factory=dict)
    idempotency: Idempotency = dataclasses.field(default_factory=Idempotency)
    conversations: ConversationIndex = dataclasses.field(default_factory=ConversationIndex)
    """Which session a chat completion without a session header continues."""
    tool_progress: bool = False
    """Chat-completion streams carry tool progress as SSE comments unless a request says
    otherwise (``X-Hermes-Tool-Progress``); ``api_server.tool_progress`` in config.yaml."""
    plain_model_name: str | None = None
    """The advertised id of plain completions (no tools, nothing stored); None: not offered."""
    upstream: ModelSettings | None = None
    """The configured model that plain completions are forwarded to."""
    clients: ModelClients | None = None
    """The reactor's model HTTP clients (shared with the sessions)."""
    hook_statistics: Callable[[], dict[str, Any]] | None = None
    """The hooks' counters (plugins: calls, faults, restarts; shell hooks); None: no hooks."""
    health_sections: Mapping[str, Callable[[], Any]] = dataclasses.field(default_factory=dict)
    """More keys of /health/detailed (``mcp``), each read per request."""
    cluster: ClusterRouter | None = None
    """Cluster mode: forwards a request to the node that owns its session (``_cluster.py``)."""

    def tell(self, session_id: str, message: SessionCommand) -> None:
        tell_session(self.registry, self.registry.lookup(SESSIONS_PATH), session_id, message)

    def admit(self) -> None:
        """Count a turn in, or refuse it (draining, or at the concurrency limit)."""
        if self.draining:
            raise HttpError(
                503, "the server is shutting down; retry against the next instance", type="server_error", code="draining", headers={"retry-after": "5"}
            )
        if self.active >= self.max_concurrent:
            raise HttpError(
                429,
                f"{self.max_concurrent} turns are running, the configured limit; retry shortly",
                type="rate_limit_error",
                code="too_many_requests",
                headers={"retry-after": "1"},
            )
        self.active += 1

    def release(self) -> None:
        self.active -= 1


def check_session_id(value: object, param: str) -> str:
    """A session id from a client: 1-256 printable characters, no '/'."""
    if not isinstance(value, str) or not value or len(value) > 256 or _CONTROL.search(value) or "/" in value or not value.isprintable():
        raise HttpError(400, f"{param} must be 1-256 printable characters without '/'", param=param, code="invalid_session_id")
    return value


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def now() -> int:
    return int(time.time())


async def health(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    await send_json(send, 200, {"status": "ok", "platform": "hermes-agent", "version": ctx.version})


async def health_detailed(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    from actors.store import store_description

    from ._jobs_api import scheduler_health
    from ._sessions_api import read_store

    snapshot = ctx.snapshot()
    try:  # a Hermes state.db this server imported at start: when, from which version, the backup
        hermes_import = await read_store(ctx, lambda reader: reader.hermes_import()) if ctx.store_file is not None else None
    except HttpError:
        hermes_import = None
    sessions = next((n for n in snapshot.root.children if n.path == "/sessions"), None)
    await send_json(
        send,
        200,
        {
            "status": "ok",
            "platform": "hermes-agent",
            "version": ctx.version,
            "active_sessions": len(sessions.children) if sessions else 0,
            "active_turns": ctx.active,
            "reactor_lag_ms": snapshot.reactor_lag_ms,
            "tree": msgspec.json.decode(to_json(snapshot.root)),
            "credentials": [msgspec.json.decode(to_json(status)) for status in await pool_statuses(ctx, snapshot)],
            "hermes_import": hermes_import,
            "store": store_description(ctx.store_file) if ctx.store_file is not None else None,
            "platforms": [msgspec.json.decode(to_json(status)) for status in await adapter_statuses(ctx, snapshot)],
            "hooks": ctx.hook_statistics() if ctx.hook_statistics is not None else None,
            "scheduler": await scheduler_health(ctx),
            **{key: read() for key, read in ctx.health_sections.items()},
        },
    )


async def adapter_statuses(ctx: ApiContext, snapshot: TreeSnapshot) -> list[AdapterStatus]:
    """Every gateway adapter's status (``/platforms/<name>`` but the API server itself); one
    that does not answer within a second (restarting) is shown as ``starting``."""
    platforms = next((n for n in snapshot.root.children if n.path == "/platforms"), None)
    statuses: list[AdapterStatus] = []
    for node in platforms.children if platforms is not None else ():
        if node.path == "/platforms/api":  # the API server itself
            continue
        reply_to = TrioSubscriber(ctx.reactor)
        name = node.path.rsplit("/", 1)[-1]
        try:
            ctx.registry.lookup(node.path).tell(AdapterStatusRequest(reply_to=reply_to))
        except (LookupError, HermesError):
            statuses.append(AdapterStatus(platform=name, state="starting", detail="restarting"))
            continue
        status = None
        with trio.move_on_after(POOL_STATUS_TIMEOUT):
            status = await reply_to.get()
        statuses.append(status if isinstance(status, AdapterStatus) else AdapterStatus(platform=name, state="starting", detail="no answer within 1 s"))
    return statuses


async def pool_statuses(ctx: ApiContext, snapshot: TreeSnapshot) -> list[PoolStatus]:
    """Every credential pool's status (keys by their last four characters); a pool that does not
    answer within a second is left out."""
    credentials = next((n for n in snapshot.root.children if n.path == "/credentials"), None)
    statuses: list[PoolStatus] = []
    for node in credentials.children if credentials is not None else ():
        reply_to = TrioSubscriber(ctx.reactor)
        try:
            ctx.registry.lookup(node.path).tell(PoolStatusRequest(reply_to=reply_to))
        except (LookupError, HermesError):
            continue
        with trio.move_on_after(POOL_STATUS_TIMEOUT):
            status = await reply_to.get()
            if isinstance(status, PoolStatus):
                statuses.append(status)
    return statuses


async def models(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    names = [ctx.model_name, *([ctx.plain_model_name] if ctx.plain_model_name else [])]
    await send_json(send, 200, {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "hermes"} for name in names]})


PUBLIC = frozenset({"/health", "/v1/health", "/openapi.json"})


class App:
    """The ASGI callable."""

    def __init__(self, ctx: ApiContext, routes: list[tuple[str, str, Handler]]) -> None:
        self.ctx = ctx
        self.routes = [
            (method, pattern, re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", pattern) + "$"), handler) for method, pattern, handler in routes
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        request = Request.from_scope(scope, receive)
        record = AccessRecord(request_id=request_id_for(request), method=request.method, started=time.monotonic())
        token = serve_request(request)
        try:
            await self._serve(request, _counted(request.draining(send), record), record)
        finally:
            served(token)
            log_access(record, request)

    async def _serve(self, request: Request, send: Send, record: AccessRecord) -> None:
        cors: dict[str, str] = {}
        started = False

        async def tracked(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start" and cors:
                message = {**message, "headers": [*message["headers"], *((k.encode(), v.encode()) for k, v in cors.items())]}
            started = True
            await send(message)

        origin = request.headers.get("origin")
        try:
            if origin is not None:
                if origin not in self.ctx.allowed_origins:
                    raise HttpError(
                        403,
                        f"origin {origin!r} is not allowed; add it to api_server.cors_origins in config.yaml",
                        type="permission_error",
                        code="origin_not_allowed",
                    )
                cors = {"access-control-allow-origin": origin, "vary": "Origin"}
                if request.method == "OPTIONS":
                    await send_json(
                        send,
                        204,
                        None,
                        {
                            **cors,
                            "access-control-allow-methods": "GET, POST, PATCH, DELETE, OPTIONS",
                            "access-control-allow-headers": "authorization, content-type, x-hermes-session-id, x-hermes-tool-progress, x-request-id, idempotency-key, last-event-id",
                            "access-control-max-age": "600",
                        },
                    )
                    return
            cluster = self.ctx.cluster
            forwarded = cluster is not None and await cluster.signed_by_a_node(request)  # stands in for the key
            if request.path not in PUBLIC and not forwarded and not authorized(request.headers.get("authorization"), self.ctx.key):
                raise HttpError(
                    401,
                    "missing or wrong API key: send 'Authorization: Bearer <key>' (the key is API_SERVER_KEY in HERMES_HOME/.env)",
                    type="authentication_error",
                    code="invalid_api_key",
                )
            handler, params, allowed = self._match(request, record)
            if handler is None:
                if allowed:
                    raise HttpError(405, f"{request.method} is not allowed on {request.path}; use {', '.join(sorted(allowed))}", code="method_not_allowed")
                raise HttpError(404, f"no route {request.method} {request.path}", code="not_found")
            if cluster is not None and await cluster.route(request, tracked, forwarded=forwarded, local_runs=self.ctx.runs):
                return  # the session's owner answered
            found = handler

            async def run(out: Send) -> None:
                await found(self.ctx, request, out, params)

            await self.ctx.idempotency.handle(request, tracked, run)
        except HttpError as error:
            if not started:
                await send_error(send, error, cors)
        except Exception:
            log.exception("%s %s failed (request %s)", request.method, request.path, record.request_id)
            if not started:
                await send_error(send, HttpError(500, "the server failed on this request; it is logged", type="server_error", code="internal_error"), cors)

    def _match(self, request: Request, record: AccessRecord) -> tuple[Handler | None, dict[str, str], set[str]]:
        allowed: set[str] = set()
        for method, template, pattern, handler in self.routes:
            found = pattern.match(request.path)
            if found:
                if method == request.method:
                    record.route = template
                    params = found.groupdict()
                    record.session_id = params.get("session_id")
                    return handler, params, allowed
                allowed.add(method)
        return None, {}, allowed


_SESSION_HEADER = b"x-hermes-session-id"


def _counted(send: Send, record: AccessRecord) -> Send:
    """``send`` that notes the status, session header and body bytes, and adds ``X-Request-Id``."""
    request_id = (REQUEST_ID_HEADER.encode(), record.request_id.encode())

    async def counted(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            record.status = message["status"]
            headers = message.get("headers") or []
            session = next((value for name, value in headers if name == _SESSION_HEADER), None)
            if session is not None:
                record.session_id = session.decode("latin-1")
            message = {**message, "headers": [*headers, request_id]}
        elif message["type"] == "http.response.body":
            record.bytes_out += len(message.get("body", b""))
        await send(message)

    return counted
