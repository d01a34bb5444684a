"""What a test scripts the model server to answer, and the record of what it was asked.

A script is a queue of replies. Each reply is a frozen, tagged msgspec Struct, so a script
can also be written as JSON (``hermes chaos`` will load them from files). Every reply
carries the same fault modifiers (:class:`ScriptedReply`): a latency before the response
starts, a stall mid-body, a connection cut mid-body, a body that goes silent.

The body of a response is sent in *chunks*: each server-sent event of a streaming reply is
one chunk (``data: [DONE]`` included); a non-streaming body, an error body included, is a
single chunk. ``stall_after_chunks=N``, ``cut_after_chunks=N`` and ``silent_after_chunks=N``
act after N chunks were sent (0: right after the status line and headers); at the same N
the stall comes first, then the cut, then the silence.

:class:`HttpError` has a constructor per failure real providers send (rate limits in each
spelling of their reset hint, spent credit, a bad key, overload, context overflow in five
servers' wording, an unknown model, an unsupported parameter), with the status, headers and
body those providers document. A header that names a moment (an HTTP-date, an RFC 3339
time, a unix time) is a :class:`ClockHeader`, written when the reply is sent from the
server's clock, so a test that pins the clock gets exact bytes.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal, TypeAlias, get_args

import msgspec

from protocols import Message

from .._errors import UsageError

RateLimitSpelling: TypeAlias = Literal["retry-after", "http-date", "retry-after-ms", "openai", "anthropic", "openrouter", "none"]
"""How :meth:`HttpError.rate_limited` says when to come back."""
ContextStyle: TypeAlias = Literal["openai", "vllm", "llamacpp", "anthropic", "ollama"]
"""Whose wording :meth:`HttpError.context_overflow` uses."""

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_RESERVED = ("content-length", "transfer-encoding", "connection")
_OTHER_RESET = 0.02
"""Seconds until the limit that did not run out refills, in the rate-limit headers that name two limits."""


class ScriptedReply(Message, frozen=True, kw_only=True):
    """Fault modifiers shared by every scripted reply (the base of :data:`Reply`)."""

    latency: float = 0.0
    """Seconds the server waits before it sends the status line."""
    stall_after_chunks: int | None = None
    """After this many body chunks, stop sending for ``stall_seconds`` (then carry on)."""
    stall_seconds: float = 0.0
    cut_after_chunks: int | None = None
    """After this many body chunks, close the connection without finishing the response:
    no ``[DONE]``, no final chunk of the chunked encoding (when N is at least the number of
    chunks, the body is complete but its chunked encoding is not ended)."""
    silent_after_chunks: int | None = None
    """After this many body chunks, send nothing more and never end the response: the
    connection stays open until the client closes it or the server stops (a stream that
    hangs; a client needs its own read timeout). N at least the number of chunks, as for a cut."""

    def __post_init__(self) -> None:
        for name in ("latency", "stall_seconds"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                msg = f"{type(self).__name__}.{name} must be a finite number of seconds >= 0, not {value!r}"
                raise UsageError(msg)
        for name in ("stall_after_chunks", "cut_after_chunks", "silent_after_chunks"):
            count = getattr(self, name)
            if count is not None and count < 0:
                msg = f"{type(self).__name__}.{name} must be >= 0 or None, not {count!r}"
                raise UsageError(msg)


class TextReply(ScriptedReply, frozen=True, kw_only=True):
    """An assistant message with text."""

    content: str
    reasoning: str | None = None
    """The model's reasoning: sent as ``reasoning_content`` (deltas), or inside ``<think>``
    at the start of the content when ``think`` is true."""
    think: bool = False
    reasoning_details: tuple[Any, ...] = ()
    """OpenRouter-style ``reasoning_details`` objects: each streamed in a delta of its own, in
    order (script a block's fragments as a provider streams them); a whole reply lists them all."""
    finish_reason: Literal["stop", "length", "content_filter"] = "stop"
    """"length": the reply was cut by the token limit (``content`` is what came before the cut)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.finish_reason not in ("stop", "length", "content_filter"):
            msg = f"TextReply.finish_reason must be 'stop', 'length' or 'content_filter', not {self.finish_reason!r}"
            raise UsageError(msg)


class ScriptedCall(Message, frozen=True, kw_only=True):
    """One function call in a :class:`ToolCallsReply`."""

    name: str
    arguments: str
    """Raw text sent as the call's arguments: malformed JSON is simply a malformed string."""
    id: str | None = None
    """The call id; None derives one from the server's seed."""


class ToolCallsReply(ScriptedReply, frozen=True, kw_only=True):
    """An assistant message that calls tools (``finish_reason`` "tool_calls")."""

    calls: tuple[ScriptedCall, ...]
    content: str | None = None
    reasoning: str | None = None
    """As :attr:`TextReply.reasoning`."""
    think: bool = False
    reasoning_details: tuple[Any, ...] = ()
    """As :attr:`TextReply.reasoning_details`."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.calls:
            msg = "ToolCallsReply needs at least one ScriptedCall; script a TextReply for a plain answer"
            raise UsageError(msg)


class ClockHeader(Message, frozen=True, kw_only=True):
    """A response header whose value is a moment: the server's clock plus ``seconds``, when sent."""

    name: str
    seconds: float
    format: Literal["http-date", "rfc3339", "unix", "unix-ms"]
    """``http-date`` (``Tue, 14 Nov 2023 22:13:20 GMT``), ``rfc3339`` (``2023-11-14T22:13:20Z``),
    ``unix`` seconds or ``unix-ms`` milliseconds; the first three round up to the second."""

    def __post_init__(self) -> None:
        _check_header(self.name, "")
        if not math.isfinite(self.seconds):
            msg = f"ClockHeader.seconds must be a finite number, not {self.seconds!r}"
            raise UsageError(msg)
        if self.format not in ("http-date", "rfc3339", "unix", "unix-ms"):
            msg = f"ClockHeader.format must be 'http-date', 'rfc3339', 'unix' or 'unix-ms', not {self.format!r}"
            raise UsageError(msg)


class HttpError(ScriptedReply, frozen=True, kw_only=True):
    """An HTTP error, by default with an OpenAI-shaped body ``{"error": {"message", "type", "param", "code"}}``."""

    status: int
    message: str
    """The error's text; with ``body`` set, only a label for reports."""
    code: str | None = None
    error_type: str | None = None
    """The body's ``error.type``; None picks the usual one for the status."""
    param: str | None = None
    """The body's ``error.param``: the request field at fault."""
    retry_after: float | None = None
    """Seconds sent in a ``Retry-After`` header (429 and 503 use it)."""
    headers: tuple[tuple[str, str], ...] = ()
    """More response headers; one named like a header the server would send replaces it."""
    clock_headers: tuple[ClockHeader, ...] = ()
    """Headers written from the server's clock when sent; they replace same-named ones too."""
    body: str | None = None
    """The body sent as is instead of the OpenAI-shaped one (JSON unless ``headers`` set a content-type)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 400 <= self.status <= 599:
            msg = f"HttpError.status must be a 4xx or 5xx status, not {self.status}"
            raise UsageError(msg)
        if self.retry_after is not None and not (self.retry_after >= 0 and math.isfinite(self.retry_after)):
            msg = f"HttpError.retry_after must be a finite number of seconds >= 0 or None, not {self.retry_after!r}"
            raise UsageError(msg)
        for pair in self.headers:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                msg = f"HttpError.headers holds (name, value) pairs, not {pair!r}"
                raise UsageError(msg)
            _check_header(*pair)

    @classmethod
    def context_length_exceeded(cls, *, limit: int = 8192) -> HttpError:
        """The 400 a provider answers when the messages do not fit the model's context."""
        return cls(
            status=400,
            code="context_length_exceeded",
            message=(
                f"This model's maximum context length is {limit} tokens. However, your messages "
                "resulted in more tokens than that. Please reduce the length of the messages."
            ),
        )

    @classmethod
    def rate_limited(
        cls, *, seconds: float = 30.0, spelling: RateLimitSpelling = "retry-after", exhausted: Literal["requests", "tokens"] = "requests"
    ) -> HttpError:
        """A 429 whose reset hint, ``seconds`` from now, is in one provider's spelling.

        Each spelling sends only its own hint, so a test pins which one a client reads
        (real providers often add ``retry-after`` too; add it with ``msgspec.structs.replace``):
        ``retry-after`` seconds; ``http-date``, ``retry-after`` as an HTTP-date;
        ``retry-after-ms``; ``openai``, ``x-ratelimit-reset-requests`` / ``-tokens`` as
        durations (``1m30s``) with ``x-ratelimit-limit-*`` and ``x-ratelimit-remaining-*``;
        ``anthropic``, ``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}``
        (RFC 3339) and Anthropic's error body; ``openrouter``, ``x-ratelimit-reset`` in unix
        milliseconds with OpenRouter's body; ``none``, no hint at all.

        Args:
            exhausted: The limit that ran out, for the spellings that count two (``openai``,
                ``anthropic``): its remaining is 0 and it resets in ``seconds``; the other
                has room left and refills in 20 ms.
        """
        if not (seconds >= 0 and math.isfinite(seconds)):
            msg = f"HttpError.rate_limited(seconds=...) must be a finite number of seconds >= 0, not {seconds!r}"
            raise UsageError(msg)
        _check_choice("rate_limited", "spelling", spelling, get_args(RateLimitSpelling))
        _check_choice("rate_limited", "exhausted", exhausted, ("requests", "tokens"))
        message = "Rate limit exceeded: too many requests. Please retry later."
        if spelling == "retry-after":
            return cls(status=429, code="rate_limit_exceeded", message=message, retry_after=seconds)
        if spelling == "http-date":
            return cls(
                status=429, code="rate_limit_exceeded", message=message, clock_headers=(ClockHeader(name="retry-after", seconds=seconds, format="http-date"),)
            )
        if spelling == "retry-after-ms":
            return cls(status=429, code="rate_limit_exceeded", message=message, headers=(("retry-after-ms", str(round(seconds * 1000))),))
        if spelling == "openai":
            counts = {
                "requests": (500, "requests per min (RPM)", "Used 500, Requested 1"),
                "tokens": (30000, "tokens per min (TPM)", "Used 29760, Requested 1200"),
            }
            headers: list[tuple[str, str]] = []
            for name, (allowed, _, _) in counts.items():
                out = name == exhausted
                headers += [
                    (f"x-ratelimit-limit-{name}", str(allowed)),
                    (f"x-ratelimit-remaining-{name}", "0" if out else str(allowed * 19 // 20)),
                    (f"x-ratelimit-reset-{name}", _go_duration(seconds if out else _OTHER_RESET)),
                ]
            allowed, per, used = counts[exhausted]
            text = f"Rate limit reached in organization org-test on {per}: Limit {allowed}, {used}. Please try again in {_go_duration(seconds)}."
            return cls(status=429, code="rate_limit_exceeded", error_type=exhausted, message=text, headers=tuple(headers))
        if spelling == "anthropic":
            counts_a = {"requests": 50, "tokens": 40000}
            static: list[tuple[str, str]] = []
            dated: list[ClockHeader] = []
            for name, allowed in counts_a.items():
                out = name == exhausted
                static += [
                    (f"anthropic-ratelimit-{name}-limit", str(allowed)),
                    (f"anthropic-ratelimit-{name}-remaining", "0" if out else str(allowed * 19 // 20)),
                ]
                dated.append(ClockHeader(name=f"anthropic-ratelimit-{name}-reset", seconds=seconds if out else _OTHER_RESET, format="rfc3339"))
            text = f"This request would exceed your organization's rate limit of {counts_a[exhausted]:,} {exhausted} per minute. Please wait and try again."
            return cls(status=429, message=text, headers=tuple(static), clock_headers=tuple(dated), body=_anthropic_body("rate_limit_error", text))
        if spelling == "openrouter":
            text = "Rate limit exceeded: free-models-per-min."
            return cls(
                status=429,
                message=text,
                headers=(("x-ratelimit-limit", "20"), ("x-ratelimit-remaining", "0")),
                clock_headers=(ClockHeader(name="x-ratelimit-reset", seconds=seconds, format="unix-ms"),),
                body=_json({"error": {"code": 429, "message": text}}),
            )
        return cls(status=429, code="rate_limit_exceeded", message=message)

    @classmethod
    def insufficient_credits(cls) -> HttpError:
        """OpenRouter's 402: the account or key has no credit left (not worth a retry)."""
        text = "Insufficient credits. Add more using https://openrouter.ai/credits"
        return cls(status=402, message=text, body=_json({"error": {"code": 402, "message": text}}))

    @classmethod
    def insufficient_quota(cls) -> HttpError:
        """OpenAI's 429 for a spent quota: a 429 that waiting does not cure."""
        text = "You exceeded your current quota, please check your plan and billing details."
        return cls(status=429, code="insufficient_quota", error_type="insufficient_quota", message=text)

    @classmethod
    def invalid_api_key(cls, key: str | None = None) -> HttpError:
        """OpenAI's 401 for a wrong or revoked key; ``key`` is shown masked, as OpenAI does."""
        shown = f": {key[:3]}{'*' * 6}{key[-4:]}" if key and len(key) > 8 else ""
        text = f"Incorrect API key provided{shown}. You can find your API key at https://platform.openai.com/account/api-keys."
        return cls(status=401, code="invalid_api_key", error_type="invalid_request_error", message=text)

    @classmethod
    def overloaded(cls, *, status: Literal[503, 529] = 529, retry_after: float | None = None) -> HttpError:
        """529: Anthropic's ``overloaded_error``; 503: an overloaded OpenAI-compatible server."""
        _check_choice("overloaded", "status", status, (503, 529))
        if status == 503:
            return cls(status=503, message="The engine is currently overloaded, please try again later.", retry_after=retry_after)
        return cls(status=529, message="Overloaded", retry_after=retry_after, body=_anthropic_body("overloaded_error", "Overloaded"))

    @classmethod
    def context_overflow(cls, *, style: ContextStyle = "openai", limit: int = 4096, prompt_tokens: int = 5000, max_tokens: int = 0) -> HttpError:
        """The 400 for a request larger than the context, in the wording of ``style``'s server.

        ``openai`` (``context_length_exceeded``), ``vllm`` (its ``{"object": "error"}`` body),
        ``llamacpp`` (``exceed_context_size_error`` with ``n_prompt_tokens`` / ``n_ctx``),
        ``anthropic`` (``prompt is too long: N tokens > M maximum``), ``ollama``
        (``{"error": "..."}``). ``max_tokens``: the completion the request asked room for.
        """
        _check_choice("context_overflow", "style", style, get_args(ContextStyle))
        for name, value in (("limit", limit), ("prompt_tokens", prompt_tokens), ("max_tokens", max_tokens)):
            if value < (1 if name == "limit" else 0):
                msg = f"HttpError.context_overflow({name}=...) must be a whole number of tokens >= {1 if name == 'limit' else 0}, not {value!r}"
                raise UsageError(msg)
        total = prompt_tokens + max_tokens
        requested = (
            f"However, you requested {total} tokens ({prompt_tokens} in the messages, {max_tokens} in the completion). "
            "Please reduce the length of the messages or completion."
        )
        if style == "openai":
            if not max_tokens:
                requested = f"However, your messages resulted in {prompt_tokens} tokens. Please reduce the length of the messages."
            text = f"This model's maximum context length is {limit} tokens. {requested}"
            return cls(status=400, code="context_length_exceeded", param="messages", message=text)
        if style == "vllm":
            text = f"This model's maximum context length is {limit} tokens. {requested}"
            return cls(status=400, message=text, body=_json({"object": "error", "message": text, "type": "BadRequestError", "param": None, "code": 400}))
        if style == "llamacpp":
            text = "the request exceeds the available context size, try increasing it"
            error = {"code": 400, "message": text, "type": "exceed_context_size_error", "n_prompt_tokens": prompt_tokens, "n_ctx": limit}
            return cls(status=400, message=text, body=_json({"error": error}))
        if style == "anthropic":
            text = f"prompt is too long: {prompt_tokens} tokens > {limit} maximum"
            return cls(status=400, message=text, body=_anthropic_body("invalid_request_error", text))
        text = "the input length exceeds the context length"
        return cls(status=400, message=text, body=_json({"error": text}))

    @classmethod
    def model_not_found(cls, model: str = "no-such-model") -> HttpError:
        """OpenAI's 404 for a model that does not exist or that the key may not use."""
        text = f"The model `{model}` does not exist or you do not have access to it."
        return cls(status=404, code="model_not_found", error_type="invalid_request_error", message=text)

    @classmethod
    def unsupported_parameter(cls, param: str = "max_tokens", *, instead: str | None = "max_completion_tokens") -> HttpError:
        """OpenAI's 400 for a request field the model does not take (``instead``: what it takes)."""
        text = f"Unsupported parameter: '{param}' is not supported with this model." + (f" Use '{instead}' instead." if instead else "")
        return cls(status=400, code="unsupported_parameter", param=param, message=text)

    @classmethod
    def streaming_unsupported(cls) -> HttpError:
        """The 400 of an OpenAI-compatible endpoint that cannot stream (``ModelServer(refuse_stream=True)``)."""
        text = "Streaming is not supported by this endpoint: send 'stream': false (or leave it out)."
        return cls(status=400, code="unsupported_value", param="stream", message=text)


Reply: TypeAlias = TextReply | ToolCallsReply | HttpError
"""Anything a script may hold."""


class RecordedRequest(Message, frozen=True, kw_only=True):
    """One request the server received, in arrival order, for assertions."""

    session: str | None
    """The ``X-Hermes-Session-Id`` header, None when absent."""
    method: str
    path: str
    """The path without the query string, e.g. ``/v1/chat/completions``."""
    body: Any
    """The parsed JSON body; None when there was no body or it was not JSON."""
    connection: int
    """Which TCP connection carried it (counts from 1): equal numbers mean keep-alive reuse."""
    api_key: str | None = None
    """The key of an ``Authorization: Bearer <key>`` header, None when absent or another scheme."""
    prompt_tokens: int | None = None
    """The server's own token count of a chat completion (the rule in ``_server``'s module
    docstring), with or without a context window; None for other requests and bodies
    without a ``messages`` list."""
    raw_body: bytes = b""
    """The body's bytes as they arrived (to check that something was sent back byte for byte)."""


def _go_duration(seconds: float) -> str:
    """``seconds`` written as a Go duration, OpenAI's reset spelling: ``1m30s``, ``6m0s``, ``7.5s``, ``20ms``."""
    if seconds < 1:
        return _trim(seconds * 1000) + "ms" if seconds > 0 else "0s"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = _trim(secs) + "s"
    if hours or minutes:
        text = f"{int(minutes)}m" + text
    return f"{int(hours)}h" + text if hours else text


def _trim(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _anthropic_body(error_type: str, message: str) -> str:
    return _json({"type": "error", "error": {"type": error_type, "message": message}})


def _check_header(name: object, value: object) -> None:
    if not (isinstance(name, str) and _TOKEN.fullmatch(name)):
        msg = f"a scripted header name must be an HTTP token such as 'retry-after', not {name!r}"
        raise UsageError(msg)
    if name.lower() in _RESERVED:
        msg = f"the server sets the {name!r} header itself; it cannot be scripted"
        raise UsageError(msg)
    if not (isinstance(value, str) and value == value.strip() and all(" " <= c <= "~" or c == "\t" for c in value)):
        msg = f"the scripted header {name!r} needs a printable ASCII value without surrounding spaces, not {value!r}"
        raise UsageError(msg)


def _check_choice(method: str, name: str, value: object, choices: tuple[object, ...]) -> None:
    if value not in choices:
        msg = f"HttpError.{method}({name}=...) must be one of {', '.join(map(repr, choices))}, not {value!r}"
        raise UsageError(msg)
