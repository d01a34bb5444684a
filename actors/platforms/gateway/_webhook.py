"""The webhook adapter (``/platforms/webhook``): an HTTP receiver and delivery of the answers.

``POST /webhooks/<route>`` with a signed JSON body (see :mod:`._webhook_auth`) answers 202
``{"status": "accepted", "delivery_id": ...}`` at once and tells the adapter the delivery as a
:class:`PlatformMessage` (chat type ``route``; each delivery is a session of its own,
``agent:main:webhook:route:<route>:<delivery>``); a delivery id seen before (also before a
restart) is dropped. The turn's answer is POSTed as JSON to the route's ``deliver_url``,
signed with the route's secret (``X-Webhook-Signature``), retried on 429 (``Retry-After``),
5xx and transport errors with backoff. ``GET /health`` answers ``{"status": "ok",
"platform": "webhook"}``. The server runs as one reactor wait (hypercorn), like the API server.
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

from protocols import PlatformMessage, WaitFinished

from .._asgi import HttpError, Request, send_error, send_json
from .._listen import open_listener
from ._adapter import GatewayAdapter
from ._retry import CallFailed, retry_delay
from ._session_key import key_of
from ._webhook_auth import delivery_of, event_of, render_prompt, sign, signature_problem

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


class WebhookApp:
    """The receiver: checks, then tells the adapter; never waits for the agent."""

    def __init__(self, routes: dict[str, Route], tell: Any) -> None:
        self.routes = routes
        self.tell = tell

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
        name = request.path.removeprefix("/webhooks/")
        route = self.routes.get(name) if request.path.startswith("/webhooks/") else None
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

    def begin(self) -> None:
        listener = open_listener(self.host, self.port)
        self.bound = listener.getsockname()[1]
        self.start_wait(_serve, WebhookApp(self.routes, self.address.tell), listener.detach(), tag="server", timeout=math.inf)
        self.set_state("running", f"http://{self.host}:{self.bound}/webhooks/")

    def scheduled_sender(self) -> Any:
        from ._scheduled import webhook_sender

        return webhook_sender(self.routes)

    def other(self, message: Any) -> Any:
        match message:
            case WaitFinished(tag="server", status=status, error=error):
                raise RuntimeError(f"the webhook server stopped ({status}: {error or 'no error'})")
            case _:
                return super().other(message)

    def receive(self, message: Any) -> Any:
        if message == "port":
            return self.bound
        return super().receive(message)

    def dedup_key(self, message: PlatformMessage) -> str:
        return f"{message.chat_id}/{message.message_id}"

    async def deliver(self, message: PlatformMessage, pieces: list[str], markup: Any = None) -> int:
        route = self.routes.get(message.chat_id)
        text = "".join(pieces)
        if route is None or not route.deliver_url:
            log.info("webhook %s delivery %s answered: %s", message.chat_id, message.message_id, text[:500])
            return 0
        body = json.dumps({"route": route.name, "delivery_id": message.message_id, "session_id": key_of(message), "text": text}).encode()
        headers = {"content-type": "application/json", "x-webhook-signature": sign(route.secret, body), "x-webhook-id": message.message_id}
        attempt = 0
        async with httpx.AsyncClient() as client:
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
