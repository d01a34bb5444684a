"""When a rate-limited key comes back (``actors/agent/_ratelimit.py``), and the model call reading it.

Header values are written as the providers document them: OpenAI "Rate limits" guide
(``x-ratelimit-*``, Go-style durations), Groq "Rate Limits" (the same names, fractional
durations), Anthropic "Rate limits" (``anthropic-ratelimit-*-reset`` as RFC 3339, ``retry-after``
in seconds), OpenRouter "Limits" (``X-RateLimit-Reset`` in epoch milliseconds), RFC 9110
§10.2.3 (``Retry-After`` as seconds or an HTTP-date).
"""

import calendar
import email.utils
import time
from collections.abc import Awaitable, Callable

import pytest
import trio

from actors.agent import ModelClients
from actors.agent._ratelimit import HEADERS, parse_duration, reset_after
from tests.agent.http1_kit import Peer, ask, failure_of, response, tiny_server

NOW = float(calendar.timegm((2025, 1, 1, 0, 0, 0)))
"""2025-01-01T00:00:00Z as unix time: the instant every pure test reads the headers at."""


# -- durations ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("1m30s", 90.0),
        ("20ms", 0.02),
        ("0.5s", 0.5),
        ("2h3m", 7380.0),
        ("2m59.56s", 179.56),  # Groq
        ("7.66s", 7.66),
        ("1h0m0.5s", 3600.5),
        ("250us", 0.00025),
        ("12", 12.0),
        ("1.5", 1.5),
        (" 3s ", 3.0),
    ],
)
def test_a_duration_is_read_in_every_unit_the_providers_send(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "-1s", "1x", "s", "1m30", "nan", "inf", "1e3", "1.2.3s", "ms", "5 s", "0x10"])
def test_a_duration_that_is_not_one_is_none(text: str) -> None:
    assert parse_duration(text) is None


# -- the retry-after family -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "30"}, 30.0),
        ({"Retry-After": "2"}, 2.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": "0"}, 0.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"Retry-After-Ms": "20"}, 0.02),
    ],
)
def test_retry_after_is_read_in_seconds_and_milliseconds(headers: dict[str, str], seconds: float) -> None:
    assert reset_after(headers, NOW) == pytest.approx(seconds)


def test_retry_after_as_an_http_date_counts_from_now() -> None:
    assert reset_after({"retry-after": "Wed, 01 Jan 2025 00:01:30 GMT"}, NOW) == 90.0
    assert reset_after({"retry-after": "Tue, 31 Dec 2024 23:59:00 GMT"}, NOW) == 0.0, "a date in the past: call now"
    # The obsolete forms RFC 9110 says a recipient must still accept (RFC 850, asctime).
    assert reset_after({"retry-after": "Wednesday, 01-Jan-25 00:00:10 GMT"}, NOW) == 10.0
    assert reset_after({"retry-after": "Wed Jan  1 00:00:20 2025"}, NOW) == 20.0


def test_retry_after_ms_wins_over_retry_after_and_both_win_over_the_reset_headers() -> None:
    both = {"retry-after-ms": "250", "retry-after": "1", "x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "0"}
    assert reset_after(both, NOW) == 0.25
    assert reset_after({"retry-after": "2", "x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "0"}, NOW) == 2.0
    anthropic = {"retry-after": "12", "anthropic-ratelimit-tokens-reset": "2025-01-01T00:05:00Z", "anthropic-ratelimit-tokens-remaining": "0"}
    assert reset_after(anthropic, NOW) == 12.0


def test_an_unreadable_retry_after_leaves_the_decision_to_the_reset_headers() -> None:
    headers = {"retry-after": "later", "retry-after-ms": "-5", "x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s"}
    assert reset_after(headers, NOW) == 360.0


# -- per-limit resets ---------------------------------------------------------------------------


def test_openai_without_an_exhausted_limit_waits_for_the_longest_reset() -> None:
    headers = {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-limit-tokens": "150000",
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    assert reset_after(headers, NOW) == 360.0
    headers |= {"x-ratelimit-remaining-requests": "59", "x-ratelimit-remaining-tokens": "149984"}
    assert reset_after(headers, NOW) == 360.0, "remaining headers that show room everywhere: still the longest"


def test_only_the_exhausted_limits_reset_counts() -> None:
    requests_out = {
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-remaining-tokens": "149984",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    assert reset_after(requests_out, NOW) == 1.0
    tokens_out = {
        "x-ratelimit-remaining-requests": "5",
        "x-ratelimit-reset-requests": "30s",
        "x-ratelimit-remaining-tokens": "0",
        "x-ratelimit-reset-tokens": "20ms",
    }
    assert reset_after(tokens_out, NOW) == 0.02
    both_out = requests_out | {"x-ratelimit-remaining-tokens": "0"}
    assert reset_after(both_out, NOW) == 360.0, "two limits exhausted: the key is back when both have reset"


def test_an_exhausted_limit_without_a_readable_reset_falls_back_to_every_reset() -> None:
    headers = {
        "x-ratelimit-remaining-tokens": "0",
        "x-ratelimit-reset-tokens": "whenever",
        "x-ratelimit-remaining-requests": "3",
        "x-ratelimit-reset-requests": "45s",
    }
    assert reset_after(headers, NOW) == 45.0


def test_groq_durations_with_fractions_are_read() -> None:
    headers = {"x-ratelimit-reset-requests": "2m59.56s", "x-ratelimit-reset-tokens": "7.66s", "x-ratelimit-remaining-tokens": "0"}
    assert reset_after(headers, NOW) == pytest.approx(7.66)


def test_anthropic_resets_are_rfc_3339_times() -> None:
    headers = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": "2025-01-01T00:00:01Z",
        "anthropic-ratelimit-input-tokens-remaining": "0",
        "anthropic-ratelimit-input-tokens-reset": "2025-01-01T00:00:42.5Z",
        "anthropic-ratelimit-output-tokens-remaining": "7000",
        "anthropic-ratelimit-output-tokens-reset": "2025-01-01T00:00:05Z",
        "anthropic-ratelimit-tokens-remaining": "7000",
        "anthropic-ratelimit-tokens-reset": "2025-01-01T00:00:05Z",
    }
    assert reset_after(headers, NOW) == 42.5
    del headers["anthropic-ratelimit-input-tokens-remaining"]
    assert reset_after(headers, NOW) == 42.5, "no limit at 0: the latest reset"
    assert reset_after({"anthropic-ratelimit-tokens-reset": "2025-01-01T02:00:30+02:00"}, NOW) == 30.0
    assert reset_after({"anthropic-ratelimit-tokens-reset": "2025-01-01t00:00:07z"}, NOW) == 7.0


def test_openrouter_reset_is_epoch_milliseconds_and_smaller_numbers_are_read_sensibly() -> None:
    ms = int(NOW * 1000) + 42_000
    assert reset_after({"X-RateLimit-Limit": "20", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(ms)}, NOW) == 42.0
    assert reset_after({"x-ratelimit-reset": str(int(NOW) + 17)}, NOW) == 17.0, "epoch seconds"
    assert reset_after({"x-ratelimit-reset": "15"}, NOW) == 15.0, "seconds from now"
    assert reset_after({"x-ratelimit-reset": "30s"}, NOW) == 30.0, "a duration"
    assert reset_after({"x-ratelimit-reset": str(int(NOW * 1000) - 5_000)}, NOW) == 0.0, "already reset"


def test_header_names_are_case_insensitive_everywhere() -> None:
    headers = {"X-RateLimit-Remaining-Tokens": "0", "X-RATELIMIT-RESET-TOKENS": "1m30s", "x-ratelimit-reset-requests": "2h"}
    assert reset_after(headers, NOW) == 90.0


def test_a_reset_in_the_past_is_clamped_to_zero() -> None:
    assert reset_after({"anthropic-ratelimit-requests-reset": "2024-12-31T23:00:00Z"}, NOW) == 0.0


def test_limits_false_reads_only_the_retry_after_family() -> None:
    resets = {"x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "0"}
    assert reset_after(resets, NOW, limits=False) is None
    assert reset_after(resets | {"retry-after": "3"}, NOW, limits=False) == 3.0


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"content-type": "application/json", "x-request-id": "req_1"},
        {"retry-after": ""},
        {"retry-after": "-3"},
        {"retry-after": "soon"},
        {"retry-after": "inf"},
        {"retry-after": "nan"},
        {"retry-after": "Wed, 99 Foo 2015 25:61:00 GMT"},
        {"retry-after": "Mon, 01 Jan 99999 00:00:00 GMT"},
        {"retry-after-ms": "1e3"},
        {"retry-after-ms": "9" * 400},
        {"x-ratelimit-reset-tokens": "6 minutes"},
        {"x-ratelimit-reset-requests": "-1s"},
        {"anthropic-ratelimit-tokens-reset": "tomorrow"},
        {"anthropic-ratelimit-tokens-reset": "2025-13-45T99:00:00Z"},
        {"x-ratelimit-reset": "never"},
        {"x-ratelimit-reset": "-100"},
        {"x-ratelimit-reset": "9" * 400},
    ],
)
def test_garbage_or_absent_headers_say_nothing_and_never_raise(headers: dict[str, str]) -> None:
    assert reset_after(headers, NOW) is None


def test_the_header_list_names_every_header_read_in_lower_case() -> None:
    assert all(name == name.lower() for name in HEADERS)
    for name in HEADERS:
        if "remaining" in name:
            continue
        value = "2025-01-01T00:00:09Z" if name.startswith("anthropic") else "9"
        assert reset_after({name: value}, NOW) == (0.009 if name == "retry-after-ms" else 9.0), name


# -- the model call -------------------------------------------------------------------------------


def answering(status: int, headers: bytes, body: bytes = b'{"error": {"message": "no"}}') -> Callable[[trio.SocketStream], Awaitable[None]]:
    async def handler(stream: trio.SocketStream) -> None:
        peer = Peer(stream)
        while await peer.request() is not None:
            await stream.send_all(response(body, status=status, headers=b"content-type: application/json\r\n" + headers))

    return handler


async def test_a_429_carries_the_reset_of_the_exhausted_openai_limit(clients: ModelClients) -> None:
    headers = (
        b"x-ratelimit-remaining-requests: 499\r\nx-ratelimit-reset-requests: 120ms\r\nx-ratelimit-remaining-tokens: 0\r\nx-ratelimit-reset-tokens: 6m0s\r\n"
    )
    body = b'{"error": {"message": "Rate limit reached for gpt-4o on tokens per min (TPM)", "type": "tokens", "param": null, "code": "rate_limit_exceeded"}}'
    async with tiny_server(answering(429, headers, body)) as base_url:
        failure = failure_of(await ask(clients, base_url))
    assert (failure.kind, failure.status, failure.retry_after) == ("rate_limit", 429, 360.0)


async def test_a_failure_that_is_not_a_rate_limit_ignores_the_usual_reset_headers_but_not_retry_after(clients: ModelClients) -> None:
    usual = b"x-ratelimit-remaining-tokens: 0\r\nx-ratelimit-reset-tokens: 6m0s\r\n"
    async with tiny_server(answering(500, usual)) as base_url:
        failure = failure_of(await ask(clients, base_url))
    assert (failure.kind, failure.retry_after) == ("server", None)
    later = email.utils.formatdate(time.time() + 120, usegmt=True).encode()
    async with tiny_server(answering(503, usual + b"retry-after: " + later + b"\r\n")) as base_url:
        failure = failure_of(await ask(clients, base_url))
    assert failure.kind == "overloaded" and failure.retry_after is not None and 100 < failure.retry_after <= 120


async def test_an_anthropic_overload_with_retry_after_ms_is_read_through_the_call(clients: ModelClients) -> None:
    body = b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'
    async with tiny_server(answering(529, b"retry-after-ms: 1500\r\n", body)) as base_url:
        failure = failure_of(await ask(clients, base_url))
    assert (failure.kind, failure.status, failure.detail, failure.retry_after) == ("overloaded", 529, "Overloaded", 1.5)
