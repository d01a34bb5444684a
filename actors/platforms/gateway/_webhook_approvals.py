"""Approvals over webhooks: the event sent to a route's ``deliver_url`` and the decision POSTed back.

When a delivery's turn asks for an approval, the route's ``deliver_url`` gets a signed event
(:func:`approval_event`); the platform answers with a signed
``POST /webhooks/<route>/approvals/<request_id>`` whose body is
``{"decision": "approve" | "deny" | "session" | "always", "request_id": "<request_id>"}``
(:func:`choice_of`). The body repeats the request id because the signature covers the body
only: a captured signed "approve" cannot answer another request.

:class:`Pending` is the receiver's book of the approvals it may answer; it lives in the
reactor (the receiver's handlers, the delivering wait and the adapter's ``call_soon`` all run
there), so a decision is 202 or 404 at once, and a request is answered at most once.
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from typing import Any

from protocols import ApprovalChoice, ApprovalRequested

DECISIONS: dict[str, ApprovalChoice] = {"approve": "once", "once": "once", "session": "session", "always": "always", "deny": "deny"}
"""A decision's word -> the approval core's choice (``session``: this session; ``always``: saved)."""
APPROVALS = "/approvals/"


def decision_path(route: str, request_id: str) -> str:
    return f"/webhooks/{route}{APPROVALS}{urllib.parse.quote(request_id, safe=':')}"


def approval_event(route: str, delivery_id: str, session_id: str, request: ApprovalRequested) -> dict[str, Any]:
    """The JSON POSTed to the route's ``deliver_url`` when a delivery's turn waits for an approval."""
    return {
        "type": "approval",
        "route": route,
        "delivery_id": delivery_id,
        "session_id": session_id,
        "request_id": request.request_id,
        "command": request.command,
        "reasons": list(request.reasons),
        "timeout_s": request.timeout_s,
        "decision_path": decision_path(route, request.request_id),
        "decisions": ["approve", "deny", "session", "always"],
    }


def choice_of(payload: Any, request_id: str) -> tuple[ApprovalChoice | None, str]:
    """The decision's choice, or ``(None, why it is refused)``."""
    if not isinstance(payload, dict):
        return None, 'the body must be a JSON object: {"decision": "approve" | "deny" | "session" | "always", "request_id": "..."}'
    decision = payload.get("decision")
    if not isinstance(decision, str) or decision not in DECISIONS:
        return None, f"'decision' must be one of approve, deny, session, always (got {decision!r})"
    if payload.get("request_id") != request_id:
        return None, "'request_id' must repeat the request id of the URL (the signature covers the body, so it binds the decision to this request)"
    return DECISIONS[decision], ""


@dataclasses.dataclass
class Pending:
    """Request id -> (route, session id, when it is denied by itself) of the approvals the
    receiver may answer (reactor-owned; times are the caller's monotonic clock)."""

    waiting: dict[str, tuple[str, str, float]] = dataclasses.field(default_factory=dict)

    def expect(self, request_id: str, route: str, session_id: str, until: float) -> None:
        self.waiting[request_id] = (route, session_id, until)

    def take(self, request_id: str, route: str, now: float) -> bool:
        """Whether ``request_id`` of ``route`` was waiting at ``now`` (it is not any more)."""
        found = self.waiting.get(request_id)
        if found is None or found[0] != route:
            return False
        del self.waiting[request_id]
        return now < found[2]

    def forget(self, session_id: str) -> None:
        """The session's turn ended: its approvals are stale."""
        for request_id in [r for r, (_, s, _) in self.waiting.items() if s == session_id]:
            del self.waiting[request_id]
