"""Model errors: classify a failure, say it clearly, and compute the retry delay.

Pure: no clock, no randomness. The jitter is derived from a key (turn id and attempt),
so a replayed run waits exactly as long as the original did.
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Literal

ErrorKind = Literal[
    "auth",
    "billing",
    "forbidden",
    "not_found",
    "context_overflow",
    "bad_request",
    "rate_limit",
    "overloaded",
    "server",
    "timeout",
    "transport",
    "malformed",
]

_RETRYABLE: frozenset[str] = frozenset({"rate_limit", "overloaded", "server", "timeout", "transport", "malformed"})

_ADVICE: dict[str, str] = {
    "auth": "the provider refused the API key; check OPENAI_API_KEY (or the model.api_key in config.yaml)",
    "billing": "the provider reports a billing problem; check the account's credit",
    "forbidden": "the key may not use this model; pick another model or key",
    "not_found": "the provider does not know this model or URL; check model.default and model.base_url",
    "context_overflow": "the conversation is longer than the model's context window; start a new session",
    "bad_request": "the provider rejected the request",
    "rate_limit": "rate limited by the provider",
    "overloaded": "the provider is overloaded",
    "server": "the provider had an internal error",
    "timeout": "the model did not answer in time",
    "transport": "the connection to the provider failed",
    "malformed": "the provider sent a reply that could not be read",
}


@dataclasses.dataclass(frozen=True, slots=True)
class ModelError:
    kind: ErrorKind
    status: int | None
    detail: str
    retry_after: float | None = None

    @property
    def retryable(self) -> bool:
        return self.kind in _RETRYABLE

    def describe(self) -> str:
        """One line: what happened (with the provider's words) and what to do."""
        status = f"HTTP {self.status}: " if self.status else ""
        return f"{_ADVICE[self.kind]} ({status}{self.detail})"


def classify(status: int | None, detail: str, *, code: str | None = None, retry_after: float | None = None, timeout: bool = False) -> ModelError:
    """Map an HTTP status (None for transport failures) and error code to a :class:`ModelError`."""
    text = detail.strip() or "no detail"
    lowered = f"{code or ''} {text}".lower()
    kind: ErrorKind
    if timeout:
        kind = "timeout"
    elif status is None:
        kind = "transport"
    elif status == 401:
        kind = "auth"
    elif status == 402:
        kind = "billing"
    elif status == 403:
        kind = "forbidden"
    elif status == 404:
        kind = "not_found"
    elif status == 408:
        kind = "timeout"
    elif status == 429:
        kind = "rate_limit"
    elif status in (503, 529):
        kind = "overloaded"
    elif status >= 500:
        kind = "server"
    elif status in (400, 413) and ("context_length" in lowered or "context length" in lowered or "too many tokens" in lowered):
        kind = "context_overflow"
    else:
        kind = "bad_request"
    return ModelError(kind=kind, status=status, detail=text, retry_after=retry_after)


def backoff_delay(attempt: int, key: str, *, retry_after: float | None = None, base: float = 1.0, cap: float = 30.0) -> float:
    """Seconds before retry ``attempt`` (1 for the first retry): jittered exponential, or Retry-After."""
    if retry_after is not None and retry_after >= 0:
        return float(min(retry_after, cap * 4))
    ceiling = min(cap, base * 2.0 ** max(0, attempt - 1))
    jitter = (zlib.crc32(f"{key}:{attempt}".encode()) & 0xFFFF) / 0xFFFF
    return ceiling * (0.5 + 0.5 * jitter)
