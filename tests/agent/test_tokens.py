"""Token accounting (``actors/agent/_tokens.py``): estimates, their calibration, the context window.

Window figures are the providers' published ones (OpenAI, Anthropic, Google, Meta, Qwen,
Mistral and DeepSeek model pages); ``/v1/models`` entries are shaped as OpenRouter, vLLM and
LM Studio answer them.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors import UsageError
from actors.agent._tokens import (
    DEFAULT_CONTEXT_WINDOW,
    IMAGE_TOKENS,
    MAX_CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD,
    MIN_CHARS_PER_TOKEN,
    TOOL_CALL_OVERHEAD,
    RequestSize,
    TokenRatio,
    calibrate,
    context_window,
    estimate_tokens,
    known_context_window,
    message_size,
    message_tokens,
    metadata_context_length,
    relative_error,
    request_size,
    threshold,
    tools_size,
)
from protocols import ChatMessage, ToolCall

WEATHER_TOOL: dict[str, object] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


# -- estimates ------------------------------------------------------------------------------------


def test_a_plain_message_costs_its_characters_over_four_plus_the_message_overhead() -> None:
    message = ChatMessage(role="user", content="x" * 400)
    assert message_size(message) == RequestSize(chars=400, fixed=MESSAGE_OVERHEAD)
    assert message_tokens(message) == 100 + MESSAGE_OVERHEAD


def test_an_empty_message_costs_only_the_overhead() -> None:
    assert message_tokens(ChatMessage(role="assistant")) == MESSAGE_OVERHEAD


def test_tool_calls_count_their_id_name_and_arguments_plus_an_overhead_each() -> None:
    calls = (ToolCall(id="call_1", name="read", arguments='{"path":"a.txt"}'), ToolCall(id="call_2", name="ls", arguments="{}"))
    size = message_size(ChatMessage(role="assistant", content="ok", tool_calls=calls))
    assert size.chars == 2 + (6 + 4 + 16) + (6 + 2 + 2)
    assert size.fixed == MESSAGE_OVERHEAD + 2 * TOOL_CALL_OVERHEAD


def test_a_tool_result_counts_its_call_id_and_name() -> None:
    size = message_size(ChatMessage(role="tool", content="42", tool_call_id="call_1", name="calc"))
    assert size.chars == 2 + 6 + 4


def test_reasoning_counts_as_text() -> None:
    assert message_size(ChatMessage(role="assistant", content="yes", reasoning="because")).chars == 10


def test_images_cost_a_fixed_price_whatever_the_length_of_their_url() -> None:
    short = ChatMessage(role="user", content="see", images=("https://example.com/a.png",))
    huge = ChatMessage(role="user", content="see", images=("data:image/png;base64," + "A" * 100_000,))
    assert message_size(short) == message_size(huge) == RequestSize(chars=3, fixed=MESSAGE_OVERHEAD + IMAGE_TOKENS)


def test_tool_schemas_are_measured_as_compact_json() -> None:
    compact = '{"type":"function","function":{"name":"get_weather","description":"Current weather for a city.",'
    compact += '"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}'
    assert len(compact) == 188
    assert tools_size([WEATHER_TOOL]) == RequestSize(chars=188, fixed=0)
    assert tools_size([]) == RequestSize(chars=0, fixed=0)


def test_a_request_adds_its_messages_and_its_tool_schemas() -> None:
    messages = [ChatMessage(role="system", content="s" * 100), ChatMessage(role="user", content="u" * 300)]
    size = request_size(messages, [WEATHER_TOOL])
    assert size == RequestSize(chars=588, fixed=2 * MESSAGE_OVERHEAD)
    assert estimate_tokens(messages, [WEATHER_TOOL]) == 147 + 2 * MESSAGE_OVERHEAD
    assert estimate_tokens(messages, [WEATHER_TOOL], TokenRatio(chars_per_token=2.5)) == 236 + 2 * MESSAGE_OVERHEAD


def test_non_ascii_text_counts_characters_not_bytes() -> None:
    assert message_size(ChatMessage(role="user", content="上下文压缩")).chars == 5


@given(st.text(max_size=300), st.text(max_size=300), st.floats(MIN_CHARS_PER_TOKEN, MAX_CHARS_PER_TOKEN))
def test_the_estimate_never_falls_when_content_grows(prefix: str, extra: str, cpt: float) -> None:
    ratio = TokenRatio(chars_per_token=cpt)
    shorter = [ChatMessage(role="user", content=prefix)]
    longer = [ChatMessage(role="user", content=prefix + extra)]
    assert estimate_tokens(shorter, ratio=ratio) <= estimate_tokens(longer, ratio=ratio)


@given(st.lists(st.text(max_size=100), max_size=8))
def test_a_request_costs_at_least_the_overhead_of_each_message(texts: list[str]) -> None:
    messages = [ChatMessage(role="user", content=text) for text in texts]
    assert estimate_tokens(messages) >= MESSAGE_OVERHEAD * len(messages)
    assert estimate_tokens(messages) <= sum(message_tokens(m) for m in messages)


# -- calibration ----------------------------------------------------------------------------------

SENT = RequestSize(chars=12_000, fixed=40)


def test_the_first_report_replaces_the_default_ratio() -> None:
    # 12,000 chars became 3,040 - 40 fixed = 3,000 text tokens: 4 chars per token; 2,000 make 6.
    assert calibrate(TokenRatio(), SENT, 3_040) == TokenRatio(chars_per_token=4.0, samples=1)
    assert calibrate(TokenRatio(), SENT, 2_040) == TokenRatio(chars_per_token=6.0, samples=1)


def test_later_reports_are_a_plain_mean_then_a_moving_average() -> None:
    ratio = calibrate(TokenRatio(), SENT, 2_040)  # 6.0
    ratio = calibrate(ratio, SENT, 4_040)  # observed 3.0, weight 1/2
    assert ratio == TokenRatio(chars_per_token=4.5, samples=2)
    late = calibrate(TokenRatio(chars_per_token=4.0, samples=10), SENT, 2_040)  # observed 6.0, weight 0.25
    assert late == TokenRatio(chars_per_token=4.5, samples=11)


def test_an_observed_ratio_beyond_the_range_is_clamped() -> None:
    # 12,000 chars in 1,000 text tokens is 12 per token: plausible, but over the clamp of 8.
    assert calibrate(TokenRatio(), SENT, 1_040) == TokenRatio(chars_per_token=MAX_CHARS_PER_TOKEN, samples=1)
    # 12,000 chars in 16,000 text tokens is 0.75 per token: under the clamp of 1.
    assert calibrate(TokenRatio(), SENT, 16_040) == TokenRatio(chars_per_token=MIN_CHARS_PER_TOKEN, samples=1)


@pytest.mark.parametrize(
    ("sent", "prompt_tokens"),
    [
        (SENT, 0),  # no usage reported
        (SENT, 40),  # no more than the fixed costs
        (SENT, -5),
        (SENT, 100),  # 200 chars per token: another request's count
        (SENT, 10_000_000),  # 0.0012 chars per token
        (RequestSize(chars=50, fixed=4), 20),  # too small to say anything
    ],
)
def test_a_report_of_zero_or_an_absurd_one_leaves_the_ratio_alone(sent: RequestSize, prompt_tokens: int) -> None:
    ratio = TokenRatio(chars_per_token=3.3, samples=7)
    assert calibrate(ratio, sent, prompt_tokens) is ratio


@given(st.integers(1_000, 200_000), st.floats(MIN_CHARS_PER_TOKEN, MAX_CHARS_PER_TOKEN), st.floats(MIN_CHARS_PER_TOKEN, MAX_CHARS_PER_TOKEN))
def test_calibration_converges_to_the_reported_ratio(chars: int, start: float, truth: float) -> None:
    sent = RequestSize(chars=chars, fixed=30)
    reported = round(chars / truth) + 30
    ratio = TokenRatio(chars_per_token=start, samples=50)  # past the plain mean: the slow case
    for _ in range(60):
        ratio = calibrate(ratio, sent, reported)
    observed = min(max(chars / (reported - 30), MIN_CHARS_PER_TOKEN), MAX_CHARS_PER_TOKEN)
    assert ratio.chars_per_token == pytest.approx(observed, rel=1e-6)


@given(st.lists(st.tuples(st.integers(0, 10**7), st.integers(-100, 10**7)), max_size=20))
def test_calibration_stays_within_the_clamp_whatever_is_reported(reports: list[tuple[int, int]]) -> None:
    ratio = TokenRatio()
    for chars, prompt_tokens in reports:
        ratio = calibrate(ratio, RequestSize(chars=chars, fixed=10), prompt_tokens)
        assert MIN_CHARS_PER_TOKEN <= ratio.chars_per_token <= MAX_CHARS_PER_TOKEN


@pytest.mark.parametrize(("cpt", "samples"), [(0.9, 0), (9.0, 0), (float("nan"), 0), (4.0, -1)])
def test_a_ratio_out_of_range_is_refused(cpt: float, samples: int) -> None:
    with pytest.raises(UsageError, match="out of range"):
        TokenRatio(chars_per_token=cpt, samples=samples)


def test_relative_error_is_signed_against_the_report() -> None:
    assert relative_error(110, 100) == pytest.approx(0.10)
    assert relative_error(90, 100) == pytest.approx(-0.10)
    assert relative_error(100, 100) == 0.0
    with pytest.raises(UsageError, match="above 0"):
        relative_error(5, 0)


# -- context window -------------------------------------------------------------------------------


def test_the_configured_length_wins_over_metadata_and_the_table() -> None:
    assert context_window("gpt-4o", configured=4_096, metadata=64_000) == 4_096


def test_metadata_wins_over_the_table() -> None:
    assert context_window("gpt-4o", configured=None, metadata=64_000) == 64_000


def test_the_table_answers_for_a_known_model() -> None:
    assert context_window("gpt-4o", configured=None, metadata=None) == 128_000


def test_an_unknown_model_gets_the_default() -> None:
    assert context_window("my-local-finetune", configured=None, metadata=None) == DEFAULT_CONTEXT_WINDOW == 128_000


def test_a_length_below_one_counts_as_absent() -> None:
    assert context_window("claude-3-opus", configured=0, metadata=-1) == 200_000
    assert context_window("claude-3-opus", configured=0, metadata=32_000) == 32_000


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-5", 400_000),
        ("gpt-5-mini", 400_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4.1-nano-2025-04-14", 1_047_576),
        ("gpt-4o", 128_000),
        ("openai/gpt-4o-mini", 128_000),
        ("chatgpt-4o-latest", 128_000),
        ("gpt-4.5-preview", 128_000),
        ("gpt-4-turbo-2024-04-09", 128_000),
        ("gpt-4-1106-preview", 128_000),
        ("gpt-4-0125-preview", 128_000),
        ("gpt-4-32k", 32_768),
        ("gpt-4", 8_192),
        ("gpt-4-0613", 8_192),
        ("gpt-3.5-turbo", 16_385),
        ("o1-mini", 128_000),
        ("o1-preview", 128_000),
        ("o1", 200_000),
        ("o3-mini", 200_000),
        ("o4-mini-2025-04-16", 200_000),
        ("claude-3-opus-20240229", 200_000),
        ("claude-3-5-sonnet-20241022", 200_000),
        ("anthropic/claude-3.5-sonnet", 200_000),
        ("openrouter/anthropic/claude-3.5-sonnet:beta", 200_000),
        ("anthropic.claude-3-haiku-20240307-v1:0", 200_000),
        ("claude-sonnet-4-20250514", 200_000),
        ("Claude-Opus-4.1", 200_000),
        ("gemini-1.5-pro-002", 2_097_152),
        ("gemini-1.0-pro", 32_768),
        ("gemini-pro", 32_768),
        ("gemini-1.5-flash", 1_048_576),
        ("google/gemini-2.5-pro", 1_048_576),
        ("gemini-2.0-flash", 1_048_576),
        ("meta-llama/Llama-3.1-70B-Instruct", 131_072),
        ("llama-3.3-70b-versatile", 131_072),
        ("llama3.2:3b", 131_072),
        ("Meta-Llama-3-8B-Instruct", 8_192),
        ("llama3-70b-8192", 8_192),
        ("Qwen/Qwen2.5-72B-Instruct", 32_768),
        ("qwen2.5:7b", 32_768),
        ("qwen3-235b-a22b", 32_768),
        ("qwen/qwen3-coder", 262_144),
        ("codestral-latest", 262_144),
        ("mistral-large-latest", 131_072),
        ("open-mistral-nemo", 131_072),
        ("pixtral-12b", 131_072),
        ("mistralai/Mixtral-8x22B-Instruct-v0.1", 65_536),
        ("mistralai/Mistral-7B-Instruct-v0.3", 32_768),
        ("mixtral-8x7b-32768", 32_768),
        ("deepseek-chat", 128_000),
        ("deepseek/deepseek-r1", 128_000),
        ("deepseek-r1-distill-qwen-32b", 128_000),
    ],
)
def test_well_known_models_are_matched_by_name(model: str, window: int) -> None:
    assert known_context_window(model) == window
    assert context_window(model, configured=None, metadata=None) == window


@pytest.mark.parametrize("model", ["", "my-local-finetune", "phi-3-mini", "gpt-4o1", "hello-o1x", "foo1", "mistralish"])
def test_a_name_only_resembling_a_family_is_not_matched(model: str) -> None:
    assert known_context_window(model) is None


# -- /v1/models metadata --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "length"),
    [
        ({"id": "anthropic/claude-3.5-sonnet", "context_length": 200_000, "top_provider": {"context_length": 200_000}}, 200_000),
        ({"id": "x", "top_provider": {"context_length": 65_536, "max_completion_tokens": 8_192}}, 65_536),
        ({"id": "Qwen/Qwen2.5-7B-Instruct", "object": "model", "owned_by": "vllm", "max_model_len": 32_768}, 32_768),
        ({"id": "qwen2.5-7b-instruct", "max_context_length": 32_768}, 32_768),
        ({"id": "m", "context_window": 8_192}, 8_192),
        ({"id": "m", "context_length": 4096.0}, 4_096),
        ({"id": "m", "context_length": " 16384 "}, 16_384),
        ({"id": "m", "context_length": None, "max_model_len": 2_048}, 2_048),
        ({"id": "m", "context_length": 0, "max_model_len": 2_048}, 2_048),
    ],
)
def test_the_context_length_is_read_from_the_common_spellings(entry: dict[str, object], length: int) -> None:
    assert metadata_context_length(entry) == length


@pytest.mark.parametrize(
    "entry",
    [
        {"id": "gpt-4o", "object": "model", "owned_by": "openai"},
        {"id": "m", "context_length": True},
        {"id": "m", "context_length": -4_096},
        {"id": "m", "context_length": 4096.5},
        {"id": "m", "context_length": "lots"},
        {"id": "m", "context_length": 10**12},
        {"id": "m", "context_length": [4_096]},
        {"id": "m", "top_provider": None},
        {"id": "m", "top_provider": {"context_length": "n/a"}},
    ],
)
def test_an_absent_or_invalid_context_length_reads_as_none(entry: dict[str, object]) -> None:
    assert metadata_context_length(entry) is None


# -- threshold ------------------------------------------------------------------------------------


def test_compression_starts_at_half_the_window_by_default() -> None:
    assert threshold(128_000) == 64_000
    assert threshold(4_096) == 2_048
    assert threshold(200_000, 0.85) == 170_000
    assert threshold(1) == 1


@pytest.mark.parametrize(("window", "ratio"), [(0, 0.5), (-1, 0.5), (1_000, 0.0), (1_000, 1.5), (1_000, float("nan"))])
def test_a_threshold_of_a_bad_window_or_ratio_is_refused(window: int, ratio: float) -> None:
    with pytest.raises(UsageError, match="threshold needs"):
        threshold(window, ratio)


@given(st.integers(1, 10_000_000), st.floats(0.01, 1.0))
def test_the_threshold_is_within_the_window(window: int, ratio: float) -> None:
    assert 1 <= threshold(window, ratio) <= window


def test_the_planners_estimator_agrees_with_message_tokens_on_every_shape_of_message() -> None:
    from actors.agent._tokens import TokenRatio, token_estimator
    from protocols import ToolCall

    shapes = [
        ChatMessage(role="assistant"),
        ChatMessage(role="user", content="hello " * 50, images=("data:image/png;base64,xx", "https://x/y.png")),
        ChatMessage(
            role="assistant", content="thinking", reasoning="because " * 9, tool_calls=(ToolCall(id="c1", name="read_file", arguments='{"path": "a"}'),)
        ),
        ChatMessage(role="tool", tool_call_id="c1", name="read_file", content="x" * 1_001),
    ]
    for ratio in (TokenRatio(), TokenRatio(chars_per_token=2.7, samples=3), TokenRatio(chars_per_token=7.9, samples=1)):
        estimate = token_estimator(ratio)
        assert [estimate(m) for m in shapes] == [message_tokens(m, ratio) for m in shapes]
