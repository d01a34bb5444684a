"""The API server actor: hypercorn on trio, as one long wait in the reactor.

The actor binds the listening socket itself (so the port is known at once, also port 0),
or takes the one ``hermes serve`` bound before the runtime started (``settings.listener``,
first incarnation only), then hands it to hypercorn. If the server task fails, the actor
crashes and its supervisor restarts it; when the actor stops, its wait is cancelled and
hypercorn closes every connection.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import hypercorn.config
import hypercorn.trio

from actors import Actor, ActorPath
from actors._snapshot import build_snapshot
from actors.agent import HubRegistry
from protocols import WaitFinished

from ._app import ApiContext, App
from ._listen import Listener, open_listener
from ._routes import ROUTES
from ._worker_role import PRIVATE_HOST

if TYPE_CHECKING:
    from actors.agent import ModelClients, ModelSettings

    from ._cluster import ClusterRouter

log = logging.getLogger(__name__)

ApiServerInbox = Literal["port", "drain", "active"] | WaitFinished
"""What the API server actor takes: ``ask("port")`` (the bound port), ``tell("drain")``
(refuse new turns, as before a shutdown), ``ask("active")`` (turns running), and the end of
its server wait."""

API_SERVER_PATH: ActorPath[ApiServerInbox] = ActorPath("/platforms/api")
"""Where ``hermes serve`` puts the server: ``runtime.lookup(API_SERVER_PATH)`` is typed."""


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8642
    key: str = ""
    model_name: str = "hermes-agent"
    version: str = "0.1.0"
    allowed_origins: frozenset[str] = frozenset()
    max_concurrent: int = 10_000
    keepalive: float = 15.0
    store_file: str | Path | None = None
    tool_progress: bool = False
    """Tool progress in chat-completion streams by default (``api_server.tool_progress``)."""
    plain_model_name: str | None = None
    """The plain-completion model id; None: ``<model_name>-plain``. Offered only with ``upstream``."""
    upstream: ModelSettings | None = None
    """The model that plain completions go to (the sessions' configured model)."""
    clients: ModelClients | None = None
    """The model HTTP clients that plain completions use (the sessions' pool)."""
    listener: Listener | None = None
    """A socket bound before the runtime started, for the first incarnation."""
    private: Listener | None = None
    """A ``--workers`` worker's own loopback socket, served too (siblings forward to it); a
    restarted server binds its port again."""
    hook_statistics: Callable[[], dict[str, Any]] | None = None
    """The hooks' counters for /health/detailed (``actors.hooks.Hooks.statistics``); None: no hooks."""
    health_sections: Mapping[str, Callable[[], Any]] = dataclasses.field(default_factory=dict)
    """More keys of /health/detailed, each a reader called per request (``mcp``: the MCP servers)."""
    cluster: ClusterRouter | None = None
    """Cluster mode: the router that forwards requests for sessions other nodes own."""


async def _serve(app: App, fd: int, *more: int) -> None:
    config = hypercorn.config.Config()
    config.bind = [f"fd://{n}" for n in (fd, *more)]  # hypercorn owns the listening sockets from here on
    config.backlog = 1024  # hypercorn listens again with its own backlog (default 100: resets at C=1,000)
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")  # ours: one handler (the CLI's), not a second one of its own
    config.keep_alive_timeout = 75
    config.graceful_timeout = 1.0
    await hypercorn.trio.serve(app, config, mode="asgi")  # type: ignore[arg-type]


class ApiServer(Actor[ApiServerInbox]):
    """Serves the OpenAI-compatible API for the sessions of this runtime."""

    def __init__(self, settings: ServerSettings, hubs: HubRegistry) -> None:
        super().__init__()
        self.settings = settings
        self.hubs = hubs
        self.port = 0

    def started(self) -> None:
        context = self._context()
        settings = self.settings
        listener = settings.listener.take() if settings.listener is not None else None
        if listener is None:
            again = settings.listener
            listener = open_listener(settings.host, again.port if again is not None else settings.port, reuse_port=again is not None and again.reuse_port)
        self.port = listener.getsockname()[1]
        more = []
        if settings.private is not None:
            private = settings.private.take() or open_listener(PRIVATE_HOST, settings.private.port)
            more.append(private.detach())
        self.api = ApiContext(
            registry=context.registry,
            reactor=context.reactor,
            hubs=self.hubs,
            snapshot=lambda: build_snapshot(context.registry, context.reactor),
            model_name=self.settings.model_name,
            key=self.settings.key,
            version=self.settings.version,
            allowed_origins=self.settings.allowed_origins,
            store_file=self.settings.store_file,
            max_concurrent=self.settings.max_concurrent,
            keepalive=self.settings.keepalive,
            tool_progress=settings.tool_progress,
            plain_model_name=(settings.plain_model_name or f"{settings.model_name}-plain") if settings.upstream is not None else None,
            upstream=settings.upstream,
            clients=settings.clients,
            hook_statistics=settings.hook_statistics,
            health_sections=settings.health_sections,
            cluster=settings.cluster,
        )
        self.start_wait(_serve, App(self.api, ROUTES), listener.detach(), *more, tag="server", timeout=math.inf)
        log.info("API server listening on %s:%d", self.settings.host, self.port)

    def receive(self, message: ApiServerInbox) -> Any:
        match message:
            case WaitFinished(tag="server", status=status, error=error):
                raise RuntimeError(f"the API server stopped ({status}: {error or 'no error'})")
            case "port":
                return self.port
            case "drain":
                self.reactor.call_soon(setattr, self.api, "draining", True)
                return None
            case "active":
                return self.api.active
            case _:
                return super().receive(message)
