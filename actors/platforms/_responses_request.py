"""Reading a Responses API request: input items, and the client's tools and parameters.

Input items become the chat shapes a session keeps: messages, ``function_call`` items (a
client's earlier calls, as an assistant message with tool calls) and ``function_call_output``
items. Trailing outputs with no user message after them resume a turn that paused on the
client's function tools. Tools and parameters become :class:`TurnOptions`, as for chat.
"""

from __future__ import annotations

from typing import Any

from protocols import ChatMessage, ToolCall, TurnOptions

from ._asgi import HttpError
from ._chat_request import Conversation, content_text, parse_options, split_conversation

SERVER_HISTORY = frozenset({"mcp_call", "mcp_list_tools", "reasoning"})
"""Input item kinds that are earlier server output, accepted and skipped."""


def parse_input(value: Any) -> Conversation:
    """The conversation an ``input`` (a string or a list of input items) holds."""
    if isinstance(value, str) and value:
        return Conversation(system=None, history=(), text=value)
    if not isinstance(value, list) or not value:
        raise HttpError(400, "'input' is required: a string or a non-empty list of input items", param="input", code="missing_field")
    messages: list[ChatMessage] = []
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise HttpError(400, f"input[{index}] must be an object", param=f"input[{index}]", code="invalid_item")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise HttpError(400, f"input[{index}].role must be user, assistant or system", param=f"input[{index}].role", code="invalid_role")
            messages.append(ChatMessage(role="system" if role in ("system", "developer") else role, content=content_text(item.get("content"), "input")))
        elif kind == "function_call":
            call = ToolCall(id=str(item.get("call_id") or ""), name=str(item.get("name") or ""), arguments=str(item.get("arguments") or ""))
            if messages and messages[-1].role == "assistant" and messages[-1].tool_calls:
                last = messages.pop()
                messages.append(ChatMessage(role="assistant", content=last.content, tool_calls=(*last.tool_calls, call)))
            else:
                messages.append(ChatMessage(role="assistant", content=None, tool_calls=(call,)))
        elif kind == "function_call_output":
            output = item.get("output", "")
            text = output if isinstance(output, str) else content_text(output, "input")
            messages.append(ChatMessage(role="tool", tool_call_id=str(item.get("call_id", "")), content=text))
        elif isinstance(kind, str) and kind in SERVER_HISTORY:
            continue  # an earlier response's output given back: what the server did, not new input
        else:
            raise HttpError(400, f"input[{index}] has type {kind!r}, which this server does not take", param=f"input[{index}].type", code="invalid_item")
    if messages and messages[0].role == "tool":  # outputs for a previous response's calls: the paused turn goes on
        end = next((i for i, m in enumerate(messages) if m.role != "tool"), len(messages))
        if end == len(messages):
            return Conversation(system=None, history=(), text="", tool_results=tuple(messages))
    return split_conversation(messages)


def parse_response_options(body: dict[str, Any]) -> TurnOptions | None:
    """``tools``, ``tool_choice``, ``text.format``, ``max_output_tokens`` and sampling, as chat options."""
    chat: dict[str, Any] = {k: body[k] for k in ("temperature", "top_p", "seed", "user", "parallel_tool_calls") if body.get(k) is not None}
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise HttpError(400, "'tools' must be a list of {type: function, name, parameters}", param="tools", code="invalid_type")
        converted = []
        for index, tool in enumerate(tools):
            if not isinstance(tool, dict) or tool.get("type") != "function":
                kind = tool.get("type") if isinstance(tool, dict) else None
                raise HttpError(
                    400,
                    f"tools[{index}] has type {kind!r}: only function tools are taken (the server runs its own tools)",
                    param=f"tools[{index}]",
                    code="invalid_tool",
                )
            function = {k: tool[k] for k in ("name", "description", "parameters", "strict") if k in tool}
            converted.append({"type": "function", "function": function})
        chat["tools"] = converted
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function":
        chat["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif choice is not None:
        chat["tool_choice"] = choice
    text = body.get("text")
    form = text.get("format") if isinstance(text, dict) else None
    if isinstance(form, dict) and form.get("type") == "json_schema":
        chat["response_format"] = {"type": "json_schema", "json_schema": {k: form[k] for k in ("name", "schema", "strict") if k in form}}
    elif isinstance(form, dict):
        chat["response_format"] = form
    return parse_options(chat)
