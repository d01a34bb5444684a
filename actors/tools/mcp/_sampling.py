"""Sampling: a server asks our model for a completion (``sampling/createMessage``), if config allows.

Only servers whose entry says ``sampling: {enabled: true}`` are offered the capability; their
requests go to the configured model's endpoint (or ``sampling.model`` there), as one
non-streamed chat completion, ``maxTokens`` capped at ``max_tokens_cap``, within
``sampling.timeout``. Text parts are sent as text; other parts are named, not sent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx
import trio
from mcp import types

from ._settings import McpSettings

Sampler = Callable[[types.CreateMessageRequestParams], Awaitable["types.CreateMessageResult | types.ErrorData"]]


@dataclasses.dataclass(frozen=True, slots=True)
class SamplingTarget:
    """The model endpoint that answers servers' sampling requests (the configured model)."""

    base_url: str
    api_key: str
    model: str
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)


def _text(content: Any) -> str:
    blocks = content if isinstance(content, list) else [content]
    parts = []
    for block in blocks:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        else:
            parts.append(f"[{getattr(block, 'type', 'content')} not sent]")
    return "\n".join(parts)


def completion_body(params: types.CreateMessageRequestParams, model: str, cap: int) -> dict[str, Any]:
    """The chat-completions request for a server's ``sampling/createMessage``. Pure."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": params.systemPrompt}] if params.systemPrompt else []
    messages += [{"role": m.role, "content": _text(m.content)} for m in params.messages]
    body: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": min(params.maxTokens, cap), "stream": False}
    if params.temperature is not None:
        body["temperature"] = params.temperature
    if params.stopSequences:
        body["stop"] = params.stopSequences
    return body


def completion_result(reply: Mapping[str, Any], model: str) -> types.CreateMessageResult | types.ErrorData:
    """The server's answer made of a chat-completions reply. Pure."""
    try:
        choice = reply["choices"][0]
        text = choice["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError):
        return types.ErrorData(code=types.INTERNAL_ERROR, message="the model's reply had no message")
    stop = {"stop": "endTurn", "length": "maxTokens"}.get(str(choice.get("finish_reason")), "endTurn")
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=text), model=str(reply.get("model") or model), stopReason=stop
    )


def sampler_for(settings: McpSettings, target: SamplingTarget | None) -> Sampler | None:
    """How this server's sampling requests are answered; None when its config does not allow them."""
    if not settings.sampling_enabled or target is None:
        return None
    model = settings.sampling_model or target.model

    async def answer(params: types.CreateMessageRequestParams) -> types.CreateMessageResult | types.ErrorData:
        body = completion_body(params, model, settings.sampling_cap)
        headers = {**target.headers, "Authorization": f"Bearer {target.api_key}"}
        try:
            with trio.fail_after(settings.sampling_timeout):
                async with httpx.AsyncClient(timeout=settings.sampling_timeout) as client:
                    response = await client.post(target.base_url.rstrip("/") + "/chat/completions", json=body, headers=headers)
        except (trio.TooSlowError, httpx.HTTPError) as exc:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"the model did not answer: {type(exc).__name__}")
        if response.status_code != 200:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"the model answered HTTP {response.status_code}")
        return completion_result(response.json(), model)

    return answer
