"""Transcript records in the OpenAI chat message shape: what is stored and sent to models."""

from __future__ import annotations

from typing import Literal

from ._base import Message

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(Message, frozen=True, kw_only=True, gc=False):
    """One function call requested by the model in an assistant message."""

    id: str
    name: str
    arguments: str
    """The arguments exactly as the model sent them (a JSON object as text, maybe malformed)."""


class ChatMessage(Message, frozen=True, kw_only=True, gc=False):
    """One transcript entry (system / user / assistant with tool_calls / tool result)."""

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    """Assistant only: the calls to run; each must get exactly one ``tool`` message."""
    tool_call_id: str | None = None
    """Tool only: which call this is the result of."""
    name: str | None = None
    """Tool only: the tool's name."""
    reasoning: str | None = None
    """Assistant only: the model's reasoning, kept apart from ``content``; sent back to the
    provider as ``reasoning_content`` (multi-turn reasoning of OpenRouter, Moonshot, DeepSeek)."""
    reasoning_details: str | None = None
    """Assistant only: the provider's ``reasoning_details`` list (opaque blocks such as signed
    Anthropic thinking through OpenRouter) as JSON text, kept verbatim and sent back unchanged."""
    finish_reason: str | None = None
    images: tuple[str, ...] = ()
    """User only: image URLs (``data:`` or ``https:``) sent with the text."""

    def to_openai(self) -> dict[str, object]:
        """The dict the OpenAI chat completions API takes for this message."""
        out: dict[str, object] = {"role": self.role, "content": self.content}
        if self.images:
            parts: list[dict[str, object]] = [{"type": "text", "text": self.content}] if self.content else []
            parts += [{"type": "image_url", "image_url": {"url": url}} for url in self.images]
            out["content"] = parts
        if self.tool_calls:
            out["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in self.tool_calls]
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id
            if self.name is not None:
                out["name"] = self.name
        return out
