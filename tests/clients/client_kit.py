"""What the client tests share: scripted turns and what the test model server was asked."""

from __future__ import annotations

from typing import Any

from actors.chaos import ScriptedCall, TextReply, ToolCallsReply
from tests.platforms.server_kit import ServerKit


def calls(name: str, arguments: str, call_id: str) -> ToolCallsReply:
    """A model reply that calls one tool."""
    return ToolCallsReply(calls=(ScriptedCall(name=name, arguments=arguments, id=call_id),))


def says(text: str) -> TextReply:
    return TextReply(content=text)


def model_requests(api: ServerKit) -> list[dict[str, Any]]:
    """The bodies of the chat completion requests the model received, oldest first."""
    return [r.body for r in api.model.requests if r.path == "/v1/chat/completions"]


def model_saw(api: ServerKit) -> list[dict[str, Any]]:
    """The messages of the model's latest request, without the system prompt."""
    return [m for m in model_requests(api)[-1]["messages"] if m["role"] != "system"]


def offered(api: ServerKit) -> list[str]:
    """The names of the tools offered in the model's latest request."""
    return [t["function"]["name"] for t in model_requests(api)[-1].get("tools", [])]
