"""Token accounting: how big a request is, how that guess is corrected, and how big the window is.

Pure: no I/O and no clock, so the turn machine can call every function here while planning.

No exact tokenizer. None works offline here: tiktoken fetches its encoding files on first use,
and the models behind one endpoint come from many families with different vocabularies anyway.
So a request is measured in characters (:class:`RequestSize`) and turned into tokens with a
chars-per-token ratio (:class:`TokenRatio`, 4 to start, the usual figure for English text),
plus a fixed cost per message, per tool call and per image. Each reply's ``usage.prompt_tokens``
corrects the ratio (:func:`calibrate`), so the estimate learns the model's real density.

The window comes from, in order: ``model.context_length`` in the config, the endpoint's
``/v1/models`` entry (:func:`metadata_context_length`), a table of well-known model families
(:func:`known_context_window`), else :data:`DEFAULT_CONTEXT_WINDOW`. Compression starts at
:func:`threshold` tokens, half the window by default, as Hermes does.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

import msgspec

from actors import UsageError
from protocols import ChatMessage

DEFAULT_CHARS_PER_TOKEN = 4.0
MIN_CHARS_PER_TOKEN = 1.0
"""Chinese or Japanese text runs near one character per token (base64 and minified code near 2)."""
MAX_CHARS_PER_TOKEN = 8.0
"""Repetitive ASCII (indentation, long English words) stays well under 8 characters per token."""
MESSAGE_OVERHEAD = 4
"""Tokens per message for the role and the chat template's separators."""
TOOL_CALL_OVERHEAD = 8
"""Tokens per tool call for its ``type`` / ``function`` wrapper and the template around it."""
IMAGE_TOKENS = 765
"""Tokens per image: OpenAI's price of a 1024×1024 high-detail image (4 tiles × 170 + 85)."""
SMOOTHING = 0.25
"""Weight of the newest reply in the ratio's moving average (a plain mean for the first four)."""
MIN_CALIBRATION_CHARS = 200
"""Smaller requests are ignored by :func:`calibrate`: the fixed costs, a guess, dominate them."""
_PLAUSIBLE = (0.5, 32.0)
"""An observed ratio outside this band is a wrong report (cached tokens left out, another request), not data."""
DEFAULT_CONTEXT_WINDOW = 128_000
"""An unknown model's window, as most current models offer: if the real one is smaller, the overflow error compresses."""
THRESHOLD_RATIO = 0.50
"""Compression starts when a request would fill this share of the window (Hermes's default)."""


class TokenRatio(msgspec.Struct, frozen=True, kw_only=True):
    """The chars-per-token ratio learned from replies.

    Invariant: ``MIN_CHARS_PER_TOKEN <= chars_per_token <= MAX_CHARS_PER_TOKEN`` and ``samples >= 0``.
    """

    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN
    samples: int = 0
    """How many replies have corrected the ratio (the first few weigh more; see :data:`SMOOTHING`)."""

    def __post_init__(self) -> None:
        if not MIN_CHARS_PER_TOKEN <= self.chars_per_token <= MAX_CHARS_PER_TOKEN or self.samples < 0:
            raise UsageError(f"TokenRatio({self.chars_per_token}, samples={self.samples}) is out of range: chars_per_token must be within 1–8, samples >= 0.")


class RequestSize(msgspec.Struct, frozen=True, kw_only=True):
    """What a request weighs before the ratio applies. Invariant: both fields are >= 0."""

    chars: int
    """Characters of text that scale with the ratio (contents, arguments, tool schemas)."""
    fixed: int
    """Tokens that do not: per-message and per-call overheads, images."""

    def tokens(self, ratio: TokenRatio) -> int:
        """The estimated token count: ``ceil(chars / ratio) + fixed``."""
        return math.ceil(self.chars / ratio.chars_per_token) + self.fixed


_START = TokenRatio()


def message_size(message: ChatMessage) -> RequestSize:
    """The size of one message as sent.

    Reasoning counts even though not every provider is sent it back: an estimate a little high
    compresses a little early, one too low overflows. Image URLs do not count (a ``data:`` URL is
    not read as text); each image costs :data:`IMAGE_TOKENS` instead.
    """
    chars, fixed = _sized(message)
    return RequestSize(chars=chars, fixed=fixed)


def _sized(message: ChatMessage) -> tuple[int, int]:
    """(chars, fixed) of :func:`message_size`, without generators or a struct: the planner calls
    this for every message of a transcript several times a pass (bench_compression.py)."""
    chars = 0
    for text in (message.content, message.reasoning, message.name, message.tool_call_id):
        if text:
            chars += len(text)
    calls = message.tool_calls
    for call in calls:
        chars += len(call.id) + len(call.name) + len(call.arguments)
    return chars, MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD * len(calls) + IMAGE_TOKENS * len(message.images)


def tools_size(tools: Sequence[Mapping[str, object]]) -> RequestSize:
    """The size of the tool schemas (the ``tools`` list of the request), as compact JSON."""
    chars = sum(len(json.dumps(tool, ensure_ascii=False, separators=(",", ":"), default=str)) for tool in tools)
    return RequestSize(chars=chars, fixed=0)


def request_size(messages: Iterable[ChatMessage], tools: Sequence[Mapping[str, object]] = ()) -> RequestSize:
    """The size of a whole request: every message plus the tool schemas."""
    sizes = [tools_size(tools), *(message_size(message) for message in messages)]
    return RequestSize(chars=sum(size.chars for size in sizes), fixed=sum(size.fixed for size in sizes))


def message_tokens(message: ChatMessage, ratio: TokenRatio = _START) -> int:
    """Estimated tokens of one message (at least :data:`MESSAGE_OVERHEAD`)."""
    chars, fixed = _sized(message)
    return math.ceil(chars / ratio.chars_per_token) + fixed


def token_estimator(ratio: TokenRatio = _START) -> Callable[[ChatMessage], int]:
    """:func:`message_tokens` at one ratio, as a function of the message alone: what the planner
    calls for every message of a transcript (inlined, without the tuple and the ratio lookups)."""
    per_token = ratio.chars_per_token
    ceil = math.ceil

    def estimate(message: ChatMessage) -> int:
        chars = 0
        text = message.content
        if text:
            chars = len(text)
        text = message.reasoning
        if text:
            chars += len(text)
        text = message.name
        if text:
            chars += len(text)
        text = message.tool_call_id
        if text:
            chars += len(text)
        fixed = MESSAGE_OVERHEAD
        calls = message.tool_calls
        if calls:
            for call in calls:
                chars += len(call.id) + len(call.name) + len(call.arguments)
            fixed += TOOL_CALL_OVERHEAD * len(calls)
        if message.images:
            fixed += IMAGE_TOKENS * len(message.images)
        return ceil(chars / per_token) + fixed

    return estimate


def estimate_tokens(messages: Iterable[ChatMessage], tools: Sequence[Mapping[str, object]] = (), ratio: TokenRatio = _START) -> int:
    """Estimated prompt tokens of a request: never falls when any content grows."""
    return request_size(messages, tools).tokens(ratio)


def calibrate(ratio: TokenRatio, sent: RequestSize, prompt_tokens: int) -> TokenRatio:
    """The ratio corrected by one reply's reported prompt tokens.

    Args:
        ratio: the current ratio.
        sent: the size of what was sent (:func:`request_size` of that request).
        prompt_tokens: the provider's count, cached tokens included (Anthropic counts cache
            reads and writes apart from ``input_tokens``: add them first).

    The observed ratio is ``sent.chars / (prompt_tokens - sent.fixed)``, clamped to
    1–8 and blended in: a plain mean over the first replies, then a moving average with
    weight :data:`SMOOTHING`. A report of 0, one no larger than the fixed costs, a request
    under :data:`MIN_CALIBRATION_CHARS` or an implausible ratio leaves ``ratio`` unchanged.
    """
    text_tokens = prompt_tokens - sent.fixed
    if sent.chars < MIN_CALIBRATION_CHARS or text_tokens <= 0:
        return ratio
    observed = sent.chars / text_tokens
    if not _PLAUSIBLE[0] <= observed <= _PLAUSIBLE[1]:
        return ratio
    observed = min(max(observed, MIN_CHARS_PER_TOKEN), MAX_CHARS_PER_TOKEN)
    weight = max(SMOOTHING, 1 / (ratio.samples + 1))
    blended = ratio.chars_per_token + weight * (observed - ratio.chars_per_token)
    # Invariant kept despite float rounding: the result stays within the clamp.
    return TokenRatio(chars_per_token=min(max(blended, MIN_CHARS_PER_TOKEN), MAX_CHARS_PER_TOKEN), samples=ratio.samples + 1)


def relative_error(estimated: int, reported: int) -> float:
    """``(estimated - reported) / reported``: positive when the estimate is too high."""
    if reported <= 0:
        raise UsageError(f"relative_error needs a reported token count above 0, got {reported}.")
    return (estimated - reported) / reported


# Well-known windows, first match wins, so the specific spellings come before their family.
# A pattern matches the normalised name (see _normalise) with no letter or digit either side.
_KNOWN: tuple[tuple[str, int], ...] = (
    # OpenAI
    (r"gpt-5", 400_000),
    (r"gpt-4-1", 1_047_576),  # gpt-4.1, -mini, -nano
    (r"(?:chat)?gpt-4o", 128_000),  # gpt-4o, gpt-4o-mini, chatgpt-4o-latest
    (r"gpt-4-5|gpt-4-turbo|gpt-4-1106|gpt-4-0125", 128_000),
    (r"gpt-4-32k", 32_768),
    (r"gpt-4", 8_192),
    (r"gpt-3-5-turbo", 16_385),
    (r"o1-mini|o1-preview", 128_000),
    (r"o[134]", 200_000),  # o1, o3, o3-mini, o4-mini, and their -pro
    # Anthropic: every Claude from 3 on (3, 3.5, 3.7, 4, 4.x)
    (r"claude", 200_000),
    # Google
    (r"gemini-1-5-pro", 2_097_152),
    (r"gemini-1-0|gemini-pro", 32_768),
    (r"gemini", 1_048_576),  # 1.5 Flash, 2.0, 2.5
    # Meta
    (r"llama-?3-[123]", 131_072),
    (r"llama-?3", 8_192),
    # Alibaba: the native windows, without YaRN scaling
    (r"qwen-?3-coder", 262_144),
    (r"qwen-?2-5|qwen-?3", 32_768),
    # Mistral
    (r"codestral", 262_144),
    (r"mistral-large|mistral-medium|mistral-nemo|pixtral", 131_072),
    (r"mixtral-8x22b", 65_536),
    (r"mistral|mixtral", 32_768),  # Mistral 7B v0.2+, Mixtral 8x7B, Mistral Small 3
    # DeepSeek: the official API's window (V3, R1 and later)
    (r"deepseek", 128_000),
)
_KNOWN_COMPILED = tuple((re.compile(rf"(?<![a-z0-9])(?:{pattern})(?![a-z0-9])"), window) for pattern, window in _KNOWN)
_SEPARATORS = re.compile(r"[\s._:]+")
_METADATA_KEYS = ("context_length", "context_window", "max_model_len", "max_context_length")
_MAX_PLAUSIBLE_WINDOW = 100_000_000


def _normalise(model: str) -> str:
    """``openrouter/anthropic/Claude-3.5-Sonnet:beta`` → ``claude-3-5-sonnet-beta``: the last path
    part, lower case, with dots, underscores, colons and spaces as dashes."""
    return _SEPARATORS.sub("-", model.rsplit("/", 1)[-1].lower())


def known_context_window(model: str) -> int | None:
    """The window of a well-known model family matched by name, or None if none matches."""
    name = _normalise(model)
    for pattern, window in _KNOWN_COMPILED:
        if pattern.search(name):
            return window
    return None


def metadata_context_length(entry: Mapping[str, object]) -> int | None:
    """The context length in one ``/v1/models`` entry, or None when absent or invalid.

    Read from ``context_length`` (OpenRouter, many gateways), ``context_window``,
    ``max_model_len`` (vLLM), ``max_context_length`` (LM Studio), then OpenRouter's
    ``top_provider.context_length``. Valid: a positive whole number (an int, an integral float
    or a string of digits) up to 100 million; booleans are not numbers here.
    """
    top = entry.get("top_provider")
    candidates = [entry.get(key) for key in _METADATA_KEYS]
    if isinstance(top, Mapping):
        candidates.append(top.get("context_length"))
    for value in candidates:
        number = _whole_number(value)
        if number is not None:
            return number
    return None


def _whole_number(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and 0 < value <= _MAX_PLAUSIBLE_WINDOW:
        return value
    return None


def context_window(model: str, *, configured: int | None, metadata: int | None) -> int:
    """The model's context window in tokens (always >= 1).

    Args:
        model: the model name as configured (provider prefixes such as ``anthropic/`` are fine).
        configured: ``model.context_length`` from the config; wins when given.
        metadata: what the endpoint's ``/v1/models`` reported (:func:`metadata_context_length`).

    A value below 1 counts as absent. Then the table (:func:`known_context_window`), then
    :data:`DEFAULT_CONTEXT_WINDOW`.
    """
    for given in (configured, metadata):
        if given is not None and given > 0:
            return given
    known = known_context_window(model)
    return DEFAULT_CONTEXT_WINDOW if known is None else known


def threshold(window: int, ratio: float = THRESHOLD_RATIO) -> int:
    """The prompt size in tokens at which compression starts: ``floor(window × ratio)``, at least 1.

    The seeds give no floor beyond this; a window too small for the protected head and tail is
    the compressor's concern, not this function's.
    """
    if window < 1 or not 0 < ratio <= 1:
        raise UsageError(f"threshold needs a window >= 1 and a ratio within (0, 1], got window={window}, ratio={ratio}.")
    return max(1, math.floor(window * ratio))
