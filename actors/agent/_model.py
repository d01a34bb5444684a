"""Model calls: one streamed chat completion, run as a wait in the reactor.

The reactor owns the HTTP clients (:class:`ModelClients`, one httpx pool per endpoint,
closed when the reactor stops). A call POSTs the OpenAI chat-completions request, reads the
SSE stream (chunks decoded by msgspec, ``_wire.py``), sends coalesced text and reasoning
deltas straight to the session's hub (the data plane), and returns the assembled reply to
the session actor as the wait's value (the control plane). It reads to the end of the body
after ``[DONE]``, so connections are reused. A cancelled call closes its HTTP response at
once, so the provider sees the stream end.

Why not the openai SDK here (it is used by the tests, as the reference client): measured by
``bench_turn.py`` and ``bench_server.py``, it spent most of the reactor's CPU (request
rebuilding, pydantic per chunk: ~3x this client) and, stopping at ``[DONE]`` before the end of
the body, opened a new connection for every streamed call.
"""

from __future__ import annotations

import dataclasses
import ssl
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import msgspec
import trio

from protocols import ChatMessage, ToolCall
from protocols._session import ReasoningDelta, TextDelta

from ._hub import SessionHub
from ._retry import classify
from ._wire import Chunk, chunk_decoder, error_details, request_encoder

YIELD_EVERY = 0.005
"""Seconds of chunk parsing after which the stream task lets other reactor tasks run."""
COALESCE_SECONDS = 0.03
"""Deltas are sent to subscribers at most this often (and at the end of the stream)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ModelSettings:
    """Which model to call and how to reach it."""

    model: str
    base_url: str
    api_key: str
    provider: str = "custom"
    extra_headers: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class ModelReply:
    content: str
    reasoning: str | None
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None
    input_tokens: int
    output_tokens: int


@dataclasses.dataclass(frozen=True, slots=True)
class ModelFailure:
    kind: str
    status: int | None
    detail: str
    retry_after: float | None = None


class ModelClients:
    """One HTTP client (connection pool) per endpoint; created and closed in the reactor thread only."""

    SHARDS = 16
    """Pools per endpoint. httpcore's pool does work per request that grows with the pool's
    size; sharding by session keeps each pool small (measured: one shared pool cost ~11 ms
    a turn at 100 concurrent sessions)."""

    def __init__(self) -> None:
        self._clients: dict[tuple[str, int], httpx.AsyncClient] = {}
        self._tls: ssl.SSLContext | None = None
        """One TLS context for every pool: building one loads the CA bundle (~35 ms)."""

    def get(self, settings: ModelSettings, shard: str = "") -> httpx.AsyncClient:
        key = (settings.base_url, zlib.crc32(shard.encode()) % self.SHARDS)
        client = self._clients.get(key)
        if client is None:
            # No read timeout here: each call's own deadline (the reactor wait) governs.
            timeout = httpx.Timeout(connect=15.0, read=None, write=60.0, pool=30.0)
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
            if self._tls is None and settings.base_url.startswith("https:"):
                self._tls = httpx.create_ssl_context()  # certifi, or SSL_CERT_FILE / SSL_CERT_DIR as httpx does
            client = httpx.AsyncClient(timeout=timeout, limits=limits, verify=self._tls or False)
            self._clients[key] = client
        return client

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()


class _ThinkSplitter:
    """Routes streamed text to answer or reasoning across ``<think>`` tags split over chunks."""

    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self) -> None:
        self.inside = False
        self.pending = ""

    def feed(self, text: str) -> tuple[str, str]:
        data = self.pending + text
        self.pending = ""
        answer: list[str] = []
        reasoning: list[str] = []
        while data:
            tag = self.CLOSE if self.inside else self.OPEN
            index = data.find(tag)
            if index >= 0:
                (reasoning if self.inside else answer).append(data[:index])
                data = data[index + len(tag) :]
                self.inside = not self.inside
                continue
            # Hold back a suffix that may be the start of a tag.
            keep = next((k for k in range(len(tag) - 1, 0, -1) if data.endswith(tag[:k])), 0)
            (reasoning if self.inside else answer).append(data[: len(data) - keep])
            self.pending = data[len(data) - keep :]
            break
        return "".join(answer), "".join(reasoning)

    def flush(self) -> tuple[str, str]:
        rest, self.pending = self.pending, ""
        return ("", rest) if self.inside else (rest, "")


class _Coalescer:
    """Batches deltas: the first goes out at once, the rest at most every ``COALESCE_SECONDS``.

    Its timer runs only while something waits to be sent: a call that streams nothing
    (tool calls, a slow first token) costs no wake-ups.
    """

    def __init__(self, hub: SessionHub | None, turn_id: str) -> None:
        self.hub = hub
        self.turn_id = turn_id
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.first = True
        self.waiting = trio.Event()

    def add(self, text: str, reasoning: str) -> None:
        if text:
            self.text.append(text)
        if reasoning:
            self.reasoning.append(reasoning)
        if self.first and (text or reasoning):
            self.first = False
            self.flush()
        elif text or reasoning:
            self.waiting.set()

    async def run(self) -> None:
        while True:
            await self.waiting.wait()
            await trio.sleep(COALESCE_SECONDS)
            self.waiting = trio.Event()
            self.flush()

    def flush(self) -> None:
        if self.hub is None:
            self.text.clear()
            self.reasoning.clear()
            return
        if self.reasoning:
            self.hub.publish(ReasoningDelta(turn_id=self.turn_id, text="".join(self.reasoning)))
            self.reasoning.clear()
        if self.text:
            self.hub.publish(TextDelta(turn_id=self.turn_id, text="".join(self.text)))
            self.text.clear()


def _retry_after(headers: httpx.Headers) -> float | None:
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _take(chunk: Chunk, text: list[str], reasoning: list[str], calls: dict[int, dict[str, str]], splitter: _ThinkSplitter, out: _Coalescer, box: dict[str, Any]) -> None:
    if chunk.usage is not None:
        box["usage"] = (chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0)
    if not chunk.choices:
        return
    choice = chunk.choices[0]
    delta = choice.delta
    if choice.finish_reason:
        box["finish"] = choice.finish_reason
    extra = delta.reasoning_content or delta.reasoning
    if extra:
        reasoning.append(extra)
        out.add("", extra)
    if delta.content:
        answer, thought = splitter.feed(delta.content)
        text.append(answer)
        reasoning.append(thought)
        out.add(answer, thought)
    for part in delta.tool_calls or ():
        slot = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
        if part.id:
            slot["id"] = part.id
        if part.function is not None:
            slot["name"] += part.function.name or ""
            slot["arguments"] += part.function.arguments or ""


async def _stream(
    client: httpx.AsyncClient,
    settings: ModelSettings,
    body: dict[str, Any],
    headers: dict[str, str],
    text: list[str],
    reasoning: list[str],
    calls: dict[int, dict[str, str]],
    splitter: _ThinkSplitter,
    out: _Coalescer,
    box: dict[str, Any],
) -> list[ModelFailure]:
    """POST the request and read the SSE stream; failures come back as a one-item list."""
    url = f"{settings.base_url}/chat/completions"
    headers = {"authorization": f"Bearer {settings.api_key}", "content-type": "application/json", "accept": "text/event-stream", **headers}
    done = False
    try:
        async with client.stream("POST", url, content=request_encoder.encode(body), headers=headers) as response:
            if response.status_code >= 400:
                detail, code = error_details(await response.aread())
                kind = classify(response.status_code, detail, code=code).kind
                return [ModelFailure(kind=kind, status=response.status_code, detail=detail, retry_after=_retry_after(response.headers))]
            checkpoint = trio.current_time()
            async for line in response.aiter_lines():
                # A long reply that has already arrived must not hold the reactor: yield now and then.
                if trio.current_time() - checkpoint > YIELD_EVERY:
                    await trio.lowlevel.checkpoint()
                    checkpoint = trio.current_time()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True  # read on to the end of the body, so the connection is reused
                    continue
                chunk = chunk_decoder.decode(data)
                if chunk.error is not None:
                    detail, code = error_details(request_encoder.encode(chunk.error))
                    return [ModelFailure(kind=classify(None if code is None else 500, detail, code=code).kind, status=None, detail=detail)]
                _take(chunk, text, reasoning, calls, splitter, out, box)
    except httpx.TimeoutException as error:
        return [ModelFailure(kind="timeout", status=None, detail=f"{type(error).__name__}: {error}")]
    except httpx.TransportError as error:
        return [ModelFailure(kind="transport", status=None, detail=f"{type(error).__name__}: {error}")]
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        return [ModelFailure(kind="malformed", status=None, detail=f"a stream chunk could not be read: {error}")]
    if not done:
        return [ModelFailure(kind="transport", status=None, detail="the stream ended before [DONE]")]
    return []


async def call_model(
    clients: ModelClients,
    settings: ModelSettings,
    messages: Sequence[ChatMessage],
    tools: Sequence[Mapping[str, Any]],
    *,
    hub: SessionHub | None,
    turn_id: str,
    session_id: str,
) -> ModelReply | ModelFailure:
    """Stream one completion; never raises for provider errors (they come back classified)."""
    client = clients.get(settings, session_id)
    body: dict[str, Any] = {
        "model": settings.model,
        "messages": [m.to_openai() for m in messages],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if tools:
        body["tools"] = list(tools)
    headers = {"X-Hermes-Session-Id": session_id, **settings.extra_headers}
    text: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    usage_box: dict[str, Any] = {"usage": (0, 0), "finish": None}
    splitter = _ThinkSplitter()
    out = _Coalescer(hub, turn_id)
    failure: list[ModelFailure] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(out.run)
        failure += await _stream(client, settings, body, headers, text, reasoning, calls, splitter, out, usage_box)
        nursery.cancel_scope.cancel()
    if failure:
        return failure[0]
    answer, thought = splitter.flush()
    text.append(answer)
    reasoning.append(thought)
    out.add(answer, thought)
    out.flush()
    tool_calls = tuple(
        ToolCall(id=slot["id"], name=slot["name"], arguments=slot["arguments"]) for _, slot in sorted(calls.items())
    )
    joined_reasoning = "".join(reasoning).strip()
    return ModelReply(
        content="".join(text).strip(),
        reasoning=joined_reasoning or None,
        tool_calls=tool_calls,
        finish_reason=usage_box["finish"],
        input_tokens=usage_box["usage"][0],
        output_tokens=usage_box["usage"][1],
    )
