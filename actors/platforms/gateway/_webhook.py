"""The webhook adapter (``/platforms/webhook``): an HTTP receiver and delivery of the answers.

``POST /webhooks/<route>`` with a signed JSON body (see :mod:`._webhook_auth`) answers 202
``{"status": "accepted", "delivery_id": ...}`` at once and tells the adapter the delivery as a
:class:`PlatformMessage` (chat type ``route``; each delivery is a session of its own,
``agent:main:webhook:route:<route>:<delivery>``); a delivery id seen before (also before a
restart) is dropped. The turn's answer is POSTed as JSON (``{"type": "answer", ..., "text"}``)
to the route's ``deliver_url``, signed with the route's secret (``X-Webhook-Signature``),
retried on 429 (``Retry-After``), 5xx and transport errors with backoff; a route with
``max_chars`` gets a longer answer as numbered pieces (``(i/N)``, ``part`` / ``parts``), one
POST each. A turn that waits for an approval POSTs ``{"type": "approval", ...}`` there the same
way; ``MEDIA:`` files of the answer ride base64 in its last POST (``_webhook_files.py``),
and ``POST /webhooks/<route>/approvals/<request_id>`` (signed like the route's webhooks)
answers it: 202, or 404 when nothing waits for that id (``_webhook_approvals.py``). ``GET /health`` answers ``{"status": "ok",
"platform": "webhook"}``; ``GET /openapi.json`` documents all of it (``_webhook_openapi.py``). The server runs as one reactor wait (hypercorn), like the API server.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from typing import Any

import httpx
import hypercorn.config
import hypercorn.trio
import trio

from protocols import ApprovalRequested, PlatformMessage, ResolveApproval, WaitFinished

from ..._version import package_version
from .._asgi import HttpError, Request, send_error, send_json
from .._listen import open_listener
from ._adapter import GatewayAdapter
from ._answer_plan import AnswerPlan
from ._chat_commands import approval_text
from ._chunks import chunk_text
from ._retry import CallFailed, retry_delay
from ._session_key import key_of
from ._webhook_approvals import APPROVALS, Pending, approval_event, choice_of
from ._webhook_auth import delivery_of, event_of, render_prompt, sign, signature_problem
from ._webhook_files import with_attachments
from ._webhook_openapi import webhook_document

log = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Route:
    name: str
    secret: str
    events: frozenset[str] = frozenset()
    prompt: str = ""
    deliver_url: str = ""
    """Where the answer is POSTed (empty: it is only logged)."""
    max_chars: int = 0
    """An answer longer than this goes in numbered pieces, one POST each (0: one POST)."""


class WebhookApp:
    """The receiver: checks, then tells the adapter; never waits for the agent."""

    def __init__(self, routes: dict[str, Route], tell: Any, pending: Pending | None = None) -> None:
        self.routes = routes
        self.tell = tell
        self.pending = pending or Pending()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
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
        send = request.draining(send)
        try:
            await self.handle(request, send)
        except HttpError as error:
            await send_error(send, error)

    async def handle(self, request: Request, send: Any) -> None:
        if request.path == "/health" and request.method == "GET":
            await send_json(send, 200, {"status": "ok", "platform": "webhook"})
            return
        if request.path == "/openapi.json" and request.method == "GET":
            await send_json(send, 200, webhook_document(self.routes, package_version()))
            return
        name, decision, request_id = request.path.removeprefix("/webhooks/").partition(APPROVALS)
        route = self.routes.get(name) if request.path.startswith("/webhooks/") and bool(decision) == bool(request_id) else None
        if route is None:
            raise HttpError(
                404, f"no webhook route {request.path!r}; routes: {', '.join('/webhooks/' + r for r in sorted(self.routes)) or 'none'}", code="not_found"
            )
        if request.method != "POST":
            raise HttpError(405, "webhooks take POST", code="method_not_allowed")
        body = await request.body(MAX_BODY)
        problem = signature_problem(route.secret, request.headers, body, time.time())
        if problem is not None:
            raise HttpError(401, problem, type="authentication_error", code="bad_signature")
        try:
            payload = json.loads(body) if body.strip() else {}
        except ValueError:
            raise HttpError(400, "the body is not JSON", code="invalid_json") from None
        if request_id:
            await self.decide(route, request_id, payload, send)
            return
        event = event_of(request.headers, payload)
        if route.events and event not in route.events:
            await send_json(send, 200, {"status": "ignored", "reason": f"event {event!r} is not one of the route's events"})
            return
        delivery = delivery_of(request.headers, body)
        self.tell(
            PlatformMessage(
                platform="webhook",
                chat_type="route",
                chat_id=route.name,
                thread_id=delivery,
                user_id="webhook",
                user_name=route.name,
                message_id=delivery,
                text=render_prompt(route.prompt, payload, route=route.name, event=event),
            )
        )
        await send_json(send, 202, {"status": "accepted", "delivery_id": delivery})

    async def decide(self, route: Route, request_id: str, payload: Any, send: Any) -> None:
        """A signed decision on an approval a delivery of ``route`` waits for."""
        choice, problem = choice_of(payload, request_id)
        if choice is None:
            raise HttpError(400, problem, param="decision", code="invalid_decision")
        if not self.pending.take(request_id, route.name, time.monotonic()):
            why = f"nothing of route {route.name!r} waits for approval {request_id!r} (answered already, timed out, or its turn ended)"
            raise HttpError(404, why, code="no_pending_approval")
        self.tell(ResolveApproval(request_id=request_id, choice=choice))
        await send_json(send, 202, {"status": "accepted", "request_id": request_id, "choice": choice})


async def _serve(app: WebhookApp, fd: int) -> None:
    config = hypercorn.config.Config()
    config.bind = [f"fd://{fd}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.graceful_timeout = 1.0
    await hypercorn.trio.serve(app, config, mode="asgi")  # type: ignore[arg-type]


class WebhookAdapter(GatewayAdapter):
    platform = "webhook"
    takes_commands = False  # a rendered prompt that starts with "/" is a prompt

    def __init__(self, *, host: str, port: int, routes: dict[str, Route], **common: Any) -> None:
        super().__init__(**common)
        self.host = host
        self.port = port
        self.routes = routes
        self.bound = 0
        self.pending = Pending()
        """The approvals the receiver may answer (reactor-owned: changed by ``call_soon`` and waits only)."""

    def begin(self) -> None:
        listener = open_listener(self.host, self.port)
        self.bound = listener.getsockname()[1]
        self.start_wait(_serve, WebhookApp(self.routes, self.address.tell, self.pending), listener.detach(), tag="server", timeout=math.inf)
        self.set_state("running", f"http://{self.host}:{self.bound}/webhooks/")

    def scheduled_sender(self) -> Any:
        from ._scheduled import webhook_sender

        return webhook_sender(self.routes, workspace=self.workspace, home=self.home)

    def other(self, message: Any) -> Any:
        match message:
            case WaitFinished(tag="server", status=status, error=error):
                raise RuntimeError(f"the webhook server stopped ({status}: {error or 'no error'})")
            case ResolveApproval(request_id=request_id):
                waiting = [s for s, r in self.approvals.items() if r.request_id == request_id]
                if not waiting:  # the turn ended between the receiver's check and now
                    log.info("webhook: approval %s was answered after its turn ended", request_id)
                    return None
                del self.approvals[waiting[0]]
                self.tell_session(waiting[0], message)
            case _:
                return super().other(message)

    def receive(self, message: Any) -> Any:
        if message == "port":
            return self.bound
        return super().receive(message)

    def dedup_key(self, message: PlatformMessage) -> str:
        return f"{message.chat_id}/{message.message_id}"

    def ask_approval(self, message: PlatformMessage, request: ApprovalRequested) -> None:
        self.start_wait(self._deliver, message, [approval_text(request)], "", request, tag="deliver", timeout=math.inf)

    def turn_ended(self, status: str, value: Any, error: str, *, sent: AnswerPlan | None = None) -> None:
        if status == "ok":  # its approvals are stale now: a decision on one is a 404
            self.reactor.call_soon(self.pending.forget, value.session_id)
        super().turn_ended(status, value, error, sent=sent)

    async def deliver(self, message: PlatformMessage, pieces: list[str], markup: Any = None) -> int:
        """The answer (one POST, or one a piece of the route's ``max_chars``), or with ``markup``
        an :class:`ApprovalRequested`: the approval event, once the receiver can take its decision."""
        route = self.routes.get(message.chat_id)
        text = "".join(pieces)
        session_id = key_of(message)
        if isinstance(markup, ApprovalRequested) and route is not None:
            # before the event goes (its answer may come at once); its timeout counted from now, a little late
            self.pending.expect(markup.request_id, route.name, markup.session_id, time.monotonic() + markup.timeout_s)
            bodies = [approval_event(route.name, message.message_id, markup.session_id, markup)]
            ids = [f"{message.message_id}:approval:{markup.request_id}"]  # a receiver's dedup by X-Webhook-Id keeps the answer
        else:
            text, files = await with_attachments(text, workspace=self.workspace, home=self.home)
            parts = chunk_text(text, route.max_chars) if route is not None and route.max_chars else [text]
            common = {"type": "answer", "route": message.chat_id, "delivery_id": message.message_id, "session_id": session_id}
            bodies = [common | {"text": piece} | ({"part": i, "parts": len(parts)} if len(parts) > 1 else {}) for i, piece in enumerate(parts, 1)]
            if files:  # the files ride in the last POST: a receiver has the whole answer once they come
                bodies[-1]["attachments"] = files
            ids = [f"{message.message_id}-{i}" if len(parts) > 1 else message.message_id for i in range(1, len(parts) + 1)]
        if route is None or not route.deliver_url:
            log.info("webhook %s delivery %s: %s", message.chat_id, message.message_id, text[:500])
            return 0
        retries = 0
        async with httpx.AsyncClient() as client:
            for body, delivery in zip(bodies, ids, strict=True):
                retries += await self._post(client, route, json.dumps(body).encode(), delivery)
        return retries

    async def _post(self, client: httpx.AsyncClient, route: Route, body: bytes, delivery: str) -> int:
        """POST one signed body to the route's ``deliver_url``, retried by :func:`retry_delay`; the retries made."""
        headers = {"content-type": "application/json", "x-webhook-signature": sign(route.secret, body), "x-webhook-id": delivery}
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await client.post(route.deliver_url, content=body, headers=headers, timeout=30.0)
                if response.status_code < 300:
                    return attempt - 1
                after = response.headers.get("retry-after")
                failure = CallFailed(response.status_code, response.text[:200], float(after) if after and after.isdigit() else None)
            except httpx.HTTPError as exc:
                failure = CallFailed(0, f"{type(exc).__name__}: {exc}")
            delay = retry_delay(failure, attempt)
            if delay is None:
                raise failure
            await trio.sleep(delay)
