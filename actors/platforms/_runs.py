"""Runs: ``POST /v1/runs`` starts a turn and answers 202; status, resumable SSE events, stop, approval.

A run is a turn with its own id: the run id is the turn id. Its status follows the session's
events (a tracker subscribed to the session's hub); its event stream is the hub's, filtered to
the run's turn, so SSE ids are the session's sequence numbers and ``Last-Event-ID`` resumes
exactly. A run this process does not hold (started before a restart, or pushed out of the
last ``MAX_RUNS``) is answered from the store's ``turns`` row, if it has one.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from protocols import (
    ApprovalRequested,
    ApprovalResolved,
    CancelTurn,
    ContextCompressed,
    ReasoningDelta,
    ResolveApproval,
    StartTurn,
    TextDelta,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnRecord,
    TurnRejected,
    TurnStarted,
    UserMessageSaved,
)

from ._app import ApiContext, check_session_id, new_id
from ._asgi import HttpError, Request, Send, send_json, sse, start_sse, whole_number
from ._bridge import TrioSubscriber
from ._sessions_api import read_store
from ._turns import follow_turn, watch_disconnect

MAX_RUNS = 1_000
CHOICES = ("once", "session", "always", "deny")


@dataclasses.dataclass
class Run:
    run_id: str
    session_id: str
    created_at: float
    status: str = "queued"
    output: str | None = None
    error: str | None = None
    approvals: list[str] = dataclasses.field(default_factory=list)
    compressions: list[dict[str, int]] = dataclasses.field(default_factory=list)
    """The run's context compressions (tokens before and after, messages summarised)."""

    def view(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "object": "hermes.run",
            "session_id": self.session_id,
            "status": self.status,
            "created_at": int(self.created_at),
            "output": self.output,
            "error": self.error,
            "pending_approvals": list(self.approvals),
            "compressions": list(self.compressions),
        }


class _Tracker:
    """Keeps a run's status current from its events (updates happen in the reactor thread)."""

    def __init__(self, ctx: ApiContext, run: Run) -> None:
        self.ctx = ctx
        self.run = run

    def tell(self, event: Any) -> None:
        if getattr(event, "turn_id", None) == self.run.run_id:
            self.ctx.reactor.call_soon(self._update, event)

    def _update(self, event: Any) -> None:
        run = self.run
        if run.status in ("completed", "failed", "cancelled"):
            return
        match event:
            case TurnStarted() | UserMessageSaved():
                run.status = "running"
            case ApprovalRequested(request_id=request_id):
                run.approvals.append(request_id)
                run.status = "waiting_for_approval"
            case ApprovalResolved(request_id=request_id):
                if request_id in run.approvals:
                    run.approvals.remove(request_id)
                run.status = "waiting_for_approval" if run.approvals else "running"
            case ContextCompressed():
                run.compressions.append(_compression(event))
            case TurnCompleted(text=text):
                self._end("completed", output=text)
            case TurnFailed(error=error):
                self._end("failed", error=error)
            case TurnRejected(reason=reason):
                self._end("failed", error=reason)
            case TurnCancelled(reason=reason):
                self._end("cancelled", error=reason)

    def _end(self, status: str, *, output: str | None = None, error: str | None = None) -> None:
        self.run.status, self.run.output, self.run.error = status, output, error
        self.ctx.hubs.get(self.run.session_id).unsubscribe(self)
        self.ctx.release()


def _compression(event: ContextCompressed) -> dict[str, int]:
    return {"tokens_before": event.tokens_before, "tokens_after": event.tokens_after, "summarised": event.summarised}


def _input_text(body: dict[str, Any]) -> str:
    value = body.get("input")
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, list) and value and isinstance(value[-1], dict) and isinstance(value[-1].get("content"), str):
        return str(value[-1]["content"])
    raise HttpError(400, "'input' is required: the user message as a string", param="input", code="missing_field")


def _run(ctx: ApiContext, run_id: str) -> Run:
    run = ctx.runs.get(run_id)
    if run is None:
        raise HttpError(404, f"no run {run_id!r} (runs are kept for the last {MAX_RUNS})", code="run_not_found")
    assert isinstance(run, Run)
    return run


async def create_run(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    body = await request.json()
    text = _input_text(body)
    given = body.get("session_id") if "session_id" in body else request.headers.get("x-hermes-session-id")
    run_id = new_id("run_")
    session_id = check_session_id(given, "session_id") if given is not None else f"run-{run_id}"
    instructions = body.get("instructions")
    ctx.admit()
    run = Run(run_id=run_id, session_id=session_id, created_at=time.time())
    _remember(ctx, run)
    ctx.hubs.get(session_id).subscribe(_Tracker(ctx, run), after_seq=ctx.hubs.get(session_id).last_seq)
    ctx.tell(session_id, StartTurn(text=text, turn_id=run_id, instructions=instructions if isinstance(instructions, str) else None, policy="queue"))
    await send_json(send, 202, {"run_id": run_id, "status": run.status, "session_id": session_id})


def _remember(ctx: ApiContext, run: Run) -> None:
    ctx.runs[run.run_id] = run
    if len(ctx.runs) > MAX_RUNS:
        for old in [r for r in ctx.runs.values() if isinstance(r, Run) and r.status in ("completed", "failed", "cancelled")][: len(ctx.runs) - MAX_RUNS]:
            del ctx.runs[old.run_id]


async def get_run(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    run_id = params["run_id"]
    run = ctx.runs.get(run_id)
    if run is None and ctx.store_file is not None:
        turn = await read_store(ctx, lambda reader: reader.find_turn(run_id))
        if isinstance(turn, TurnRecord):
            run = stored_run(turn)
    if run is None:
        run = _run(ctx, run_id)  # the 404
    await send_json(send, 200, run.view())


INTERRUPTED_ERROR = "interrupted: the server stopped while this run was in progress"


def stored_run(turn: TurnRecord) -> Run:
    """A run as the store's ``turns`` row tells it (its output is in the session's transcript)."""
    if turn.status in ("failed", "cancelled"):
        error: str | None = INTERRUPTED_ERROR if turn.reason == "interrupted" else (turn.reason or turn.status)
    else:
        error = None
    created = turn.started_at if turn.started_at is not None else (turn.ended_at or 0.0)
    return Run(run_id=turn.turn_id, session_id=turn.session_id, created_at=created, status=turn.status, error=error)


def _named(event: Any) -> tuple[str, dict[str, Any]] | None:
    match event:
        case TextDelta(text=text):
            return "message.delta", {"delta": text}
        case ReasoningDelta(text=text):
            return "reasoning.available", {"text": text}
        case ToolStarted(call_id=call_id, name=name, arguments=arguments):
            return "tool.started", {"call_id": call_id, "tool": name, "arguments": arguments}
        case ToolProgress(call_id=call_id, name=name, progress=progress, total=total, message=message):
            return "tool.progress", {"call_id": call_id, "tool": name, "progress": progress, "total": total, "message": message}
        case ToolFinished(call_id=call_id, name=name, ok=ok, preview=preview):
            return "tool.completed", {"call_id": call_id, "tool": name, "ok": ok, "preview": preview}
        case ApprovalRequested(request_id=request_id, command=command, reasons=reasons, timeout_s=timeout_s):
            return "approval.request", {"request_id": request_id, "command": command, "reasons": list(reasons), "timeout_s": timeout_s}
        case ApprovalResolved(request_id=request_id, choice=choice):
            return "approval.responded", {"request_id": request_id, "choice": choice}
        case ContextCompressed():
            return "context.compressed", _compression(event)
        case TurnCompleted(text=text):
            return "run.completed", {"output": text}
        case TurnFailed(error=error) | TurnRejected(reason=error):
            return "run.failed", {"error": error}
        case TurnCancelled(reason=reason):
            return "run.cancelled", {"reason": reason}
    return None


async def run_events(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    run = _run(ctx, params["run_id"])
    last = whole_number(request.headers.get("last-event-id", "0"))
    if last is None:
        raise HttpError(400, "Last-Event-ID must be the number of the last event seen", param="Last-Event-ID", code="invalid_last_event_id")
    hub = ctx.hubs.get(run.session_id)
    subscriber = TrioSubscriber(ctx.reactor, turn_id=run.run_id)
    hub.subscribe(subscriber, after_seq=last)
    try:
        await start_sse(send)
        follower = follow_turn(subscriber, keepalive=ctx.keepalive)
        async with watch_disconnect(request):
            while not follower.done:
                event = await follower.next()
                if event is None:
                    await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
                    continue
                named = _named(event)
                if named is not None:
                    await send({"type": "http.response.body", "body": sse(named[1], event=named[0], id=event.seq), "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        hub.unsubscribe(subscriber)


async def stop_run(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    run = _run(ctx, params["run_id"])
    if run.status not in ("completed", "failed", "cancelled"):
        ctx.tell(run.session_id, CancelTurn(turn_id=run.run_id, reason="stopped through the API"))
    await send_json(send, 200, {"run_id": run.run_id, "status": run.status, "stopping": run.status not in ("completed", "failed", "cancelled")})


async def answer_approval(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    run = _run(ctx, params["run_id"])
    body = await request.json()
    choice = body.get("choice")
    if choice not in CHOICES:
        raise HttpError(400, f"'choice' must be one of {', '.join(CHOICES)}", param="choice", code="invalid_choice")
    request_id = body.get("request_id") or (run.approvals[0] if run.approvals else None)
    if request_id is None or request_id not in run.approvals:
        raise HttpError(409, "this run is not waiting for that approval (it may have timed out or been answered)", code="no_pending_approval")
    ctx.tell(run.session_id, ResolveApproval(request_id=request_id, choice=choice))
    await send_json(send, 200, {"run_id": run.run_id, "request_id": request_id, "choice": choice})
