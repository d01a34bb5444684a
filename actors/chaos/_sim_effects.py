"""What a simulated session's effects do in the world: store writes, model calls, tool calls.

``SimSession`` is the session port in the simulated world; these are its effects, each under
the checks the invariant checker keeps on it (a model call never before its user message is
durable, a tool runs once and after its call is stored, a summary request never splits a call
from its result) and the faults and planted bugs that act there (``_sim_compress_crashes``,
``_sim_bugs``). A wait or timer started here is a :class:`SimHandle`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from protocols import ChatMessage, KeyLeased, Token
from protocols._store import AppendMessages, CreateSession, MessagesPersisted

from ..agent._machine import CallModel, RunTool
from ..agent._session_port import Write
from ._sim_bugs import split_pair
from ._sim_compress_crashes import crash_soon
from ._sim_trace import show

if TYPE_CHECKING:
    from ._sim_session import SimSession


class SimHandle:
    """A simulated wait or timer: its wait id (0 for a timer) and its entry in the world's heap."""

    __slots__ = ("entry", "wait_id")

    def __init__(self, wait_id: int, entry: int) -> None:
        self.wait_id, self.entry = wait_id, entry


def submit_write(session: SimSession, command: Write) -> None:
    world, incarnation = session.world, session.current
    assert incarnation is not None
    if world.record:
        world.note(f"{session.session_id} does {show(command)}")
    if type(command) is CreateSession:
        world.store.submit(session.session_id, None, command.token, incarnation, command.system_prompt or "")
    elif type(command) is AppendMessages:
        if session.bug == "drop_settle" and isinstance(command.token, Token) and command.token.step == "settle":
            world.note(f"{session.session_id}: planted bug: settle write {command.token} dropped")
            world.store.reply(incarnation, MessagesPersisted(session_id=session.session_id, token=command.token))
            return
        world.store.submit(session.session_id, command.messages, command.token, incarnation, mark=command.turn, segment=command.segment)
        if command.segment is not None and world.plan.crashes.compressing:
            crash_soon(session, world.store.free_at)  # before it commits
        if session.bug == "rerun_tools" and command.token == Token(step="recover"):
            for message in command.messages:
                world.checker.tool_ran(session.session_id, message.tool_call_id or "", world.now)
                world.start_tool(incarnation, message.tool_call_id or "", session.config.machine.tool_timeout)
    else:
        raise NotImplementedError(f"the simulator does not model {type(command).__name__}")


def start_model_call(session: SimSession, effect: CallModel, key: KeyLeased) -> SimHandle:
    world, checker = session.world, session.world.checker
    if world.record:
        world.note(f"{session.session_id} does {show(effect)} on {key.key_id}")
    summary = effect.token.step == "compress"
    if summary:
        if session.bug == "split_summary_pair":
            effect = split_pair(effect)
        checker.compression.summary_requested(session.session_id, effect.token, effect.messages, world.now)
        if world.plan.crashes.compressing:
            crash_soon(session, world.now + world.plan.workload.model_s)  # while the summary is asked for
    incarnation, memory = session.current, world.memory
    assert incarnation is not None
    after, prefetch = 0.0, None
    sent: Sequence[ChatMessage] = effect.messages
    if memory is not None and not summary:  # the turn's recalled memory, fetched by its first call (``_sim_memory``)
        after, sent, prefetch = memory.prefetch(session, incarnation, effect)
    checker.model_called(session.session_id, sent, world.now)
    durable = world.store.user_texts.get(session.session_id, ())
    checker.user_message_durable(session.session_id, effect.turn_id, durable, world.now, rule="model_before_ack")
    prompt = sent if world.plan.workload.context_length else ()
    wait_id, entry = world.start_model(incarnation, effect.use_tools, effect.timeout, key, prompt, summary=summary, after=after)
    if prefetch is not None and memory is not None:
        memory.started(session, incarnation, prefetch, wait_id, effect.timeout)
    return SimHandle(wait_id, entry)


def start_tool_call(session: SimSession, effect: RunTool) -> SimHandle:
    world = session.world
    if world.record:
        world.note(f"{session.session_id} does {show(effect)}")
    durable = effect.call_id in world.store.call_ids.get(session.session_id, ())
    world.checker.tool_ran(session.session_id, effect.call_id, world.now, write_ahead=durable)
    assert session.current is not None
    return SimHandle(*world.start_tool(session.current, effect.call_id, effect.timeout))
