"""Tool calls as steps of the turn machine: answer the malformed ones at once, plan the rest
into groups, run a group at a time, record each result. Pure, like the machine: effects only.

A result joins the transcript in the model's order of the calls (tools finish in any order;
the store keeps theirs, the model is sent this one). Calls to a client's tools are not run:
the turn pauses for their results once the other groups are done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from protocols import ChatMessage, Token, ToolCall
from protocols._session import ToolFinished, ToolStarted

from ._json_text import read_json
from ._plan import PlannedCall, plan_batches
from ._turn_io import Persist, RunTool, ToolDone
from ._turn_state import RunningTools, Turn

if TYPE_CHECKING:
    from ._machine import _Step

PREVIEW_CHARS = 300
"""How much of a tool's result ``ToolFinished`` shows."""


def start(run: _Step, turn: Turn, now: float) -> None:
    traits = run.config.traits
    client = client_tools(turn)
    planned: list[PlannedCall] = []
    parsed: dict[str, dict[str, Any]] = {}
    answered: list[str] = []
    for call in turn.calls:
        problem: str | None = None
        arguments: Any = None
        if call.name in client:
            continue  # the client runs it: the turn pauses for its result (next_group)
        if call.name not in traits:
            available = ", ".join(sorted(traits)) or "none"
            problem = f"[error] unknown tool {call.name!r}; available tools: {available}"
        else:
            try:
                arguments = read_json(call.arguments or "{}")
            except ValueError as exc:
                problem = f"[error] the arguments are not valid JSON ({exc}); call the tool again with a JSON object"
            else:
                if not isinstance(arguments, dict):
                    problem = "[error] the arguments must be a JSON object; call the tool again with one"
        if problem is not None:
            # Answered at once and alone: it never runs.
            run.emit(ToolStarted(turn_id=turn.turn_id, call_id=call.id, name=call.name, arguments=call.arguments))
            record_result(run, turn, call, problem, ok=False)
            answered.append(call.id)
        else:
            planned.append(PlannedCall(call_id=call.id, name=call.name, arguments=arguments))
            parsed[call.id] = arguments
    phase = RunningTools(
        groups=plan_batches(planned, traits, max_parallel=run.config.max_parallel),
        arguments=parsed,
    )
    next_group(run, msgspec.structs.replace(turn, answered=tuple(answered)), phase, now)


def next_group(run: _Step, turn: Turn, phase: RunningTools, now: float) -> None:
    if not phase.groups:
        waiting = tuple(c for c in turn.calls if c.id not in turn.answered and c.name in client_tools(turn))
        if waiting:
            run.pause_for_client(turn, waiting)
            return
        run.call_model(turn, now)
        return
    group, rest = phase.groups[0], phase.groups[1:]
    run.set_turn(msgspec.structs.replace(turn, phase=msgspec.structs.replace(phase, groups=rest, running=group)))
    by_id = {c.id: c for c in turn.calls}
    timeout = max(0.001, min(run.config.tool_timeout, turn.deadline - now))
    for call_id in group:
        call = by_id[call_id]
        run.emit(ToolStarted(turn_id=turn.turn_id, call_id=call_id, name=call.name, arguments=call.arguments))
        run.effects.append(RunTool(call_id=call_id, name=call.name, arguments=phase.arguments[call_id], timeout=timeout))


def on_done(run: _Step, turn: Turn, phase: RunningTools, done: ToolDone) -> None:
    call = next(c for c in turn.calls if c.id == done.call_id)
    record_result(run, turn, call, done.content, ok=done.ok)
    phase = msgspec.structs.replace(phase, running=tuple(i for i in phase.running if i != done.call_id))
    turn = msgspec.structs.replace(turn, answered=(*turn.answered, done.call_id), phase=phase)
    if phase.running:
        run.set_turn(turn)
    else:
        next_group(run, turn, phase, done.now)


def record_result(run: _Step, turn: Turn, call: ToolCall, content: str, *, ok: bool) -> None:
    result = ChatMessage(role="tool", tool_call_id=call.id, name=call.name, content=content)
    add_result(run, turn, result)
    run.effects.append(Persist(token=Token(step="tool", turn_id=turn.turn_id, call_id=call.id), messages=(result,)))
    run.emit(ToolFinished(turn_id=turn.turn_id, call_id=call.id, name=call.name, ok=ok, preview=content[:PREVIEW_CHARS]))


def add_result(run: _Step, turn: Turn, result: ChatMessage) -> None:
    """Append ``result`` among the results after its assistant message in the model's order
    (tools finish in any order; the store keeps that order, the model is sent this one)."""
    transcript = run.state.transcript
    rank = {c.id: i for i, c in enumerate(turn.calls)}
    mine = rank[result.tool_call_id or ""]
    at = len(transcript)
    while at and transcript[at - 1].role == "tool" and rank.get(transcript[at - 1].tool_call_id or "", -1) > mine:
        at -= 1
    run.state = msgspec.structs.replace(run.state, transcript=(*transcript[:at], result, *transcript[at:]))


def client_tools(turn: Turn) -> frozenset[str]:
    """The tools the turn's client runs itself."""
    return turn.options.client_tool_names if turn.options is not None else frozenset()
