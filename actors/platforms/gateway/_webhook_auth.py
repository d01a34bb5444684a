"""Webhook requests, pure: is a request signed, which event and delivery it is, and its prompt.

Accepted signatures (any one, checked in constant time against the route's secret):

- ``X-Hub-Signature-256: sha256=<hex>`` — GitHub's: HMAC-SHA256 of the raw body;
- ``X-Webhook-Signature: <hex>`` — the generic form: HMAC-SHA256 of the raw body (our own
  deliveries are signed this way too);
- ``X-Gitlab-Token: <secret>`` — GitLab sends the secret itself.

A route whose secret is ``INSECURE_NO_AUTH`` takes unsigned requests (for local testing only,
as in Hermes). The replay window: a request carrying ``X-Webhook-Timestamp`` (Unix seconds)
more than five minutes away from now is refused; a delivery id seen before is dropped by the
adapter's dedup.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from typing import Any

INSECURE = "INSECURE_NO_AUTH"
REPLAY_WINDOW = 300.0


def sign(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signature_problem(secret: str, headers: Mapping[str, str], body: bytes, now: float) -> str | None:
    """Why the request is refused (None: it is signed with ``secret``). ``headers`` lower-case."""
    if secret == INSECURE:
        return None
    if not secret:
        return "this route has no secret; set platforms.webhook.extra.routes.<name>.secret (or WEBHOOK_SECRET)"
    stamp = headers.get("x-webhook-timestamp")
    if stamp is not None:
        try:
            skew = abs(now - float(stamp))
        except ValueError:
            return "X-Webhook-Timestamp is not a number of seconds"
        if skew > REPLAY_WINDOW:
            return f"X-Webhook-Timestamp is {skew:.0f} s away from now (the window is {REPLAY_WINDOW:.0f} s)"
    expected = sign(secret, body)
    github = headers.get("x-hub-signature-256", "")
    if github.startswith("sha256=") and hmac.compare_digest(github[7:], expected):
        return None
    generic = headers.get("x-webhook-signature")
    if generic is not None and hmac.compare_digest(generic.strip().lower(), expected):
        return None
    gitlab = headers.get("x-gitlab-token")
    if gitlab is not None and hmac.compare_digest(gitlab.encode(), secret.encode()):
        return None
    if github or generic is not None or gitlab is not None:
        return "the signature does not match the route's secret"
    return "the request is not signed (send X-Hub-Signature-256, X-Webhook-Signature or X-Gitlab-Token)"


def event_of(headers: Mapping[str, str], payload: Any) -> str:
    found = headers.get("x-github-event") or headers.get("x-gitlab-event")
    if found:
        return found
    return str(payload.get("event_type", "")) if isinstance(payload, dict) else ""


def delivery_of(headers: Mapping[str, str], body: bytes) -> str:
    """The sender's delivery id, else the body's digest (a retried delivery has the same body)."""
    for name in ("x-github-delivery", "x-gitlab-event-uuid", "x-webhook-id", "x-request-id"):
        if headers.get(name):
            return headers[name][:128]
    return hashlib.sha256(body).hexdigest()[:32]


_FIELD = re.compile(r"\{([A-Za-z0-9_.]+)\}")


def render_prompt(template: str, payload: Any, *, route: str, event: str) -> str:
    """``{dot.path}`` fields of the payload put into ``template``; no template: the whole payload."""
    if not template:
        dumped = json.dumps(payload, indent=2, ensure_ascii=False)[:20_000]
        return f"Webhook event {event or '(none)'} on route {route}:\n```json\n{dumped}\n```"

    def field(match: re.Match[str]) -> str:
        value: Any = payload
        for part in match.group(1).split("."):
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                return match.group(0)
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    return _FIELD.sub(field, template)
