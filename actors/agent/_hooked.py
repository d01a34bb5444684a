"""Hooks around a session's waits: a tool call and a model call, each with its hooks inside.

The hooks are effects of the waits the machine asked for (they run in the same reactor wait,
under its deadline, each with its own): ``pre_tool_call`` may answer a call in place of the
tool, ``transform_tool_result`` may rewrite its result, ``pre_llm_call`` adds context to the
turn's user message in the request only (the transcript and the store never see it),
``transform_llm_output`` may rewrite a final answer. What the answers mean is decided by
``actors.hooks``'s pure rules.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec

from actors.hooks import Hooks, first_block, first_text, joined_context
from protocols import ChatMessage

from ._model import ModelFailure, ModelReply
from ._tools import ToolContext, ToolOutput

Run = Callable[[dict[str, Any], ToolContext], Awaitable[ToolOutput]]
Call = Callable[[Sequence[ChatMessage]], Awaitable[ModelReply | ModelFailure]]


async def hooked_tool(hooks: Hooks, run: Run, name: str, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
    """Run one tool call with its hooks: pre (may block), the tool, post, transform."""
    sid = context.session_id
    where: dict[str, Any] = {"session_id": sid, "cwd": str(context.workspace.cwd), "tool_name": name, "tool_input": arguments, "publish": context.publish}
    base = {"tool_name": name, "args": dict(arguments), "task_id": sid, "session_id": sid, "tool_call_id": context.call_id}
    if hooks.wants("pre_tool_call", name):
        blocked = first_block(await hooks.call("pre_tool_call", base, stop_at_block=True, **where))
        if blocked is not None:
            return ToolOutput(content=f"[error] {blocked.value}", ok=False)
    started = time.monotonic()
    output = await run(arguments, context)
    duration_ms = int((time.monotonic() - started) * 1000)
    if hooks.wants("post_tool_call", name):
        await hooks.call("post_tool_call", {**base, "result": output.content, "duration_ms": duration_ms}, **where)
    if hooks.wants("transform_tool_result", name):
        kwargs = {"tool_name": name, "arguments": dict(arguments), "result": output.content, "task_id": sid, "session_id": sid}
        text = first_text(await hooks.call("transform_tool_result", kwargs, **where))
        if text is not None:
            output = dataclasses.replace(output, content=text)
    return output


@dataclasses.dataclass
class TurnHooks:
    """A session's memory of the current turn's ``pre_llm_call`` context (touched in the reactor only)."""

    turn_id: str = ""
    context: str = ""


def _user_index(messages: Sequence[ChatMessage]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            return index
    return -1


def with_context(messages: Sequence[ChatMessage], index: int, context: str) -> list[ChatMessage]:
    """``messages`` with ``context`` after the text of the user message at ``index`` (a copy)."""
    out = list(messages)
    message = out[index]
    out[index] = msgspec.structs.replace(message, content=f"{message.content}\n\n{context}" if message.content else context)
    return out


async def hooked_model(
    hooks: Hooks, call: Call, messages: Sequence[ChatMessage], memo: TurnHooks, *, session_id: str, turn_id: str, model: str, platform: str, publish: Any
) -> ModelReply | ModelFailure:
    """One model call of a turn with its hooks (the turn's first call runs the turn's)."""
    where: dict[str, Any] = {"session_id": session_id, "publish": publish}
    index = _user_index(messages)
    user_message = messages[index].content or "" if index >= 0 else ""
    if memo.turn_id != turn_id:
        memo.turn_id, memo.context = turn_id, ""
        first = index >= 0 and not any(m.role == "assistant" for m in messages[:index])
        if first:
            if hooks.wants("on_session_start"):
                await hooks.call("on_session_start", {"session_id": session_id, "model": model, "platform": platform}, **where)
            hooks.fire_soon("session:start", {"platform": platform, "user_id": "", "session_id": session_id, "session_key": session_id}, publish=publish)
        if hooks.wants("pre_llm_call"):
            history = [m.to_openai() for m in messages]
            kwargs = {
                "session_id": session_id,
                "user_message": user_message,
                "conversation_history": history,
                "is_first_turn": first,
                "model": model,
                "platform": platform,
            }
            memo.context = joined_context(await hooks.call("pre_llm_call", kwargs, **where))
    elif messages and messages[-1].role == "tool":
        steps = [m for m in messages[index + 1 :] if m.role == "assistant"]
        names = [c.name for c in steps[-1].tool_calls] if steps and steps[-1].tool_calls else []
        hooks.fire_soon(
            "agent:step", {"platform": platform, "user_id": "", "session_id": session_id, "iteration": len(steps), "tool_names": names}, publish=publish
        )
    if memo.context and index >= 0:
        messages = with_context(messages, index, memo.context)
    reply = await call(messages)
    if isinstance(reply, ModelReply) and not reply.tool_calls and reply.content and hooks.wants("transform_llm_output"):
        kwargs = {"response_text": reply.content, "session_id": session_id, "model": model, "platform": platform}
        text = first_text(await hooks.call("transform_llm_output", kwargs, **where))
        if text:
            reply = dataclasses.replace(reply, content=text)
    return reply
