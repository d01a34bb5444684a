"""``POST /v1/chaos/crash``: crash one actor of the tree on purpose (``InjectCrash``), for chaos
tests of a running ``hermes serve``. Off unless the server was started with
``HERMES_CHAOS_ROUTES=1``; then it needs the API key like every route. Body: ``{"path":
"/platforms/telegram"}``; the actor's supervisor restarts it as after any crash.
"""

from __future__ import annotations

import os

from actors import HermesError
from protocols import InjectCrash

from ._app import ApiContext
from ._asgi import HttpError, Request, Send, send_json

ENABLE = "HERMES_CHAOS_ROUTES"


async def chaos_crash(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    if os.environ.get(ENABLE) != "1":
        raise HttpError(404, f"chaos routes are off; start hermes serve with {ENABLE}=1 to crash actors on purpose", code="not_found")
    body = await request.json()
    path = body.get("path") if isinstance(body, dict) else None
    if not isinstance(path, str) or not path.startswith("/"):
        raise HttpError(400, "'path' must be an actor path such as /platforms/telegram", param="path", code="invalid_path")
    try:
        ctx.registry.lookup(path).tell(InjectCrash(reason="crashed through /v1/chaos/crash"))
    except (LookupError, HermesError) as exc:
        raise HttpError(404, f"no running actor at {path} ({exc}); see /health/detailed for the tree", param="path", code="not_found") from None
    await send_json(send, 202, {"crashed": path})
