"""Plain chat completions: the configured model, straight through; no tools, no session, nothing stored.

Chat UIs (Open WebUI, LibreChat) send small side tasks to a model of their choosing: a
title for the chat, tags, follow-up questions. Run as agent turns they would each build a
system prompt, offer tools and store a session. So the server advertises a second model id
(``ApiContext.plain_model_name``, ``<model_name>-plain`` by default, e.g.
``hermes-agent-plain``); a chat completion that names it is forwarded to the configured
upstream model with the client's messages and sampling parameters as given (the fields in
:data:`FORWARDED`; others are dropped), and the upstream's answer comes back in OpenAI's
shapes: the completion object, or its ``chat.completion.chunk`` frames and ``[DONE]``.
Failures are OpenAI error envelopes: the client's own mistakes (upstream 400, 413, 422)
keep their status, a rate limit stays 429 (with Retry-After), everything else is 502 (504
for a timeout).

It uses the sessions' model clients (:class:`actors.agent.ModelClients`: one keep-alive
pool) directly rather than ``call_model``, which builds its own body from a transcript
(text only, its own fields) and publishes deltas to a session's hub.
"""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import trio

from actors.agent._http1 import TransportError
from actors.agent._model import USER_AGENT
from actors.agent._wire import error_details

from ._app import ApiContext
from ._asgi import HttpError, Request, Send, send_error, send_json, sse, start_sse
from ._turns import watch_disconnect

FORWARDED = frozenset(
    {
        "messages",
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "n",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "response_format",
        "reasoning_effort",
        "user",
        "stream_options",
    }
)
"""Request fields passed to the upstream model as the client sent them."""
TOOL_FIELDS = ("tools", "functions", "tool_choice", "function_call")
IDLE_TIMEOUT = 300.0
"""Seconds the upstream may stay silent (before its answer starts, or between two reads)."""
BODY_LIMIT = 16 * 1024 * 1024
"""Bytes of a non-streamed answer read; a longer one is a failure."""
_KEEP_STATUS = frozenset({400, 413, 422})


async def serve_plain(ctx: ApiContext, request: Request, send: Send) -> bool:
    """Answer the request if it names the plain model id (True), else leave it to the agent (False)."""
    name = ctx.plain_model_name
    if name is None or ctx.upstream is None or ctx.clients is None:
        return False
    if name.encode() not in await request.body():  # most requests: no decoding twice
        return False
    body = await request.json()
    if body.get("model") != name:
        return False
    upstream = _upstream_body(body)
    ctx.admit()
    try:
        async with watch_disconnect(request):
            try:
                if upstream["stream"]:
                    await _relay_stream(ctx, send, upstream)
                else:
                    await _relay_completion(ctx, send, upstream)
            except HttpError as error:  # raised before the response started (the nursery would wrap it)
                await send_error(send, error)
    finally:
        ctx.release()
    return True


def _upstream_body(body: dict[str, Any]) -> dict[str, Any]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise HttpError(400, "'messages' is required: a non-empty list of {role, content}", param="messages", code="missing_field")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise HttpError(400, f"messages[{index}] must be an object with a role", param=f"messages[{index}].role", code="invalid_role")
    for field in TOOL_FIELDS:
        if body.get(field):
            raise HttpError(
                400, f"the plain model takes no {field}: it answers without tools; use the agent model for tools", param=field, code="tools_not_supported"
            )
    stream = body.get("stream")
    if stream not in (None, True, False, "true", "false"):
        raise HttpError(400, "stream must be true or false", param="stream", code="invalid_type")
    out = {key: value for key, value in body.items() if key in FORWARDED}
    out["stream"] = stream in (True, "true")
    return out


def _post(ctx: ApiContext, upstream: dict[str, Any]) -> Any:
    assert ctx.upstream is not None and ctx.clients is not None
    settings = ctx.upstream
    fields = {
        "authorization": f"Bearer {settings.api_key}",
        "content-type": "application/json",
        "accept": "text/event-stream" if upstream["stream"] else "application/json",
        "accept-encoding": "identity",
        "user-agent": USER_AGENT,
    }
    fields.update((name.lower(), value) for name, value in settings.extra_headers.items())
    body = msgspec.json.encode({**upstream, "model": settings.model})
    return ctx.clients.post(ctx.clients.get(settings), settings.base_url, list(fields.items()), body)


async def _relay_completion(ctx: ApiContext, send: Send, upstream: dict[str, Any]) -> None:
    try:
        with trio.fail_after(IDLE_TIMEOUT):
            async with _post(ctx, upstream) as response:
                if response.status >= 400:
                    raise await _refused(response)
                raw = await response.read(BODY_LIMIT + 1)
    except (TransportError, httpx.TransportError, trio.TooSlowError) as error:
        raise _unreachable(error) from None
    if len(raw) > BODY_LIMIT:
        raise HttpError(502, f"the upstream model's answer is over {BODY_LIMIT // (1024 * 1024)} MB", type="upstream_error", code="upstream_too_large")
    try:
        completion = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        completion = None
    if not isinstance(completion, dict) or not isinstance(completion.get("choices"), list):
        raise HttpError(502, "the upstream model's answer is not a chat completion", type="upstream_error", code="upstream_malformed")
    await send_json(send, 200, completion)


async def _relay_stream(ctx: ApiContext, send: Send, upstream: dict[str, Any]) -> None:
    """Forward the upstream's ``data:`` frames as they come; a failure after the start is an error frame."""
    started = False
    try:
        async with _post(ctx, upstream) as response:  # the connect is bounded by the pool's own timeouts
            if response.status >= 400:
                raise await _refused(response)
            await start_sse(send)
            started = True
            rest = b""
            done = False
            while True:
                with trio.move_on_after(IDLE_TIMEOUT) as idle:
                    data = await response.receive()
                if idle.cancelled_caught:
                    raise TransportError(f"the upstream model sent nothing for {IDLE_TIMEOUT:g} s", timeout=True)
                if data:
                    lines = (rest + data).replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
                    rest = lines.pop()  # the start of a line that the next read completes
                else:
                    lines, rest = [rest], b""  # the body ended; its last line may lack a newline
                frames = []
                for line in lines:
                    if line.startswith(b"data:") and not done:
                        payload = line[5:].strip()
                        done = payload == b"[DONE]"
                        frames.append(b"data: " + payload + b"\n\n")
                if frames:
                    await send({"type": "http.response.body", "body": b"".join(frames), "more_body": True})
                if not data:
                    break  # read to the end even after [DONE]: the connection goes back to the pool
            if not done:
                raise TransportError("the upstream model's stream ended before [DONE]")
    except (TransportError, httpx.TransportError) as error:
        if not started:
            raise _unreachable(error) from None
        failure = _unreachable(error)
        await send({"type": "http.response.body", "body": sse(failure.body()) + b"data: [DONE]\n\n", "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _refused(response: Any) -> HttpError:
    """The upstream's error answer as ours: the client's mistakes keep their status."""
    detail, code = error_details(await response.read(1 << 20))
    status: int = response.status
    if status in _KEEP_STATUS:
        return HttpError(status, detail, code=code or "upstream_bad_request")
    if status == 429:
        retry = response.header("retry-after")
        return HttpError(429, detail, type="rate_limit_error", code=code or "rate_limited", headers={"retry-after": retry} if retry else None)
    return HttpError(502, f"the upstream model answered {status}: {detail}", type="upstream_error", code=code or f"upstream_{status}")


def _unreachable(error: BaseException) -> HttpError:
    if isinstance(error, trio.TooSlowError | httpx.TimeoutException) or (isinstance(error, TransportError) and error.timeout):
        return HttpError(504, f"the upstream model did not answer within {IDLE_TIMEOUT:g} s", type="upstream_error", code="timeout")
    return HttpError(502, f"the upstream model could not be reached: {error}", type="upstream_error", code="transport")
