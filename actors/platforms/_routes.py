"""The route table of the API server."""

from __future__ import annotations

from ._app import Handler, health, health_detailed, models
from ._chat import chat_completions

ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/health", health),
    ("GET", "/v1/health", health),
    ("GET", "/health/detailed", health_detailed),
    ("GET", "/v1/models", models),
    ("POST", "/v1/chat/completions", chat_completions),
]
