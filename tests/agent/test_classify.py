"""The model-error classifier (``actors/agent/_retry.py``): provider bodies in, kind and action out.

Every body below is written the way the provider documents or sends it: OpenAI "Error codes"
guide and API reference (``{"error": {"message", "type", "param", "code"}}``), Anthropic
"Errors" (``{"type": "error", "error": {"type", "message"}}``), OpenRouter "Errors" (numeric
``code``, ``metadata.raw`` and moderation ``metadata.reasons``), vLLM's OpenAI-compatible
server (``{"object": "error", ...}``), llama.cpp server README (``exceed_context_size_error``
with ``n_prompt_tokens`` / ``n_ctx``), Ollama API docs (``{"error": "..."}``), Azure OpenAI
"Content filtering", Google Gemini API "Troubleshooting" (``status: RESOURCE_EXHAUSTED``).
"""

import json
from typing import Any, get_args

import pytest

from actors.agent._retry import ACTIONS, ErrorKind, ModelError, classify, read_error_body


def body(payload: Any) -> bytes:
    return json.dumps(payload).encode()


def kind_of(status: int | None, raw: bytes) -> ModelError:
    read = read_error_body(raw)
    return classify(status, read.detail, code=read.code, error_type=read.type)


CASES: list[tuple[str, int | None, bytes, ErrorKind]] = [
    # -- auth ----------------------------------------------------------------------------------
    ("openrouter no credentials", 401, body({"error": {"message": "No auth credentials found", "code": 401}}), "auth"),
    (
        "anthropic permission",
        403,
        body({"type": "error", "error": {"type": "permission_error", "message": "Your API key does not have permission to use the specified resource."}}),
        "auth",
    ),
    ("expired token", 401, body({"error": {"message": "Token has expired, please log in again", "type": "invalid_request_error", "code": None}}), "auth"),
    # -- auth_permanent ------------------------------------------------------------------------
    (
        "openai incorrect key",
        401,
        body(
            {
                "error": {
                    "message": "Incorrect API key provided: sk-abc123. You can find your API key at https://platform.openai.com/account/api-keys.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            }
        ),
        "auth_permanent",
    ),
    (
        "openai deactivated",
        401,
        body(
            {
                "error": {
                    "message": "The OpenAI account associated with this API key has been deactivated.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": None,
                }
            }
        ),
        "auth_permanent",
    ),
    ("anthropic invalid key", 401, body({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}), "auth_permanent"),
    ("revoked key", 403, body({"error": {"message": "This API key has been revoked.", "code": 403}}), "auth_permanent"),
    (
        "gemini bad key on 400",
        400,
        body({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT"}}),
        "auth_permanent",
    ),
    # -- billing -------------------------------------------------------------------------------
    (
        "openai insufficient_quota on 429",
        429,
        body(
            {
                "error": {
                    "message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
                    "type": "insufficient_quota",
                    "param": None,
                    "code": "insufficient_quota",
                }
            }
        ),
        "billing",
    ),
    (
        "openrouter 402",
        402,
        body(
            {
                "error": {
                    "code": 402,
                    "message": "This request requires more credits, or fewer max_tokens. You requested up to 16384 tokens, but can only afford 2500. To increase, visit https://openrouter.ai/settings/credits and upgrade to a paid account",
                }
            }
        ),
        "billing",
    ),
    (
        "openrouter key limit on 403",
        403,
        body({"error": {"code": 403, "message": "Key limit exceeded (total limit). Manage it using https://openrouter.ai/settings/keys"}}),
        "billing",
    ),
    (
        "anthropic low credit on 400",
        400,
        body(
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.",
                },
            }
        ),
        "billing",
    ),
    (
        "deepseek 402",
        402,
        body({"error": {"message": "Insufficient Balance", "type": "unknown_error", "param": None, "code": "invalid_request_error"}}),
        "billing",
    ),
    (
        "insufficient credits on 403",
        403,
        body({"error": {"message": "Insufficient credits. Add more using https://openrouter.ai/credits", "code": 403}}),
        "billing",
    ),
    # -- rate_limit ------------------------------------------------------------------------------
    (
        "openai tpm",
        429,
        body(
            {
                "error": {
                    "message": "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29500, Requested 1200. Please try again in 1.4s. Visit https://platform.openai.com/account/rate-limits to learn more.",
                    "type": "tokens",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            }
        ),
        "rate_limit",
    ),
    (
        "anthropic 429",
        429,
        body(
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "Number of request tokens has exceeded your per-minute rate limit (https://docs.anthropic.com/en/api/rate-limits); see the response headers for current usage.",
                },
            }
        ),
        "rate_limit",
    ),
    (
        # Google answers a per-minute limit with the "quota" wording; its status says what it is.
        "gemini resource exhausted",
        429,
        body(
            {
                "error": {
                    "code": 429,
                    "message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
                    "status": "RESOURCE_EXHAUSTED",
                }
            }
        ),
        "rate_limit",
    ),
    ("a temporary cap on 402", 402, body({"error": {"message": "Usage rate limit reached for this plan; try again in 5 minutes", "code": 402}}), "rate_limit"),
    ("rate limit wording on 403", 403, body({"message": "API rate limit exceeded for this key"}), "rate_limit"),
    ("openrouter in-stream 429", None, body({"error": {"code": 429, "message": "Rate limit exceeded: free-models-per-min"}}), "rate_limit"),
    # -- overloaded ------------------------------------------------------------------------------
    ("anthropic 529", 529, body({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}), "overloaded"),
    ("anthropic overloaded on 500", 500, body({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}), "overloaded"),
    ("llama.cpp loading", 503, body({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}), "overloaded"),
    ("503 with a generic server_error type", 503, body({"error": {"message": "busy", "type": "server_error", "param": None, "code": None}}), "overloaded"),
    # -- server ----------------------------------------------------------------------------------
    ("anthropic api_error", 500, body({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}), "server"),
    (
        "cloudflare 502 page",
        502,
        b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>",
        "server",
    ),
    ("504 text", 504, b"upstream request timeout", "server"),
    ("500 whose wording says billing stays a server error", 500, body({"error": {"message": "insufficient credits lookup failed"}}), "server"),
    # -- timeout ---------------------------------------------------------------------------------
    ("408", 408, body({"error": {"message": "Request timed out"}}), "timeout"),
    # -- transport -------------------------------------------------------------------------------
    ("peer closed", None, b"RemoteProtocolError: peer closed connection without sending complete message body", "transport"),
    # -- context_overflow ------------------------------------------------------------------------
    (
        "openai context_length_exceeded",
        400,
        body(
            {
                "error": {
                    "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130542 tokens. Please reduce the length of the messages.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            }
        ),
        "context_overflow",
    ),
    (
        "openai code only",
        400,
        body({"error": {"message": "Request rejected", "type": "invalid_request_error", "param": None, "code": "context_length_exceeded"}}),
        "context_overflow",
    ),
    (
        "vllm max context",
        400,
        body(
            {
                "object": "error",
                "message": "This model's maximum context length is 4096 tokens. However, you requested 5120 tokens (4096 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        ),
        "context_overflow",
    ),
    (
        "vllm max model length",
        400,
        body(
            {
                "error": {
                    "message": "The decoder prompt (length 5000) is longer than the maximum model length of 4096. Make sure that `max_model_len` is no smaller than the number of text tokens.",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                }
            }
        ),
        "context_overflow",
    ),
    (
        "llama.cpp exceed_context_size_error",
        400,
        body(
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 5000,
                    "n_ctx": 4096,
                }
            }
        ),
        "context_overflow",
    ),
    (
        "llama.cpp type only",
        400,
        body({"error": {"code": 400, "message": "request rejected", "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}}),
        "context_overflow",
    ),
    ("llama.cpp context shift", 500, body({"error": {"code": 500, "message": "context shift is disabled", "type": "server_error"}}), "context_overflow"),
    (
        "anthropic prompt too long",
        400,
        body({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 208310 tokens > 200000 maximum"}}),
        "context_overflow",
    ),
    ("ollama", 400, body({"error": "input length exceeds the context length"}), "context_overflow"),
    (
        "openrouter endpoint",
        400,
        body(
            {
                "error": {
                    "message": 'This endpoint\'s maximum context length is 163840 tokens. However, you requested about 201234 tokens (201234 of text input). Please reduce the length of either one, or use the "middle-out" transform to compress your prompt automatically.',
                    "code": 400,
                    "metadata": {"provider_name": None},
                }
            }
        ),
        "context_overflow",
    ),
    ("413 with context wording", 413, body({"error": {"message": "the context length is exceeded"}}), "context_overflow"),
    # -- payload_too_large -----------------------------------------------------------------------
    (
        "anthropic 413",
        413,
        body({"type": "error", "error": {"type": "request_too_large", "message": "Request exceeds the maximum allowed number of bytes."}}),
        "payload_too_large",
    ),
    ("nginx 413 page", 413, b"<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body></body></html>", "payload_too_large"),
    # -- model_not_found -------------------------------------------------------------------------
    (
        "openai 404",
        404,
        body(
            {
                "error": {
                    "message": "The model `gpt-4.5-turbo` does not exist or you do not have access to it.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "model_not_found",
                }
            }
        ),
        "model_not_found",
    ),
    ("ollama 404", 404, body({"error": 'model "llama3.3:70b" not found, try pulling it first'}), "model_not_found"),
    (
        "vllm 404",
        404,
        body({"object": "error", "message": "The model `qwen` does not exist.", "type": "NotFoundError", "param": None, "code": 404}),
        "model_not_found",
    ),
    ("openrouter invalid id on 400", 400, body({"error": {"message": "openai/gpt-9 is not a valid model ID", "code": 400}}), "model_not_found"),
    (
        "model_not_found code on 400",
        400,
        body({"error": {"message": "Unknown", "type": "invalid_request_error", "code": "model_not_found"}}),
        "model_not_found",
    ),
    # -- content_filter --------------------------------------------------------------------------
    (
        "azure content_filter",
        400,
        body(
            {
                "error": {
                    "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.",
                    "type": None,
                    "param": "prompt",
                    "code": "content_filter",
                    "status": 400,
                }
            }
        ),
        "content_filter",
    ),
    (
        "openai safety system",
        400,
        body(
            {
                "error": {
                    "message": "Your request was rejected as a result of our safety system. Your prompt may contain text that is not allowed by our safety system.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "content_policy_violation",
                }
            }
        ),
        "content_filter",
    ),
    (
        "openrouter moderation 403",
        403,
        body(
            {
                "error": {
                    "code": 403,
                    "message": 'openai/gpt-4o requires moderation on OpenAI. Your input was flagged for "violence". No credits were charged.',
                    "metadata": {"reasons": ["violence"], "flagged_input": "...", "provider_name": "OpenAI", "model_slug": "openai/gpt-4o"},
                }
            }
        ),
        "content_filter",
    ),
    # -- bad_request -----------------------------------------------------------------------------
    (
        "openai unsupported parameter",
        400,
        body(
            {
                "error": {
                    "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
                    "type": "invalid_request_error",
                    "param": "max_tokens",
                    "code": "unsupported_parameter",
                }
            }
        ),
        "bad_request",
    ),
    (
        "unrecognized argument",
        400,
        body({"error": {"message": "Unrecognized request argument supplied: top_k", "type": "invalid_request_error", "param": None, "code": None}}),
        "bad_request",
    ),
    ("fastapi 422", 422, body({"detail": [{"type": "missing", "loc": ["body", "messages"], "msg": "Field required", "input": {}}]}), "bad_request"),
    (
        "plain 400",
        400,
        body(
            {
                "error": {
                    "message": "Invalid value for 'temperature': must be between 0 and 2.",
                    "type": "invalid_request_error",
                    "param": "temperature",
                    "code": None,
                }
            }
        ),
        "bad_request",
    ),
    ("409", 409, b"conflict", "bad_request"),
    # -- malformed ---------------------------------------------------------------------------------
    ("a redirect nobody followed", 302, b"Found", "malformed"),
    # -- thinking_signature ----------------------------------------------------------------------
    (
        "anthropic signature",
        400,
        body({"type": "error", "error": {"type": "invalid_request_error", "message": "messages.1.content.0: Invalid `signature` in `thinking` block"}}),
        "thinking_signature",
    ),
]


@pytest.mark.parametrize(("status", "raw", "kind"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_a_provider_error_is_classified_by_status_code_and_wording(status: int | None, raw: bytes, kind: ErrorKind) -> None:
    assert kind_of(status, raw).kind == kind


def test_the_cases_cover_every_kind() -> None:
    assert {case[3] for case in CASES} == set(get_args(ErrorKind))


# -- actions ------------------------------------------------------------------------------------


def test_each_kind_leads_to_exactly_one_action() -> None:
    assert ACTIONS == {
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


@pytest.mark.parametrize("kind", get_args(ErrorKind))
def test_retryable_means_the_retry_or_rotate_action(kind: ErrorKind) -> None:
    error = ModelError(kind=kind, status=None, detail="x")
    assert error.action == ACTIONS[kind]
    assert error.retryable == (error.action in ("retry", "rotate"))


@pytest.mark.parametrize(
    ("kind", "retry_after", "cooldown"),
    [
        ("auth", None, 300.0),
        ("auth_permanent", None, 86_400.0),
        ("billing", None, 3_600.0),
        ("rate_limit", None, 60.0),
        ("rate_limit", 12.5, 12.5),
        ("rate_limit", 0.0, 1.0),  # "reset now" still benches the key a second: no tight loop of refused calls
        ("rate_limit", 0.2, 1.0),
        ("rate_limit", 3.2e7, 3_600.0),  # a reset header a year ahead benches the key an hour, not a year
        ("billing", 12.5, 3_600.0),
        ("overloaded", 5.0, None),
        ("server", None, None),
        ("timeout", None, None),
        ("transport", None, None),
        ("malformed", None, None),
        ("thinking_signature", None, None),
        ("model_not_found", None, None),
        ("context_overflow", None, None),
        ("payload_too_large", None, None),
        ("bad_request", None, None),
        ("content_filter", None, None),
    ],
)
def test_only_failures_that_are_the_keys_fault_bench_it(kind: ErrorKind, retry_after: float | None, cooldown: float | None) -> None:
    assert ModelError(kind=kind, status=None, detail="x", retry_after=retry_after).key_cooldown == cooldown


def test_a_client_timeout_is_a_timeout_whatever_else_is_said() -> None:
    error = classify(None, "ReadTimeout: the model sent nothing for 120 s", timeout=True)
    assert (error.kind, error.action, error.status) == ("timeout", "retry", None)


# -- the layers -----------------------------------------------------------------------------------


def test_the_status_decides_before_code_and_wording() -> None:
    assert classify(503, "insufficient credits on the upstream", code="insufficient_quota").kind == "overloaded"
    assert classify(429, "This model's maximum context length is 8192 tokens").kind == "rate_limit"
    assert classify(404, "you exceeded your current quota").kind == "model_not_found"
    assert classify(401, "Rate limit reached").kind == "auth"


def test_the_code_decides_before_the_wording() -> None:
    assert classify(429, "Rate limit: you are out of quota", code="insufficient_quota").kind == "billing"
    assert classify(400, "rate limit exceeded", code="context_length_exceeded").kind == "context_overflow"
    assert classify(400, "whatever", error_type="overloaded_error").kind == "bad_request", "a 400 cannot be an overload"
    quota = "You exceeded your current quota, please check your plan and billing details."
    assert classify(429, quota, error_type="RESOURCE_EXHAUSTED").kind == "rate_limit", "a specific code that confirms the status ends the search"
    assert classify(429, quota).kind == "billing"
    assert classify(500, "The engine is overloaded", code="server_error").kind == "overloaded", "a generic one lets the wording decide"
    assert classify(500, "The server had an error while processing your request.", code="server_error").kind == "server"


def test_a_numeric_code_stands_for_the_missing_status() -> None:
    error = classify(None, "Provider returned error", code="502")
    assert (error.kind, error.status) == ("server", 502)
    assert classify(None, "Provider returned error", code="7").kind == "transport"


def test_no_status_is_a_transport_failure_unless_code_or_wording_says_more() -> None:
    assert classify(None, "ConnectError: [Errno 111] Connection refused").kind == "transport"
    assert classify(None, "the stream ended before [DONE]").kind == "transport"
    assert classify(None, "overloaded").kind == "overloaded"
    assert classify(None, "stream error", error_type="overloaded_error").kind == "overloaded"
    assert classify(None, "This model's maximum context length is 4096 tokens").kind == "context_overflow"
    assert classify(None, "", code=None).detail == "no detail"


# -- what it says ---------------------------------------------------------------------------------


def test_describe_is_one_line_with_advice_and_the_providers_words() -> None:
    raw = body({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 208310 tokens > 200000 maximum"}})
    line = kind_of(400, raw).describe()
    assert "\n" not in line
    assert line.startswith("the conversation is longer than the model's context window and compression could not make room")
    assert line.endswith("(HTTP 400: prompt is too long: 208310 tokens > 200000 maximum)")
    assert "OPENAI_API_KEY" in classify(401, "invalid key").describe()
    assert classify(None, "Connection refused").describe() == "the connection to the provider failed (Connection refused)"


@pytest.mark.parametrize("kind", get_args(ErrorKind))
def test_every_kind_has_its_own_advice(kind: ErrorKind) -> None:
    others = {ModelError(kind=k, status=None, detail="x").describe() for k in get_args(ErrorKind) if k != kind}
    assert ModelError(kind=kind, status=None, detail="x").describe() not in others


def test_a_rate_limit_says_when_it_resets() -> None:
    assert "the limit resets in 42 s" in classify(429, "slow down", retry_after=42.0).describe()
    assert "the limit resets in 1.5 s" in classify(429, "slow down", retry_after=1.5).describe()
    assert "resets" not in classify(429, "slow down").describe()


def test_a_rejected_parameter_is_named() -> None:
    raw = body(
        {
            "error": {
                "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
                "type": "invalid_request_error",
                "param": "max_tokens",
                "code": "unsupported_parameter",
            }
        }
    )
    error = kind_of(400, raw)
    assert error.parameter == "max_tokens"
    assert "does not accept the request parameter 'max_tokens'" in error.describe()
    assert classify(400, "Unrecognized request argument supplied: top_k").parameter == "top_k"
    assert classify(400, "Invalid value for 'temperature': must be between 0 and 2. (param: temperature)").parameter is None
    assert classify(429, "Unsupported parameter: 'x'").parameter is None, "only a bad request names one"
