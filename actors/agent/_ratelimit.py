"""When a rate-limited key comes back: the reset time read from a response's headers.

Pure: the wall clock is an argument (``now``, unix seconds), so the I/O side reads it once
and a test passes any instant. Garbage values are skipped, never raised.

What is read (header names are case-insensitive):

- ``retry-after-ms`` (milliseconds) and ``retry-after`` (seconds, or an HTTP-date as RFC 9110
  defines it): the server says when to call again. When either is valid it wins.
- Per-limit reset headers, one per limit the provider counts:
  OpenAI (and Groq) ``x-ratelimit-reset-requests`` / ``-tokens``, durations such as ``6m0s``;
  Anthropic ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset``,
  RFC 3339 timestamps; OpenRouter ``x-ratelimit-reset``, a unix timestamp in milliseconds.

Which reset counts: a key is usable again only when every limit it exhausted has reset, so
the answer is the latest reset. When the matching ``...-remaining`` headers say which
limits are at 0, only those limits' resets count: OpenAI sends every reset on every
response, and a requests window that refills in 20 ms says nothing about a tokens window
that is empty for another minute (nor the other way round). When no remaining header says 0
(absent, or the 429 came from a limit that still shows some room, such as a request larger
than the tokens left), every reset present counts, so the key is never called too early.
"""

from __future__ import annotations

import datetime
import email.utils
import math
import re
from collections.abc import Mapping

_LIMITS: tuple[tuple[str, str, str], ...] = (
    # (reset header, remaining header, format of the reset)
    ("x-ratelimit-reset-requests", "x-ratelimit-remaining-requests", "duration"),
    ("x-ratelimit-reset-tokens", "x-ratelimit-remaining-tokens", "duration"),
    ("anthropic-ratelimit-requests-reset", "anthropic-ratelimit-requests-remaining", "rfc3339"),
    ("anthropic-ratelimit-tokens-reset", "anthropic-ratelimit-tokens-remaining", "rfc3339"),
    ("anthropic-ratelimit-input-tokens-reset", "anthropic-ratelimit-input-tokens-remaining", "rfc3339"),
    ("anthropic-ratelimit-output-tokens-reset", "anthropic-ratelimit-output-tokens-remaining", "rfc3339"),
    ("x-ratelimit-reset", "x-ratelimit-remaining", "epoch"),
)

HEADERS: tuple[str, ...] = ("retry-after-ms", "retry-after", *(name for limit in _LIMITS for name in limit[:2]))
"""Every header :func:`reset_after` reads, in lower case (so a caller can pick just these)."""

_NUMBER = re.compile(r"\d+(?:\.\d+)?|\.\d+")
_DURATION = re.compile(r"(?:(?:\d+(?:\.\d+)?|\.\d+)(?:h|ms|m|s|us|µs|μs|ns))+")
_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(h|ms|m|s|us|µs|μs|ns)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ns": 1e-9}


def reset_after(headers: Mapping[str, str], now: float, *, limits: bool = True) -> float | None:
    """Seconds from ``now`` until the provider says the limit resets, or None if no header says.

    Args:
        headers: the response's headers (any case).
        now: the current unix time, in seconds.
        limits: also read the per-limit reset headers; False reads only the ``retry-after``
            family (for a failure that is not a rate limit, where those headers only describe
            the usual windows).
    """
    lowered = {name.lower(): value.strip() for name, value in headers.items()}
    waited = _retry_after(lowered, now)
    if waited is not None or not limits:
        return waited
    exhausted: list[float] = []
    every: list[float] = []
    for reset_name, remaining_name, form in _LIMITS:
        raw = lowered.get(reset_name)
        seconds = None if raw is None else _reset_seconds(raw, form, now)
        if seconds is None:
            continue
        every.append(seconds)
        remaining = _number(lowered.get(remaining_name, ""))
        if remaining is not None and remaining <= 0:
            exhausted.append(seconds)
    chosen = exhausted or every
    return max(0.0, max(chosen)) if chosen else None


def parse_duration(text: str) -> float | None:
    """Seconds in a Go-style duration (``1s``, ``6m0s``, ``1m30s``, ``20ms``, ``2h3m``) or a bare number; None if neither."""
    text = text.strip()
    bare = _number(text)
    if bare is not None:
        return bare
    if not _DURATION.fullmatch(text):
        return None
    total = sum(float(amount) * _UNIT_SECONDS[unit] for amount, unit in _PART.findall(text))
    return total if math.isfinite(total) else None


def _retry_after(lowered: Mapping[str, str], now: float) -> float | None:
    millis = _number(lowered.get("retry-after-ms", ""))
    if millis is not None:
        return millis / 1000.0
    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return _until(when, now)


def _reset_seconds(raw: str, form: str, now: float) -> float | None:
    if form == "duration":
        return parse_duration(raw)
    if form == "rfc3339":
        try:
            when = datetime.datetime.fromisoformat(raw.upper())
        except ValueError:
            return None
        return _until(when, now)
    number = _number(raw)  # epoch: OpenRouter sends milliseconds; seconds and a bare delay are taken too
    if number is None:
        return parse_duration(raw)
    if number > 1e12:
        return max(0.0, number / 1000.0 - now)
    if number > 1e9:
        return max(0.0, number - now)
    return number


def _until(when: datetime.datetime, now: float) -> float | None:
    if when.tzinfo is None:  # RFC 9110's "GMT" and a zone-less RFC 3339 time are both UTC
        when = when.replace(tzinfo=datetime.UTC)
    try:
        return max(0.0, when.timestamp() - now)
    except (OverflowError, ValueError, OSError):
        return None


def _number(text: str) -> float | None:
    """A non-negative decimal number (no sign, no exponent, no ``inf``/``nan``), or None."""
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None
