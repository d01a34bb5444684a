"""Background review: a child session forked after a turn to save memories and skills.

The session actor starts :func:`run_review` as a reactor wait of its own when a nudge is due
(:mod:`._nudges`): the user's turn has already ended and its next one does not wait for it.
The review is a session under ``/sessions`` (``<id>.review-N``, parent link, source
``review``) seeded with the conversation so far, with its own budget (8 model calls), no
nudges, and only the memory and skill tools; it writes through the same tools as the user's
session. Nobody follows its events but this wait, which reads its tool results and makes
one line of them (:func:`summarize`). Its deadline is its own: past it the review's turn is
cancelled; a failure or a crash of it ends in a ``ReviewFinished(ok=False)``, never in the
user's turn.
"""

from __future__ import annotations

import dataclasses

import trio

from actors import Address, Reactor, Registry
from protocols import ChatMessage, SessionInbox, StartTurn, ToolFinished, ToolStarted, TurnCompleted, TurnFailed

from ._delegation import SessionOverrides
from ._hub import HubRegistry
from ._json_text import read_json
from ._nudges import ReviewPlan
from ._reader import run_turn
from ._review_prompts import review_prompt


@dataclasses.dataclass(frozen=True, slots=True)
class ReviewOutcome:
    ok: bool
    saved: tuple[str, ...]
    summary: str


async def run_review(
    registry: Registry,
    reactor: Reactor,
    hubs: HubRegistry,
    review_id: str,
    parent_id: str,
    plan: ReviewPlan,
    tools: frozenset[str],
    history: tuple[ChatMessage, ...],
    *,
    iterations: int,
    timeout: float,
) -> ReviewOutcome:
    """Run one review turn in child session ``review_id`` to its end (or ``timeout``)."""
    from supervisor import start_child

    from ._address import SESSIONS_PATH

    overrides = SessionOverrides(
        parent_session_id=parent_id, depth=1, blocked_tools=frozenset(), allowed_tools=tools, max_iterations=iterations, source="review"
    )
    address: Address[SessionInbox] = start_child(registry, registry.lookup(SESSIONS_PATH), review_id, review_id, overrides)
    turn_id = f"{review_id}.turn"
    started: dict[str, str] = {}
    saved: list[str] = []

    def on_event(event: object) -> None:
        if isinstance(event, ToolStarted):
            started[event.call_id] = event.arguments
        elif isinstance(event, ToolFinished) and event.ok:
            line = saved_line(event.name, started.get(event.call_id, ""))
            if line is not None:
                saved.append(line)

    start = StartTurn(text=review_prompt(plan.kind), turn_id=turn_id, history=history)
    with trio.move_on_after(timeout):
        end = await run_turn(reactor, hubs.get(review_id), address, start, cancel_reason="the background review was stopped", on_event=on_event)
        if isinstance(end, TurnCompleted):
            return ReviewOutcome(ok=True, saved=tuple(saved), summary=summarize(saved))
        why = end.error if isinstance(end, TurnFailed) else end.reason
        return ReviewOutcome(ok=False, saved=tuple(saved), summary=summarize(saved, failed=f"the review failed: {why}"))
    return ReviewOutcome(ok=False, saved=tuple(saved), summary=summarize(saved, failed=f"the review ran past its {timeout:g} s deadline and was stopped"))


def saved_line(tool: str, arguments: str) -> str | None:
    """A successful write as a short line (``memory add (user)``, ``skill create deploy``); None for a read."""
    try:
        args = read_json(arguments) if arguments else {}
    except ValueError:
        args = {}
    if not isinstance(args, dict):
        args = {}
    action = str(args.get("action", "")).strip()
    if tool == "memory" and action in ("add", "replace", "remove"):
        return f"memory {action} ({args.get('target', 'memory')})"
    if tool == "skill_manage" and action:
        return f"skill {action} {args.get('name', '')}".rstrip()
    return None


def summarize(saved: list[str], *, failed: str | None = None) -> str:
    """The one line the user sees."""
    what = "; ".join(saved) if saved else ""
    if failed is not None:
        return f"{failed}" + (f" (saved before that: {what})" if what else "")
    return f"background review saved: {what}" if what else "background review: nothing to save"
