"""Reading a chat completion request: messages, the turn's opening, and the client's options.

Nothing a client sends is dropped silently: a field we pass on reaches the model, a field we
cannot honour (``n > 1``) is a 400 that says why.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from protocols import ChatMessage, ClientTool, Role, ToolCall, TurnOptions

from ..agent._answer_format import SUBJECT
from ..agent._json_schema import schema_problem
from ._asgi import HttpError

_ROLES: dict[str, Role] = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NUMBERS: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "presence_penalty": (-2.0, 2.0),
    "frequency_penalty": (-2.0, 2.0),
}
_COUNTS = ("max_tokens", "max_completion_tokens")
_PASSED = ("seed", "logit_bias", "user", "parallel_tool_calls", "reasoning_effort", "logprobs", "top_logprobs")


def content_text(content: Any, param: str = "messages") -> str:
    """The text of a message content: a string, or the text parts of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text")]
        if not all(isinstance(text, str) for text in texts):
            raise HttpError(400, "a text content part's 'text' must be a string", param=param, code="invalid_content")
        return "".join(texts)
    raise HttpError(400, "message content must be a string or a list of content parts", param=param, code="invalid_content")


def _images(content: Any, index: int, role: str) -> tuple[str, ...]:
    """The image URLs among a message's content parts (``image_url`` / ``input_image``)."""
    if not isinstance(content, list):
        return ()
    urls = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") not in ("image_url", "input_image"):
            continue
        raw = part.get("image_url")
        url = raw.get("url") if isinstance(raw, dict) else raw
        if role != "user":
            raise HttpError(400, f"messages[{index}]: only user messages may carry images", param=f"messages[{index}].content", code="invalid_content")
        if not isinstance(url, str) or not url.startswith(("data:image/", "https://")):
            raise HttpError(
                400, f"messages[{index}]: an image must be a data:image/... URL or an https:// URL", param=f"messages[{index}].content", code="invalid_image"
            )
        urls.append(url)
    return tuple(urls)


def _calls(raw: Any, index: int) -> tuple[ToolCall, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise HttpError(400, f"messages[{index}].tool_calls must be a list", param=f"messages[{index}].tool_calls", code="invalid_type")
    out = []
    for call in raw:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise HttpError(
                400,
                f"messages[{index}].tool_calls needs {{id, function: {{name, arguments}}}} items",
                param=f"messages[{index}].tool_calls",
                code="invalid_type",
            )
        out.append(ToolCall(id=str(call.get("id") or ""), name=str(function.get("name") or ""), arguments=str(function.get("arguments") or "")))
    return tuple(out)


def parse_messages(raw: Any) -> list[ChatMessage]:
    if not isinstance(raw, list) or not raw:
        raise HttpError(400, "'messages' is required: a non-empty list of {role, content}", param="messages", code="missing_field")
    out = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("role"), str) or item["role"] not in _ROLES:
            raise HttpError(400, f"messages[{index}] needs a role of system, user, assistant or tool", param=f"messages[{index}].role", code="invalid_role")
        role = _ROLES[item["role"]]
        tool_call_id = item.get("tool_call_id")
        if role == "tool" and not isinstance(tool_call_id, str):
            raise HttpError(400, f"messages[{index}] is a tool result without a tool_call_id", param=f"messages[{index}].tool_call_id", code="missing_field")
        name = item.get("name")
        out.append(
            ChatMessage(
                role=role,
                content=None if item.get("content") is None else content_text(item.get("content")),
                tool_calls=_calls(item.get("tool_calls"), index) if role == "assistant" else (),
                tool_call_id=tool_call_id if role == "tool" else None,
                name=name if isinstance(name, str) and role == "tool" else None,
                images=_images(item.get("content"), index, role),
            )
        )
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class Conversation:
    """A request's messages, split the way a turn needs them."""

    system: str | None
    """The client's system prompt (an ephemeral instruction, never stored)."""
    history: tuple[ChatMessage, ...]
    """Everything before the opening, without system messages."""
    text: str
    """The new user message ("" when the opening is tool results)."""
    tool_results: tuple[ChatMessage, ...] = ()
    """The client's results for client tool calls, when they end the request."""
    images: tuple[str, ...] = ()
    """Images sent with the new user message."""

    @property
    def opening(self) -> tuple[ChatMessage, ...]:
        return self.tool_results or (ChatMessage(role="user", content=self.text, images=self.images),)

    @property
    def has_images(self) -> bool:
        return bool(self.images) or any(m.images for m in self.history)


def split_conversation(messages: Sequence[ChatMessage]) -> Conversation:
    """The last user message, or the tool results after the last assistant message, opens the turn."""
    system = "\n\n".join(m.content or "" for m in messages if m.role == "system") or None
    talk = [m for m in messages if m.role != "system"]
    if talk and talk[-1].role == "tool":
        start = len(talk)
        while start > 0 and talk[start - 1].role == "tool":
            start -= 1
        if start == 0 or not talk[start - 1].tool_calls:
            raise HttpError(400, "tool results must follow the assistant message that called the tools", param="messages", code="orphan_tool_result")
        return Conversation(system=system, history=tuple(talk[:start]), text="", tool_results=tuple(talk[start:]))
    users = [i for i, m in enumerate(talk) if m.role == "user"]
    if not users:
        raise HttpError(400, "'messages' has no user message to answer", param="messages", code="missing_user_message")
    if users[-1] != len(talk) - 1:
        raise HttpError(
            400, "the last message must be the user's (or tool results): there is nothing new to answer", param="messages", code="nothing_to_answer"
        )
    return Conversation(system=system, history=tuple(talk[:-1]), text=talk[-1].content or "", images=talk[-1].images)


def _client_tools(raw: Any) -> tuple[ClientTool, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise HttpError(400, "'tools' must be a list of {type: function, function: {name, parameters}}", param="tools", code="invalid_type")
    tools = []
    for index, item in enumerate(raw):
        function = item.get("function") if isinstance(item, dict) and item.get("type", "function") == "function" else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise HttpError(
                400, f"tools[{index}] needs type 'function' and a name of 1-64 letters, digits, _ or -", param=f"tools[{index}]", code="invalid_tool"
            )
        tools.append(ClientTool(name=name, schema={"type": "function", "function": function}))
    return tuple(tools)


def _tool_choice(raw: Any, tools: tuple[ClientTool, ...]) -> str | dict[str, Any] | None:
    if raw is None or raw in ("auto", "none", "required"):
        return raw  # type: ignore[no-any-return]
    name = raw.get("function", {}).get("name") if isinstance(raw, dict) and isinstance(raw.get("function"), dict) else None
    if not isinstance(name, str):
        raise HttpError(400, "tool_choice must be auto, none, required or {type: function, function: {name}}", param="tool_choice", code="invalid_type")
    if name not in {t.name for t in tools}:
        raise HttpError(400, f"tool_choice names {name!r}, which is not in 'tools'", param="tool_choice", code="unknown_tool")
    return {"type": "function", "function": {"name": name}}


def _response_format(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema" and isinstance(raw.get("json_schema"), dict) and isinstance(raw["json_schema"].get("schema", {}), dict):
        problem = schema_problem(raw["json_schema"].get("schema", {}), SUBJECT)
        if problem is not None:  # refused here, not after the model answered
            raise HttpError(400, f"{problem}.", param="response_format", code="invalid_schema")
        return {"type": "json_schema", "json_schema": raw["json_schema"]}
    raise HttpError(
        400, "response_format must be {type: text | json_object | json_schema, json_schema: {name, schema}}", param="response_format", code="invalid_type"
    )


def _sampling(body: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (low, high) in _NUMBERS.items():
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            raise HttpError(400, f"{name} must be a number from {low:g} to {high:g}", param=name, code="invalid_value")
        out[name] = value
    for name in _COUNTS:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise HttpError(400, f"{name} must be a whole number of tokens above 0", param=name, code="invalid_value")
        out[name] = value
    stop = body.get("stop")
    if stop is not None:
        if isinstance(stop, str):
            stop = [stop]
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop) or len(stop) > 4:
            raise HttpError(400, "stop must be a string or a list of up to 4 strings", param="stop", code="invalid_value")
        out["stop"] = stop
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise HttpError(400, "seed must be an integer", param="seed", code="invalid_value")
    out.update({name: body[name] for name in _PASSED if body.get(name) is not None})
    return out


def parse_options(body: dict[str, Any]) -> TurnOptions | None:
    """The request fields that shape the model calls; None when the client sent none."""
    n = body.get("n")
    if n is not None and n != 1:
        raise HttpError(
            400, "n must be 1: an agent turn runs tools and has one answer; send the request again for another", param="n", code="unsupported_value"
        )
    tools = _client_tools(body.get("tools"))
    options = TurnOptions(
        client_tools=tools,
        tool_choice=_tool_choice(body.get("tool_choice"), tools),
        sampling=_sampling(body),
        response_format=_response_format(body.get("response_format")),
    )
    return None if options == TurnOptions() else options
