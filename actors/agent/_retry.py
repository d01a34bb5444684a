"""Model errors: read the provider's error body, classify the failure, say what to do.

Pure: no clock, no randomness. The jitter is derived from a key (turn id and attempt),
so a replayed run waits exactly as long as the original did.

Classification is layered (seed 000 §8.1): the HTTP status decides first, and a status that
is ambiguous lets the provider's error code or type refine it, then the message's wording;
no status at all means a transport failure unless the code or wording says otherwise. Each
status may be refined only into the kinds listed for it in ``_STATUSES``, so wording can never
turn a 503 into a billing problem or a 429 into a bad request.

Every kind maps to one :data:`Action`, what the caller does next:

- ``retry``: the same key again after a backoff (the fault is passing or on the provider's side);
- ``rotate``: the key is benched for :attr:`ModelError.key_cooldown` seconds; another key of
  the pool may serve, and when none can, a fallback provider;
- ``fallback``: no key of this provider can serve this request (the model is unknown);
- ``compress``: the request must shrink (context compression is a later issue; until then
  the turn fails with advice);
- ``fail``: nothing automatic helps; the turn fails and :meth:`ModelError.describe` says why.
"""

from __future__ import annotations

import dataclasses
import re
import zlib
from typing import Any, Literal

import msgspec

ErrorKind = Literal[
    "auth",
    "auth_permanent",
    "billing",
    "rate_limit",
    "overloaded",
    "server",
    "timeout",
    "transport",
    "context_overflow",
    "payload_too_large",
    "model_not_found",
    "content_filter",
    "bad_request",
    "malformed",
    "thinking_signature",
]
Action = Literal["retry", "rotate", "fallback", "compress", "fail"]

ACTIONS: dict[ErrorKind, Action] = {
    "overloaded": "retry",
    "server": "retry",
    "timeout": "retry",
    "transport": "retry",
    "malformed": "retry",
    "thinking_signature": "retry",
    "auth": "rotate",
    "auth_permanent": "rotate",
    "billing": "rotate",
    "rate_limit": "rotate",
    "model_not_found": "fallback",
    "context_overflow": "compress",
    "payload_too_large": "compress",
    "bad_request": "fail",
    "content_filter": "fail",
}
"""What to do about each kind (the table is the whole policy; the machine only reads it)."""

KEY_COOLDOWNS: dict[ErrorKind, float] = {
    "auth": 300.0,  # out until the keys are reloaded, or five minutes
    "auth_permanent": 86_400.0,  # revoked or invalid: a day is "until someone changes it"
    "billing": 3_600.0,
    "rate_limit": 60.0,  # when the headers did not say when the limit resets
}
"""Seconds a key is benched after a failure that is the key's fault."""

RATE_LIMIT_COOLDOWN = KEY_COOLDOWNS["rate_limit"]
RATE_LIMIT_BOUNDS = (1.0, 3_600.0)
"""A rate limit's reset hint is kept within these seconds: a hint of 0 would have the key
granted again at once (calls in a tight loop against a provider that just refused them),
and a reset header a year ahead (a provider's bug or a clock gone wrong) would bench the
key until a restart."""

_ADVICE: dict[ErrorKind, str] = {
    "auth": "the provider refused the API key; check OPENAI_API_KEY (or model.api_key in config.yaml)",
    "auth_permanent": "the provider says the API key is invalid, revoked or deactivated; put a valid key in OPENAI_API_KEY (or model.api_key in config.yaml)",
    "billing": "the provider's account is out of credit or quota; add credit or raise the key's limit, or use another key",
    "rate_limit": "rate limited by the provider",
    "overloaded": "the provider is overloaded",
    "server": "the provider had an internal error",
    "timeout": "the model did not answer in time",
    "transport": "the connection to the provider failed",
    "context_overflow": "the conversation is longer than the model's context window and compression could not make room; start a new session or set compression in config.yaml",
    "payload_too_large": "the request is larger than the provider accepts; send smaller attachments or start a new session",
    "model_not_found": "the provider does not know this model (or the URL is wrong); check model.default and model.base_url",
    "content_filter": "the provider's content filter refused the request; rephrase the message",
    "bad_request": "the provider rejected the request",
    "malformed": "the provider sent a reply that could not be read",
    "thinking_signature": "the provider rejected the signature of a thinking block from an earlier reply",
}

# -- what providers say ---------------------------------------------------------------------------

_CODES: dict[str, ErrorKind] = {
    # OpenAI / OpenRouter / Azure codes, Anthropic / llama.cpp types, Google statuses (lower case).
    "context_length_exceeded": "context_overflow",
    "exceed_context_size_error": "context_overflow",
    "request_too_large": "payload_too_large",
    "insufficient_quota": "billing",
    "billing_hard_limit_reached": "billing",
    "billing_not_active": "billing",
    "billing_error": "billing",
    "insufficient_balance": "billing",
    "payment_required": "billing",
    "rate_limit_exceeded": "rate_limit",
    "rate_limit_error": "rate_limit",
    "resource_exhausted": "rate_limit",
    "overloaded_error": "overloaded",
    "unavailable_error": "overloaded",
    "unavailable": "overloaded",
    "invalid_api_key": "auth_permanent",
    "account_deactivated": "auth_permanent",
    "api_key_invalid": "auth_permanent",
    "authentication_error": "auth",
    "unauthenticated": "auth",
    "permission_error": "auth",
    "permission_denied": "auth",
    "model_not_found": "model_not_found",
    "not_found_error": "model_not_found",
    "content_filter": "content_filter",
    "content_policy_violation": "content_filter",
    "unsupported_parameter": "bad_request",
    "unknown_parameter": "bad_request",
    "unsupported_value": "bad_request",
    "server_error": "server",
    "api_error": "server",
    "internal": "server",
    "timeout_error": "timeout",
    "deadline_exceeded": "timeout",
}

_GENERIC = frozenset({"server_error", "api_error", "internal", "authentication_error", "unauthenticated", "permission_error", "permission_denied"})
"""Codes that only restate a status class: they refine a status that says less (none at all, a
bare 400), but when they merely confirm it the wording still decides (a 500 ``server_error``
reading "context shift is disabled" is an overflow; Anthropic's ``authentication_error`` covers
a mistyped key and a revoked one alike)."""

# Checked in this order: the first match wins (signature before context, billing before rate).
_PHRASES: tuple[tuple[ErrorKind, str], ...] = (
    ("thinking_signature", r"signature[\s\S]*thinking|thinking[\s\S]*signature"),
    (
        "context_overflow",
        r"context[ _-]?(?:length|window|size|limit)|maximum model length|prompt is too long|context shift is disabled"
        r"|too many tokens|maximum number of tokens|reduce the length of the (?:messages|prompt)",
    ),
    (
        "model_not_found",
        r"\bmodel\b[\s\S]{0,80}?(?:does not exist|not found|not exist)|is not a valid model(?: id)?|no such model|unknown model"
        r"|no endpoints found",
    ),
    ("content_filter", r"content[ _-]?(?:filter|policy|management policy)|\bflagged\b|safety system|moderation"),
    (
        "billing",
        r"insufficient[ _-]?(?:quota|credits?|balance|funds)|credit balance is too low|exceeded your current quota|\bkey limit"
        r"|requires more credits|out of credits|billing[ _-]hard[ _-]limit|payment required",
    ),
    (
        "auth_permanent",
        r"\brevoked\b|\bdeactivated\b|invalid[ _-]?(?:x-)?api[ _-]?key|incorrect api key|api key not valid|api_key_invalid",
    ),
    ("rate_limit", r"rate[ _-]?limit|too many requests"),
    ("overloaded", r"overloaded|over capacity"),
    ("auth", r"unauthori[sz]ed|authentication|no auth credentials|missing (?:an )?api key|token (?:has )?expired"),
    ("payload_too_large", r"payload too large|request entity too large|request too large"),
    ("bad_request", r"unsupported parameter|unrecognized request argument|unknown parameter|extra inputs are not permitted"),
    ("timeout", r"timed out|\btimeout\b"),
)
_WORDING = tuple((kind, re.compile(pattern)) for kind, pattern in _PHRASES)

_ANY: frozenset[ErrorKind] = frozenset(ACTIONS)
_CLIENT: frozenset[ErrorKind] = _ANY - {"overloaded", "server", "timeout", "transport", "malformed"}
_SERVER: frozenset[ErrorKind] = frozenset({"overloaded", "context_overflow"})
_STATUSES: dict[int, tuple[ErrorKind, frozenset[ErrorKind]]] = {
    401: ("auth", frozenset({"auth_permanent"})),
    402: ("billing", frozenset({"rate_limit"})),  # a temporary usage cap some providers send as 402
    403: ("auth", frozenset({"auth_permanent", "billing", "content_filter", "rate_limit"})),
    404: ("model_not_found", frozenset()),
    408: ("timeout", frozenset()),
    413: ("payload_too_large", frozenset({"context_overflow"})),
    429: ("rate_limit", frozenset({"billing"})),
}
"""Status -> (its kind, the kinds its code or wording may turn it into); other 4xx: ``bad_request``
refined within ``_CLIENT``, 5xx: ``server`` (503, 529: ``overloaded``) within ``_SERVER``."""

_PARAMETER = re.compile(
    r"(?:unsupported (?:parameter|value)|unrecognized request arguments?(?: supplied)?|unknown parameter)"
    r"\W{1,4}([A-Za-z_][\w.\[\]-]*)",
    re.IGNORECASE,
)


@dataclasses.dataclass(frozen=True, slots=True)
class ModelError:
    """A classified model failure: what happened, and what the caller should do about it."""

    kind: ErrorKind
    status: int | None
    detail: str
    """The provider's own words (message, parameter, upstream text), or what the client saw."""
    retry_after: float | None = None
    """Seconds until the provider said to call again (``Retry-After`` or its rate-limit reset headers)."""

    @property
    def action(self) -> Action:
        return ACTIONS[self.kind]

    @property
    def retryable(self) -> bool:
        """Whether another attempt may succeed: the same key after a backoff (``retry``), or another key (``rotate``)."""
        return self.action in ("retry", "rotate")

    @property
    def key_cooldown(self) -> float | None:
        """Seconds the key that failed should be benched; None when the failure is not the key's fault."""
        if self.kind == "rate_limit" and self.retry_after is not None:
            low, high = RATE_LIMIT_BOUNDS
            return min(high, max(low, self.retry_after))
        return KEY_COOLDOWNS.get(self.kind)

    @property
    def parameter(self) -> str | None:
        """The request parameter a ``bad_request`` names (``max_tokens``, ``top_k`` ...), if it names one."""
        if self.kind != "bad_request":
            return None
        found = _PARAMETER.search(self.detail)
        return found.group(1).strip(".") if found else None

    def describe(self) -> str:
        """One line: what happened (with the provider's words) and what to do."""
        advice = _ADVICE[self.kind]
        if self.parameter is not None:
            advice = f"the provider does not accept the request parameter {self.parameter!r}; leave it out of the request or the model settings"
        elif self.kind == "rate_limit" and self.retry_after is not None:
            advice = f"{advice}; the limit resets in {self.retry_after:.{0 if self.retry_after >= 10 else 1}f} s"
        status = f"HTTP {self.status}: " if self.status else ""
        return f"{advice} ({status}{self.detail})"


def classify(
    status: int | None,
    detail: str,
    *,
    code: str | None = None,
    error_type: str | None = None,
    retry_after: float | None = None,
    timeout: bool = False,
) -> ModelError:
    """Classify a failed model call.

    Args:
        status: the HTTP status; None when no response came (or the error came inside the stream).
        detail: the provider's message (see :func:`read_error_body`) or the transport error.
        code: the provider's error code (``error.code``); a numeric code stands for the status
            when there is none, as llama.cpp, vLLM and OpenRouter's in-stream errors send it.
        error_type: the provider's error type (``error.type``, Anthropic's ``overloaded_error`` ...).
        retry_after: seconds until the provider said to call again.
        timeout: the client gave up waiting.
    """
    text = detail.strip() or "no detail"
    if status is None and code is not None and code.strip().isdigit() and 400 <= int(code) <= 599:
        status = int(code)
    kind: ErrorKind = "timeout" if timeout else _kind(status, [c.strip().lower() for c in (code, error_type) if c], text.lower())
    return ModelError(kind=kind, status=status, detail=text, retry_after=retry_after)


def _kind(status: int | None, ids: list[str], lowered: str) -> ErrorKind:
    default: ErrorKind
    allowed: frozenset[ErrorKind]
    if status is None or status < 400:
        default, allowed = ("transport" if status is None else "malformed"), _ANY
    elif status in _STATUSES:
        default, allowed = _STATUSES[status]
    elif status < 500:
        default, allowed = "bad_request", _CLIENT
    else:
        default, allowed = ("overloaded" if status in (503, 529) else "server"), _SERVER
    for name in ids:
        by_code = _CODES.get(name)
        if by_code == default and name not in _GENERIC:
            # A specific code that confirms the status ends the search: Google's RESOURCE_EXHAUSTED
            # 429 reads "exceeded your current quota" for a per-minute limit.
            return default
        if by_code is not None and by_code != default and by_code in allowed:
            return by_code
    for kind, pattern in _WORDING:
        if kind in allowed and pattern.search(lowered):
            return kind
    return default


def backoff_delay(attempt: int, key: str, *, retry_after: float | None = None, base: float = 1.0, cap: float = 30.0) -> float:
    """Seconds before retry ``attempt`` (1 for the first retry): jittered exponential, or Retry-After."""
    if retry_after is not None and retry_after >= 0:
        return float(min(retry_after, cap * 4))
    ceiling = min(cap, base * 2.0 ** max(0, attempt - 1))
    jitter = (zlib.crc32(f"{key}:{attempt}".encode()) & 0xFFFF) / 0xFFFF
    return ceiling * (0.5 + 0.5 * jitter)


# -- error bodies ---------------------------------------------------------------------------------

DETAIL_LIMIT = 300
"""Characters of a body that is not a JSON error object kept as the detail."""
MESSAGE_LIMIT = 1000
"""Characters of a JSON error's detail kept (a provider may echo the request back)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ErrorBody:
    """What a provider's error body says."""

    detail: str
    """The message, with the parameter it names and the upstream provider's own text (OpenRouter) when given."""
    code: str | None = None
    """``error.code`` as text (numeric codes too: llama.cpp and vLLM repeat the HTTP status there)."""
    type: str | None = None
    """``error.type`` (Anthropic ``overloaded_error``, llama.cpp ``exceed_context_size_error``), or Google's ``status``."""


def read_error_body(raw: bytes) -> ErrorBody:
    """Read an error body as OpenAI, OpenRouter, Anthropic, vLLM, llama.cpp or Ollama send it, or as text.

    Shapes: ``{"error": {"message", "type", "code", "param", "metadata": {"raw"}}}`` (OpenAI,
    OpenRouter, llama.cpp, newer vLLM), ``{"type": "error", "error": {"type", "message"}}``
    (Anthropic), ``{"object": "error", "message", "type", "code"}`` (vLLM), ``{"error": "text"}``
    (Ollama), ``{"detail": ...}`` (FastAPI-based servers); anything else is text, HTML tags
    dropped, cut to :data:`DETAIL_LIMIT` characters.
    """
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return ErrorBody(detail=_plain(raw.decode(errors="replace")))
    if isinstance(body, list) and body and isinstance(body[0], dict):
        body = body[0]  # Google sometimes wraps the error object in a list
    if not isinstance(body, dict):
        return ErrorBody(detail=_plain(str(body)))
    inner: Any = body.get("error", body)
    if isinstance(inner, str):
        return ErrorBody(detail=inner.strip()[:MESSAGE_LIMIT] or "no detail")
    if not isinstance(inner, dict):
        return ErrorBody(detail=_plain(str(inner)))
    message = inner.get("message") or inner.get("detail") or inner.get("msg")
    detail = _text_of(message) if message else _plain(str(inner))
    param = inner.get("param")
    if isinstance(param, str) and param and param not in detail:
        detail = f"{detail} (param: {param})"
    upstream = _upstream(inner.get("metadata"))
    if upstream and upstream not in detail:
        detail = f"{detail} (upstream: {upstream})"
    code, kind = inner.get("code"), inner.get("type") or inner.get("status")
    return ErrorBody(
        detail=detail[:MESSAGE_LIMIT] or "no detail",
        code=str(code) if code is not None and not isinstance(code, dict | list) else None,
        type=kind if isinstance(kind, str) else None,
    )


def _upstream(metadata: Any) -> str:
    """OpenRouter's ``error.metadata``: the upstream provider's raw answer, or why moderation flagged the input."""
    if not isinstance(metadata, dict):
        return ""
    provider = metadata.get("provider_name")
    raw = metadata.get("raw")
    if isinstance(raw, str) and raw.strip():
        text = read_error_body(raw.encode()).detail  # usually the upstream's JSON error body
    elif isinstance(raw, dict | list):
        text = read_error_body(msgspec.json.encode(raw)).detail
    elif isinstance(metadata.get("reasons"), list):
        text = "flagged for " + ", ".join(str(r) for r in metadata["reasons"])
    else:
        return ""
    return f"{provider}: {text}" if isinstance(provider, str) and provider else text


def _text_of(message: Any) -> str:
    if isinstance(message, list):  # FastAPI validation errors: [{"loc": [...], "msg": "..."}]
        return "; ".join(str(m.get("msg", m)) if isinstance(m, dict) else str(m) for m in message)
    return str(message).strip()


_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")


def _plain(text: str) -> str:
    """A non-JSON body as one short line: an HTML page's title (or its text), or the text's start."""
    text = text[: DETAIL_LIMIT * 64]
    if text.lstrip().startswith("<"):
        title = _TITLE.search(text)
        text = title.group(1) if title else _TAG.sub(" ", text)
    return " ".join(text.split())[:DETAIL_LIMIT] or "no detail"
