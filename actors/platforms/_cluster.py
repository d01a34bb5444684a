"""``hermes serve`` as one node of a cluster (``cluster.enabled``): heartbeat, routing, forwarding.

:func:`cluster_setup` (at start) reads the shared secret (``HERMES_CLUSTER_SECRET``: a node in
cluster mode without one refuses to start), the address this node advertises, and builds
``/node`` (``actors.agent._heartbeat``) and the :class:`ClusterRouter` the API server consults.

The router runs in the ASGI app before a request reaches its route:

- a request signed by another node (``_forward``) is checked (signature, clock, replay) and
  stands in for the API key; it is served here or, when the session moved meanwhile, answered
  503 with Retry-After: a forwarded request is never forwarded again;
- a request addressed to a session (:func:`session_key`) has its location decided
  (``actors.agent._locate``) from the session's lease row and the nodes table read at one
  instant of the store's clock; ``Forward`` sends it to the owner, ``Local`` and ``TakeOver``
  let the route serve it (the session actor acquires the lease; a takeover settles what the
  dead owner left open), ``Unavailable`` is a 503 with Retry-After. A forward is read again at
  the instant its owner's lease ends or its heartbeat lapses (``forward_until``) and given up
  (503 ``owner_lost``) when the owner no longer holds the session.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import msgspec
import trio

from actors.agent import ConfigError
from actors.agent._heartbeat import ClusterView, NodeBeats
from actors.agent._locate import Forward, Local, Location, TakeOver, Unavailable, forward_until, locate, retry_unreachable
from actors.agent._node import NodeIdentity
from actors.config import HermesConfig
from actors.store import ReaderPool
from protocols._leases import LeaseRecord, NodeRecord
from supervisor import ChildSpec

from ._asgi import HttpError, Request, Send
from ._forward import FROM_HEADER, Replays, check_signed, forward, new_client, target_of

log = logging.getLogger(__name__)

SECRET_VARIABLE = "HERMES_CLUSTER_SECRET"
MIN_SECRET = 16
"""Characters a cluster secret needs at least."""


@dataclasses.dataclass
class ClusterSetup:
    view: ClusterView
    router: ClusterRouter
    spec: ChildSpec


def advertised(config: HermesConfig, host: str, port: int) -> str:
    """The base URL other nodes reach this one at: ``cluster.advertise_address``, else the listener's."""
    given = config.cluster.advertise_address.strip()
    if given:
        return given if "://" in given else f"http://{given}"
    where = socket.gethostname() if host in ("", "0.0.0.0", "::") else host
    return f"http://[{where}]:{port}" if ":" in where else f"http://{where}:{port}"


def cluster_setup(config: HermesConfig, env: Mapping[str, str], node: NodeIdentity | None, store_file: str | Path, host: str, port: int) -> ClusterSetup | None:
    """This process's part in a cluster (None: not in cluster mode).

    Raises:
        ConfigError: cluster mode without ``HERMES_CLUSTER_SECRET`` (or one too short to trust).
    """
    if node is None:
        return None
    secret = env.get(SECRET_VARIABLE, "")
    if len(secret) < MIN_SECRET:
        what = "is not set" if not secret else f"is shorter than {MIN_SECRET} characters"
        msg = (
            f"cluster.enabled is true but {SECRET_VARIABLE} {what}: the nodes sign the requests they forward to each other with it. "
            f"Put the same value on every node in HERMES_HOME/.env, e.g. {SECRET_VARIABLE}=$(openssl rand -hex 32)"
        )
        raise ConfigError(msg)
    view = ClusterView(node=node, address=advertised(config, host, port), store_file=str(store_file))
    router = ClusterRouter(node=node, secret=secret.encode(), store_file=str(store_file))
    return ClusterSetup(view=view, router=router, spec=ChildSpec(id="node", actor=NodeBeats, args=(view,)))


@dataclasses.dataclass
class Found:
    """What routing read from the store for one request."""

    session_id: str
    location: Location
    reroute_in: float = math.inf
    """For a ``Forward``: seconds (of the store's clock, from the read) until the route is to be
    read again (``forward_until``): the owner's lease ends or its heartbeat lapses then."""


def session_key(request: Request, body: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """Which session a request addresses, as ``(kind, value)``: ``session`` (its id), ``run`` (a
    run id, whose turn names the session) or ``response`` (a stored response id); None: none."""
    parts = request.path.strip("/").split("/")
    if len(parts) >= 3 and parts[:2] == ["v1", "sessions"] and parts[2] != "search":
        return "session", parts[2]
    if len(parts) >= 3 and parts[:2] == ["v1", "runs"]:
        return "run", parts[2]
    if request.path == "/v1/chat/completions" and request.method == "POST":
        given = request.headers.get("x-hermes-session-id")
        return ("session", given) if given else None
    if request.path == "/v1/runs" and request.method == "POST" and body is not None:
        given = body.get("session_id") if "session_id" in body else request.headers.get("x-hermes-session-id")
        return ("session", given) if isinstance(given, str) and given else None
    if request.path == "/v1/responses" and request.method == "POST" and body is not None:
        previous, conversation = body.get("previous_response_id"), body.get("conversation")
        if isinstance(previous, str) and previous and not conversation:
            return "response", previous
        name = conversation.get("id") if isinstance(conversation, dict) else conversation
        return ("session", f"conv-{name}") if isinstance(name, str) and name and not previous else None
    return None


READERS = 4
"""Store reads of the router at once: each in a worker thread on a connection kept in the router's
pool. A burst of requests queues for them (a read is a few milliseconds) instead of opening a
Postgres connection, a server process, for each new worker thread trio starts for the burst
(up to its 40), when the node taking sessions over needs the machine most."""


def _read(readers: ReaderPool, kind: str, value: str, me: str, ttl: float) -> Found | None:
    from actors.store._lease_rows import read_lease, read_nodes, store_now

    with readers() as reader:  # a reader whose reads raised is closed, not lent again
        db = reader.connection
        session_id: str | None = value
        if kind == "run":
            row = db.execute("SELECT session_id FROM turns WHERE turn_id = ?", (value,)).fetchone()
            session_id = None if row is None else str(row[0])
        elif kind == "response":
            row = db.execute("SELECT session_id FROM responses WHERE id = ?", (value,)).fetchone()
            session_id = None if row is None else str(row[0])
        if session_id is None:
            return None  # the route answers (404) as it would anyway
        lease: LeaseRecord | None = read_lease(db, session_id)
        nodes: dict[str, NodeRecord] = {n.node_id: n for n in read_nodes(db)} if lease is not None and lease.node_id != me else {}
        now = store_now(db)
        location = locate(lease, nodes, me, now, ttl)
        if isinstance(location, Forward) and lease is not None:
            return Found(session_id, location, forward_until(lease, nodes[location.node_id], ttl) - now)
        return Found(session_id, location)


class ClusterRouter:
    """Decides, per request, whether this node serves it or forwards it to the session's owner."""

    def __init__(self, *, node: NodeIdentity, secret: bytes, store_file: str) -> None:
        self.node = node
        self.secret = secret
        self.store_file = store_file
        self.readers = ReaderPool(store_file, keep=READERS)
        """Kept store connections of the routing reads (closed at the runtime's stop)."""
        self.reading = trio.CapacityLimiter(READERS)
        self.replays = Replays()
        self.client: httpx.AsyncClient | None = None
        self.forwarded = 0
        """Requests this node sent to an owner."""

    async def signed_by_a_node(self, request: Request) -> bool:
        """True when ``request`` was forwarded by another node and its signature holds.

        Raises:
            HttpError: 401, it claims to come from a node and its signature does not hold.
        """
        if FROM_HEADER not in request.headers:
            return False
        why = check_signed(self.secret, self.replays, request.method, target_of(request), request.headers, await request.body(), time.time())
        if why is not None:
            raise HttpError(401, why, type="authentication_error", code="invalid_cluster_signature")
        return True

    async def _read(self, key: tuple[str, str]) -> Found | None:
        """Where the session of ``key`` is served, read from the store (``READERS`` reads at once)."""
        return await trio.to_thread.run_sync(_read, self.readers, key[0], key[1], self.node.node_id, self.node.lease_ttl, limiter=self.reading)

    async def route(self, request: Request, send: Send, *, forwarded: bool, local_runs: Mapping[str, Any]) -> bool:
        """Forward ``request`` when another live node owns its session (True: answered here)."""
        body: Mapping[str, Any] | None = None
        if request.method == "POST" and request.path in ("/v1/runs", "/v1/responses"):
            try:
                decoded = msgspec.json.decode(await request.body())
            except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                return False  # the route answers the 400
            body = decoded if isinstance(decoded, dict) else None
        key = session_key(request, body)
        if key is None or (key[0] == "run" and key[1] in local_runs):
            return False
        try:
            found = await self._read(key)
        except Exception as exc:
            msg = f"this node cannot read the session's owner from the store ({type(exc).__name__}: {exc}); retry shortly"
            raise HttpError(503, msg, type="server_error", code="store_unavailable", headers={"retry-after": "1"}) from None
        if found is None:
            return False
        match found.location:
            case Local() | TakeOver():
                return False
            case Forward(node_id=owner) if forwarded:
                raise HttpError(
                    503,
                    f"session {found.session_id!r} moved to node {owner!r} while this request was forwarded; retry it",
                    type="server_error",
                    code="session_moved",
                    headers={"retry-after": "1"},
                )
            case Forward(node_id=owner, address=address):
                if self.client is None:
                    self.client = new_client()
                self.forwarded += 1
                await self._forward_while_owner(request, send, address, owner, found, key)
                return True
            case Unavailable(reason=reason, retry_after=after):
                raise HttpError(503, reason, type="server_error", code="owner_unavailable", headers={"retry-after": str(max(1, math.ceil(after)))})
        return False

    async def _forward_while_owner(self, request: Request, send: Send, address: str, owner: str, found: Found, key: tuple[str, str]) -> None:
        """Forward, and give up as soon as the owner stops holding the session: a stopped node
        still accepts connections (the kernel does) and would hold the request for ever. The
        store is read again when the owner's lease ends or its heartbeat lapses, as of the last
        read (``forward_until``); a live owner has renewed both by then. A store that cannot be
        read is tried again every third of a ttl, for one ttl: past it nobody can say the owner
        still holds the session, and the forward is given up too (503, retry)."""
        assert self.client is not None
        lost: list[Location | str | None] = []
        """Set when the watch gives the forward up: where the store says the session is now (a
        string: why the store could not say)."""

        async def watch(scope: trio.CancelScope) -> None:
            reroute_in, unread_since = found.reroute_in, math.inf
            while True:
                await trio.sleep(max(0.0, reroute_in))
                try:
                    again = await self._read(key)
                except Exception as exc:  # the store is unreachable: wait for the owner's answer a while
                    log.warning("cluster: re-reading the owner of session %s failed: %s", found.session_id, exc)
                    unread_since = min(unread_since, trio.current_time())
                    if trio.current_time() - unread_since < self.node.lease_ttl:
                        reroute_in = self.node.renew_every
                        continue
                    lost.append(f"this node could not read the store for {self.node.lease_ttl:g} s ({type(exc).__name__}: {exc})")
                    scope.cancel()
                    return
                unread_since = math.inf
                if again is not None and isinstance(again.location, Forward) and again.location.node_id == owner:
                    reroute_in = again.reroute_in
                    continue
                lost.append(None if again is None else again.location)
                scope.cancel()
                return

        failed: HttpError | None = None
        began = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch, nursery.cancel_scope)
            try:
                await forward(self.client, request, send, address, self.secret, self.node.node_id, owner)
            except HttpError as exc:  # raised past the nursery, not wrapped in an exception group
                failed = exc
            nursery.cancel_scope.cancel()
        if failed is not None:
            if failed.code == "owner_unreachable":  # a retry before the owner may be taken over is refused again
                failed.headers["retry-after"] = str(retry_unreachable(found.reroute_in - (trio.current_time() - began), self.node.lease_ttl))
            raise failed
        if lost and isinstance(lost[0], str):
            msg = f"node {owner!r} owns this session, and {lost[0]}: whether it still does is unknown; retry the request"
            raise HttpError(503, msg, type="server_error", code="store_unavailable", headers={"retry-after": "1"})
        if lost:
            why = "its heartbeat stopped" if isinstance(lost[0], TakeOver) else "its lease ended"
            raise HttpError(
                503,
                f"node {owner!r}, which owned this session, stopped holding it while it answered ({why}); retry: the session is served elsewhere now",
                type="server_error",
                code="owner_lost",
                headers={"retry-after": "1"},
            )
