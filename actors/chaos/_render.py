"""Scripted replies to OpenAI wire bytes: completion objects, SSE chunks, error bodies.

Pure functions of (reply, request body, seeded RNG, the server's clock reading): the same
seed and clock give the same ids, chunk splits and dated headers. Nothing here does I/O;
``_http`` sends what this module plans.
"""

from __future__ import annotations

import dataclasses
import email.utils
import math
import random
import string
import time
from typing import Any

import msgspec

from ._script import ClockHeader, HttpError, Reply, ScriptedReply, TextReply, ToolCallsReply

CREATED = 1_700_000_000
"""The ``created`` timestamp of every completion (fixed, so bodies are deterministic)."""

_ALPHABET = string.ascii_letters + string.digits
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}
_encode = msgspec.json.Encoder().encode


@dataclasses.dataclass(frozen=True, slots=True)
class Planned:
    """A response ready to send: status, headers, body chunks, and the faults to apply."""

    status: int
    headers: list[tuple[str, str]]
    chunks: list[bytes]
    faults: ScriptedReply | None = None
    streaming: bool = False
    """Server-sent events: chunked encoding; otherwise one chunk with a Content-Length."""


def render(
    reply: Reply,
    request: dict[str, Any],
    *,
    rng: random.Random,
    model: str,
    now: float,
    prompt_tokens: int | None = None,
    cache: tuple[int, int] | None = None,
) -> Planned:
    """Plan the response to a chat completion ``request`` that the script answers with ``reply``.

    ``now`` is the server's clock (unix seconds), read for the reply's clock headers.
    ``prompt_tokens`` is the ``usage.prompt_tokens`` to report (the server's count, when it
    enforces a context window); None reports the words of the messages' contents. ``cache``:
    the prompt-cache (read, written) tokens to report, as OpenRouter does, in
    ``usage.prompt_tokens_details`` (``cached_tokens``, ``cache_write_tokens``).
    """
    request_id = "req_" + _token(rng, 24)
    if isinstance(reply, HttpError):
        return scripted_error(reply, request_id=request_id, now=now)
    completion_id = "chatcmpl-" + _token(rng, 29)
    calls = reply.calls if isinstance(reply, ToolCallsReply) else ()
    call_ids = [call.id if call.id is not None else "call_" + _token(rng, 24) for call in calls]
    content, reasoning = _content_and_reasoning(reply)
    words_out = _words(content) + _words(reasoning) + sum(_words(c.name) + _words(c.arguments) for c in calls)
    words_in = prompt_words(request) if prompt_tokens is None else prompt_tokens
    usage: dict[str, Any] = {"prompt_tokens": words_in, "completion_tokens": words_out, "total_tokens": words_in + words_out}
    if cache is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cache[0], "cache_write_tokens": cache[1]}
    details = reply.reasoning_details if isinstance(reply, TextReply | ToolCallsReply) else ()
    finish = "tool_calls" if calls else reply.finish_reason if isinstance(reply, TextReply) else "stop"
    head = {"id": completion_id, "created": CREATED, "model": _model_of(request, model)}
    if request.get("stream") is not True:
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reasoning is not None:
            message["reasoning_content"] = reasoning
        if details:
            message["reasoning_details"] = list(details)
        if calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for cid, c in zip(call_ids, calls, strict=True)
            ]
        body = {
            **head,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": usage,
        }
        return Planned(200, _json_headers(request_id), [_encode(body)], reply)

    options = request.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    head = {**head, "object": "chat.completion.chunk"}
    if include_usage:
        head["usage"] = None

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return _event(_encode({**head, "choices": [choice]}))

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"reasoning_content": piece}) for piece in split(reasoning or "", rng)]
    events += [chunk({"reasoning_details": [fragment]}) for fragment in details]
    events += [chunk({"content": piece}) for piece in split(content or "", rng)]
    for index, (cid, call) in enumerate(zip(call_ids, calls, strict=True)):
        first = {"index": index, "id": cid, "type": "function", "function": {"name": call.name, "arguments": ""}}
        events.append(chunk({"tool_calls": [first]}))
        events += [chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}) for piece in split(call.arguments, rng)]
    events.append(chunk({}, finish))
    if include_usage:
        events.append(_event(_encode({**head, "choices": [], "usage": usage})))
    events.append(_event(b"[DONE]"))
    headers = [("content-type", "text/event-stream"), ("cache-control", "no-cache"), ("x-request-id", request_id)]
    return Planned(200, headers, events, reply, streaming=True)


def echo(request: dict[str, Any]) -> TextReply:
    """The reply of echo mode: ``echo: <content of the last user message>``."""
    last = ""
    messages = request.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict) and message.get("role") == "user":
            last = _text_of(message.get("content"))
    return TextReply(content=f"echo: {last}")


def count_prompt_tokens(request: dict[str, Any]) -> int:
    """The server's own token count of a chat completion ``request`` (the rule in ``_server``'s module docstring).

    ``ceil(C / 4) + 4 * M``: M messages (JSON objects) and C characters of their contents,
    their tool calls' names and arguments, and the ``tools`` list as compact JSON.
    """
    messages = request.get("messages")
    counted = [m for m in (messages if isinstance(messages, list) else []) if isinstance(m, dict)]
    chars = 0
    for message in counted:
        chars += _text_length(message.get("content"))
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                chars += sum(len(v) for v in (function.get("name"), function.get("arguments")) if isinstance(v, str))
    tools = request.get("tools")
    if tools is not None:
        chars += len(_encode(tools).decode())
    return math.ceil(chars / 4) + 4 * len(counted)


def error(
    status: int,
    message: str,
    *,
    code: str | None = None,
    error_type: str | None = None,
    param: str | None = None,
    retry_after: float | None = None,
) -> Planned:
    """An OpenAI-shaped error response."""
    if error_type is None:
        error_type = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = {"error": {"message": message, "type": error_type, "param": param, "code": code}}
    return Planned(status, [*_json_headers(), *_retry_after(retry_after)], [_encode(body)])


def scripted_error(reply: HttpError, *, request_id: str, now: float) -> Planned:
    """The response of a scripted :class:`HttpError`: its body, and its headers over the usual ones."""
    if reply.body is None:
        planned = error(reply.status, reply.message, code=reply.code, error_type=reply.error_type, param=reply.param, retry_after=reply.retry_after)
        body = planned.chunks
    else:
        body = [reply.body.encode()]
    usual = [*_json_headers(request_id), *_retry_after(reply.retry_after)]
    scripted = [*reply.headers, *((h.name, clock_value(h, now)) for h in reply.clock_headers)]
    replaced = {name.lower() for name, _ in scripted}
    headers = [(name, value) for name, value in usual if name not in replaced] + scripted
    return Planned(reply.status, headers, body, reply)


def clock_value(header: ClockHeader, now: float) -> str:
    """The value of ``header`` when the server's clock reads ``now``."""
    at = now + header.seconds
    if header.format == "unix-ms":
        return str(math.ceil(round(at * 1000, 3)))
    second = math.ceil(round(at, 6))
    if header.format == "http-date":
        return email.utils.formatdate(second, usegmt=True)
    if header.format == "rfc3339":
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
    return str(second)


def models(model: str) -> Planned:
    """The ``GET /v1/models`` list: one model."""
    body = {"object": "list", "data": [{"id": model, "object": "model", "created": CREATED, "owned_by": "hermes"}]}
    return Planned(200, _json_headers(), [_encode(body)])


def split(text: str, rng: random.Random) -> list[str]:
    """Cut ``text`` at random places into pieces of about six characters (at least 3 if it can)."""
    if len(text) <= 1:
        return [text] if text else []
    cuts = min(len(text) - 1, max(2, len(text) // 6))
    points = sorted(rng.sample(range(1, len(text)), cuts))
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


def _content_and_reasoning(reply: TextReply | ToolCallsReply) -> tuple[str | None, str | None]:
    if reply.think and reply.reasoning is not None:
        return f"<think>{reply.reasoning}</think>{reply.content or ''}", None
    return reply.content, reply.reasoning


def prompt_words(request: dict[str, Any]) -> int:
    """The words of a request's message contents: ``usage.prompt_tokens`` when no context window is enforced."""
    messages = request.get("messages")
    return sum(_words(_text_of(m.get("content"))) for m in (messages if isinstance(messages, list) else []) if isinstance(m, dict))


def _text_of(content: object) -> str:
    """The text of a message's content: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _text_length(content: object) -> int:
    """The characters of a message's content: a string, or the ``text`` of each of a list of parts (no separators)."""
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(p["text"]) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return 0


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


def _model_of(request: dict[str, Any], default: str) -> str:
    model = request.get("model")
    return model if isinstance(model, str) and model else default


def _token(rng: random.Random, length: int) -> str:
    return "".join(rng.choices(_ALPHABET, k=length))


def _event(data: bytes) -> bytes:
    return b"data: " + data + b"\n\n"


def _json_headers(request_id: str | None = None) -> list[tuple[str, str]]:
    headers = [("content-type", "application/json")]
    if request_id is not None:
        headers.append(("x-request-id", request_id))
    return headers


def _retry_after(seconds: float | None) -> list[tuple[str, str]]:
    if seconds is None:
        return []
    return [("retry-after", str(int(seconds) if float(seconds).is_integer() else seconds))]
