"""Model calls: one streamed chat completion, run as a wait in the reactor.

The reactor owns the HTTP clients (:class:`ModelClients`, closed when the reactor stops). A
call POSTs the OpenAI chat-completions request, reads the SSE stream (lines split on bytes
here, chunks decoded by msgspec, ``_wire.py``), sends coalesced text and reasoning deltas
straight to the session's hub (the data plane), and returns the assembled reply to the
session actor as the wait's value (the control plane). It reads to the end of the body
after ``[DONE]``, so connections are reused. A cancelled call closes its connection at
once, so the provider sees the stream end.

HTTP is our own small HTTP/1.1 client on h11 + trio (``_http1.py``): one keep-alive pool
for every session and endpoint. Why not httpx (measured against the test model server,
CPU of the client thread per streamed request, ``time.thread_time``): httpx + httpcore
~1.0-1.2 ms, ``_http1`` ~0.4-0.5 ms (as a bare h11 loop); a whole ``call_model`` (echo
reply) 1.3-1.7 ms with httpx, ~0.9 ms now. httpcore's pool also costs more the more
connections it holds (11 ms a request with 200 idle ones), which is why the httpx clients
were sharded 16 ways by session; ``_http1``'s pool costs the same with 1 or 200 idle
connections, so there is one pool. ``bench_server.py --levels 100``: server CPU 8.3-9.2 ->
7.1-7.2 ms a turn (hermes-reactor 6.3-7.2 -> 4.9-5.2 ms).

Proxies: ``_http1`` does not do them. An endpoint that ``urllib.request.getproxies()``
gives a proxy for (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY; its scheme or ``all``) and that
``urllib.request.proxy_bypass`` (NO_PROXY) does not exempt keeps an httpx client, which
honours those variables as before; so do base URLs ``_http1`` does not take (user info,
other schemes, non-ASCII hosts). Decided once per base URL, at its first call.

Why not the openai SDK here (it is used by the tests, as the reference client): measured by
``bench_turn.py`` and ``bench_server.py``, it spent most of the reactor's CPU (request
rebuilding, pydantic per chunk: ~3x this client) and, stopping at ``[DONE]`` before the end of
the body, opened a new connection for every streamed call.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import ssl
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import msgspec
import trio

from protocols import ChatMessage, ToolCall
from protocols._session import ReasoningDelta, TextDelta, TurnOptions

from ._caching import AUTO, PromptCaching, is_anthropic_model
from ._http1 import Endpoint, Exchange, Pool, TransportError, proxied
from ._hub import SessionHub
from ._pricing import Price
from ._pricing import cost as price_cost
from ._ratelimit import HEADERS as RATE_LIMIT_HEADERS
from ._ratelimit import reset_after
from ._reasoning_details import assemble, whole
from ._request import wire_messages
from ._retry import classify, read_error_body
from ._wire import Chunk, Tokens, Usage, chunk_decoder, error_details, request_encoder, tokens_of

log = logging.getLogger(__name__)

YIELD_EVERY = 0.005
"""Seconds of chunk parsing after which the stream task lets other reactor tasks run."""
COALESCE_SECONDS = 0.03
"""Deltas are sent to subscribers at most this often (and at the end of the stream)."""
ERROR_BODY_LIMIT = 1 << 20
"""Bytes of an HTTP error's body read for its detail."""
WHOLE_BODY_LIMIT = 64 << 20
"""Bytes of a whole (not streamed) completion read at most."""
USER_AGENT = "hermes-actors"


_VISION_NAMES = re.compile(
    r"gpt-4o|gpt-4\.1|gpt-4-turbo|gpt-5|\bo[34]\b|claude-(?:3|sonnet|opus|haiku)|gemini|vision|[-_.]vl\b|\bvl[-_]|llava|pixtral|"
    r"gemma-?3|llama-?4|grok-4|mistral-(?:small|medium)-3",
    re.IGNORECASE,
)
"""Model names known to take images (used when ``model.vision`` is not set)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ModelSettings:
    """Which model to call and how to reach it."""

    model: str
    base_url: str
    api_key: str
    provider: str = "custom"
    extra_headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    prices: Mapping[str, Price] = dataclasses.field(default_factory=dict)
    """Model name -> its prices (``pricing:`` in config.yaml); a model without an entry has no known cost."""
    caching: PromptCaching = AUTO
    """``prompt_caching:`` in config.yaml: whether requests carry Anthropic cache marks."""
    vision: bool | None = None
    """Whether the model takes images (``model.vision`` in config.yaml); None: judged by its name."""
    stream: bool = True
    """Ask for a streamed reply (``model.streaming: false`` for endpoints that refuse it)."""
    stream_read_timeout: float = 120.0
    """Seconds a streamed reply may send no byte before it counts as dead (a transport error, retried)."""

    @property
    def sees_images(self) -> bool:
        """Whether image parts may be sent: ``vision`` when configured, else what the name says."""
        return self.vision if self.vision is not None else bool(_VISION_NAMES.search(self.model))

    @property
    def caches_prompts(self) -> bool:
        """Whether this call's request carries cache marks: ``prompt_caching.enabled``, or (auto) a Claude model."""
        enabled = self.caching.enabled
        return is_anthropic_model(self.model, self.provider) if enabled is None else enabled

    def cost(self, input_tokens: int, output_tokens: int, cache_read_tokens: int = 0, cache_write_tokens: int = 0) -> float | None:
        """What these tokens of :attr:`model` cost in USD, if its prices are known (cached tokens
        are part of ``input_tokens``, charged at the cache prices)."""
        price = self.prices.get(self.model)
        if price is None:
            return None
        return price_cost(price, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)


@dataclasses.dataclass(frozen=True, slots=True)
class ModelReply:
    content: str
    reasoning: str | None
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    """Of ``input_tokens``, those read from the provider's prompt cache."""
    cache_write_tokens: int = 0
    """Of ``input_tokens``, those written to the provider's prompt cache."""
    reasoning_details: str | None = None
    """The provider's ``reasoning_details`` list as JSON text (sent back on later requests)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ModelFailure:
    kind: str
    status: int | None
    detail: str
    retry_after: float | None = None


class ModelClients:
    """The model calls' HTTP clients: one h11 connection pool for every endpoint, and an httpx
    client per endpoint reached through a proxy. Created and closed in the reactor thread only."""

    def __init__(self) -> None:
        self._pool = Pool(self._tls_context)
        self._routes: dict[str, Endpoint | httpx.AsyncClient] = {}
        self.unstreamed: set[str] = set()
        """Base URLs that refused ``stream: true``: their calls are made without streaming."""
        """Per base URL: where its requests go, decided once."""
        self._tls: ssl.SSLContext | None = None
        """One TLS context for every connection: building one loads the CA bundle (~35 ms)."""

    def get(self, settings: ModelSettings) -> Endpoint | httpx.AsyncClient:
        """The route to ``settings.base_url``: our pool's :class:`Endpoint`, or an httpx client
        when a proxy applies (or the URL is one our client does not take)."""
        route = self._routes.get(settings.base_url)
        if route is None:
            route = self._routes[settings.base_url] = self._route(settings.base_url)
        return route

    def _route(self, base_url: str) -> Endpoint | httpx.AsyncClient:
        endpoint = Endpoint.parse(base_url, "chat/completions")
        if endpoint is not None and not proxied(endpoint):
            return endpoint
        # No read timeout here: each call's own deadline (the reactor wait) governs.
        timeout = httpx.Timeout(connect=15.0, read=None, write=60.0, pool=30.0)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
        verify: ssl.SSLContext | bool = self._tls_context() if base_url.lower().startswith("https:") else False
        return httpx.AsyncClient(timeout=timeout, limits=limits, verify=verify)

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = httpx.create_ssl_context()  # certifi, or SSL_CERT_FILE / SSL_CERT_DIR as httpx does
            self._tls.set_alpn_protocols(["http/1.1"])
        return self._tls

    def post(self, route: Endpoint | httpx.AsyncClient, base_url: str, headers: list[tuple[str, str]], body: bytes) -> Exchange | _HttpxResponse:
        """The streamed POST of ``body`` to ``base_url``'s chat completions, to use with ``async with``."""
        if isinstance(route, Endpoint):
            return self._pool.post(route, headers, body)
        return _HttpxResponse(route, f"{base_url.rstrip('/')}/chat/completions", body, headers)

    async def aclose(self) -> None:
        routes, self._routes = list(self._routes.values()), {}
        await self._pool.aclose()
        for route in routes:
            if isinstance(route, httpx.AsyncClient):
                await route.aclose()


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


async def _refused(response: Exchange | _HttpxResponse) -> ModelFailure:
    """An HTTP error response as a classified failure. Only a rate limit reads the per-limit
    reset headers: OpenAI sends them on every response, so on another failure they describe
    the usual windows, not a wait."""
    body = read_error_body(await response.read(ERROR_BODY_LIMIT))
    error = classify(response.status, body.detail, code=body.code, error_type=body.type)
    headers = {name: value for name in RATE_LIMIT_HEADERS if (value := response.header(name)) is not None}
    wait = reset_after(headers, time.time(), limits=error.kind == "rate_limit")
    return ModelFailure(kind=error.kind, status=response.status, detail=error.detail, retry_after=wait)


class _HttpxResponse:
    """An httpx streamed response read like an :class:`Exchange` (the proxy path)."""

    def __init__(self, client: httpx.AsyncClient, url: str, body: bytes, headers: list[tuple[str, str]]) -> None:
        self._request = client.stream("POST", url, content=body, headers=headers)
        self.status = 0

    async def __aenter__(self) -> _HttpxResponse:
        self._response = await self._request.__aenter__()
        self._chunks = self._response.aiter_bytes()
        self.status = self._response.status_code
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._request.__aexit__(*exc_info)

    def header(self, name: str) -> str | None:
        value: str | None = self._response.headers.get(name)
        return value

    async def read(self, limit: int) -> bytes:
        return (await self._response.aread())[:limit]

    async def receive(self) -> bytes:
        try:
            return await self._chunks.__anext__()
        except StopAsyncIteration:
            return b""


def _take(
    chunk: Chunk, text: list[str], reasoning: list[str], calls: dict[int, dict[str, str]], splitter: _ThinkSplitter, out: _Coalescer, box: dict[str, Any]
) -> None:
    if chunk.usage is not None:
        box["usage"] = chunk.usage
    if not chunk.choices:
        return
    choice = chunk.choices[0]
    delta = choice.delta
    if choice.finish_reason:
        box["finish"] = choice.finish_reason
    if delta.reasoning_details:
        box["details"] += delta.reasoning_details
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
    clients: ModelClients,
    route: Endpoint | httpx.AsyncClient,
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
    fields = {
        "authorization": f"Bearer {settings.api_key}",
        "content-type": "application/json",
        "accept": "text/event-stream",
        "accept-encoding": "identity",
        "user-agent": USER_AGENT,
    }
    fields.update((name.lower(), value) for name, value in headers.items())  # the caller's headers win
    response = clients.post(route, settings.base_url, list(fields.items()), request_encoder.encode(body))
    done = False
    try:
        async with response:
            if response.status >= 400:
                return [await _refused(response)]
            checkpoint = trio.current_time()
            rest = b""
            while True:
                with trio.move_on_after(settings.stream_read_timeout) as silent:
                    data = await response.receive()
                if silent.cancelled_caught:
                    detail = f"the stream sent nothing for {settings.stream_read_timeout:g} s (timeouts.stream_read); the connection was closed"
                    return [ModelFailure(kind="transport", status=None, detail=detail)]
                if data:
                    data = rest + data
                    if b"\r" in data:  # SSE lines may end in \r\n or \r: make every end a \n (blank lines are skipped)
                        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
                    lines = data.split(b"\n")
                    rest = lines.pop()  # the start of a line that the next read completes
                else:
                    lines, rest = [rest], b""  # the body ended; its last line may lack a newline
                for line in lines:
                    # A long reply that has already arrived must not hold the reactor: yield now and then.
                    if trio.current_time() - checkpoint > YIELD_EVERY:
                        await trio.lowlevel.checkpoint()
                        checkpoint = trio.current_time()
                    if not line.startswith(b"data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == b"[DONE]":
                        done = True  # read on to the end of the body, so the connection is reused
                        continue
                    chunk = chunk_decoder.decode(payload)
                    if chunk.error is not None:
                        detail, code = error_details(request_encoder.encode(chunk.error))
                        return [ModelFailure(kind=classify(None if code is None else 500, detail, code=code).kind, status=None, detail=detail)]
                    _take(chunk, text, reasoning, calls, splitter, out, box)
                if not data:
                    break
    except TransportError as error:
        return [ModelFailure(kind="timeout" if error.timeout else "transport", status=None, detail=str(error))]
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
    options: TurnOptions | None = None,
) -> ModelReply | ModelFailure:
    """Stream one completion; never raises for provider errors (they come back classified).

    ``options`` (an API client's request fields) add sampling parameters, ``tool_choice`` and
    ``response_format``; they never replace the model, the messages or the stream settings.
    """
    route = clients.get(settings)
    streamed = settings.stream and settings.base_url not in clients.unstreamed
    body: dict[str, Any] = {"model": settings.model, "messages": wire_messages(messages, settings), "stream": streamed}
    if streamed:
        body["stream_options"] = {"include_usage": True}
    if tools:
        body["tools"] = list(tools)
    if options is not None:
        body.update({k: v for k, v in options.sampling.items() if k not in body})
        if options.tool_choice is not None and tools:
            body["tool_choice"] = options.tool_choice
        if options.response_format is not None:
            body["response_format"] = options.response_format
    headers = {"X-Hermes-Session-Id": session_id, **settings.extra_headers}
    if not streamed:
        return await _whole(clients, route, settings, body, headers, hub, turn_id)
    text: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    usage_box: dict[str, Any] = {"usage": Usage(), "finish": None, "details": []}
    splitter = _ThinkSplitter()
    out = _Coalescer(hub, turn_id)
    failure: list[ModelFailure] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(out.run)
        failure += await _stream(clients, route, settings, body, headers, text, reasoning, calls, splitter, out, usage_box)
        nursery.cancel_scope.cancel()
    if failure:
        if _refuses_streaming(failure[0]):  # some OpenAI-compatible servers cannot stream: ask again, whole
            clients.unstreamed.add(settings.base_url)
            log.warning("%s refused a streamed request (%s); its calls are made without streaming from now on", settings.base_url, failure[0].detail)
            body["stream"] = False
            del body["stream_options"]
            return await _whole(clients, route, settings, body, headers, hub, turn_id)
        return failure[0]
    answer, thought = splitter.flush()
    text.append(answer)
    reasoning.append(thought)
    out.add(answer, thought)
    out.flush()
    tool_calls = tuple(ToolCall(id=slot["id"], name=slot["name"], arguments=slot["arguments"]) for _, slot in sorted(calls.items()))
    joined_reasoning = "".join(reasoning).strip()
    try:
        details = assemble(usage_box["details"])
    except msgspec.DecodeError as error:
        return ModelFailure(kind="malformed", status=None, detail=f"a reasoning_details fragment could not be read: {error}")
    return _reply("".join(text).strip(), joined_reasoning or None, tool_calls, usage_box["finish"], tokens_of(usage_box["usage"]), details)


def _reply(content: str, reasoning: str | None, calls: tuple[ToolCall, ...], finish: str | None, tokens: Tokens, details: str | None) -> ModelReply:
    return ModelReply(
        content=content,
        reasoning=reasoning,
        tool_calls=calls,
        finish_reason=finish,
        input_tokens=tokens.input,
        output_tokens=tokens.output,
        cache_read_tokens=tokens.cache_read,
        cache_write_tokens=tokens.cache_write,
        reasoning_details=details,
    )


def _refuses_streaming(failure: ModelFailure) -> bool:
    detail = failure.detail.lower()
    return failure.kind == "bad_request" and "stream" in detail and ("not supported" in detail or "unsupported" in detail or "stream: false" in detail)


class _Completion(msgspec.Struct):
    """The parts of a whole (not streamed) chat completion that a reply needs."""

    choices: list[dict[str, Any]] = msgspec.field(default_factory=list)
    usage: Usage | None = None


async def _whole(
    clients: ModelClients,
    route: Endpoint | httpx.AsyncClient,
    settings: ModelSettings,
    body: dict[str, Any],
    headers: dict[str, str],
    hub: SessionHub | None,
    turn_id: str,
) -> ModelReply | ModelFailure:
    """One completion without streaming (``model.streaming: false``, or an endpoint that refused it)."""
    fields = {"authorization": f"Bearer {settings.api_key}", "content-type": "application/json", "accept": "application/json", "user-agent": USER_AGENT}
    fields.update((name.lower(), value) for name, value in headers.items())
    response = clients.post(route, settings.base_url, list(fields.items()), request_encoder.encode(body))
    try:
        async with response:
            if response.status >= 400:
                return await _refused(response)
            raw = await response.read(WHOLE_BODY_LIMIT)
    except TransportError as error:
        return ModelFailure(kind="timeout" if error.timeout else "transport", status=None, detail=str(error))
    except httpx.TimeoutException as error:
        return ModelFailure(kind="timeout", status=None, detail=f"{type(error).__name__}: {error}")
    except httpx.TransportError as error:
        return ModelFailure(kind="transport", status=None, detail=f"{type(error).__name__}: {error}")
    try:
        completion = msgspec.json.decode(raw, type=_Completion)
        choice = completion.choices[0]
        message = choice.get("message") or {}
        content = str(message.get("content") or "")
        calls = tuple(
            ToolCall(id=str(c.get("id") or ""), name=str(c["function"]["name"]), arguments=str(c["function"].get("arguments") or ""))
            for c in message.get("tool_calls") or ()
        )
    except (msgspec.DecodeError, msgspec.ValidationError, IndexError, KeyError, TypeError) as error:
        return ModelFailure(kind="malformed", status=None, detail=f"the completion could not be read: {error}")
    splitter = _ThinkSplitter()
    answer, thought = splitter.feed(content)
    rest, more = splitter.flush()
    reasoning = "".join((str(message.get("reasoning_content") or message.get("reasoning") or ""), thought, more)).strip()
    out = _Coalescer(hub, turn_id)
    out.add(answer + rest, reasoning)
    out.flush()
    tokens = tokens_of(completion.usage or Usage())
    return _reply((answer + rest).strip(), reasoning or None, calls, choice.get("finish_reason"), tokens, whole(message.get("reasoning_details")))
