"""reasoning_details: fragments of a streamed block joined, other blocks kept as their bytes;
usage read in each provider's spelling; prices of cached tokens."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from actors.agent import ConfigError, Price, load_model_settings
from actors.agent._pricing import cost
from actors.agent._reasoning_details import assemble, whole
from actors.agent._request import wire_message
from actors.agent._wire import Tokens, Usage, tokens_of
from protocols import ChatMessage

ENCRYPTED = b'{"type":"reasoning.encrypted","data":"gAAAA\\u00e9==","id":"rs_1","format":"openai-responses-v1","index":1}'


def raw(text: str | bytes) -> msgspec.Raw:
    return msgspec.Raw(text.encode() if isinstance(text, str) else text)


def test_a_thinking_block_streamed_in_fragments_is_joined_with_its_signature() -> None:
    fragments = [
        raw('{"type":"reasoning.text","text":"Let","format":"anthropic-claude-v1","index":0}'),
        raw('{"type":"reasoning.text","text":" me think.","format":"anthropic-claude-v1","index":0}'),
        raw('{"type":"reasoning.text","signature":"Et8BCmUIsig==","format":"anthropic-claude-v1","index":0}'),
    ]
    joined = assemble(fragments)
    assert joined is not None
    assert json.loads(joined) == [
        {"type": "reasoning.text", "text": "Let me think.", "format": "anthropic-claude-v1", "index": 0, "signature": "Et8BCmUIsig=="}
    ]


def test_a_block_on_its_own_keeps_the_exact_bytes_it_arrived_in() -> None:
    joined = assemble([raw('{"type":"reasoning.text","text":"a","index":0}'), raw(ENCRYPTED)])
    assert joined is not None
    assert joined.encode() == b'[{"type":"reasoning.text","text":"a","index":0},' + ENCRYPTED + b"]"


def test_blocks_of_another_index_or_type_are_not_joined() -> None:
    fragments = [
        raw('{"type":"reasoning.summary","summary":"one","index":0}'),
        raw('{"type":"reasoning.summary","summary":" two","index":0}'),
        raw('{"type":"reasoning.text","text":"x","index":0}'),
        raw('{"type":"reasoning.text","text":"y","index":1}'),
    ]
    assert json.loads(assemble(fragments) or "") == [
        {"type": "reasoning.summary", "summary": "one two", "index": 0},
        {"type": "reasoning.text", "text": "x", "index": 0},
        {"type": "reasoning.text", "text": "y", "index": 1},
    ]
    assert assemble([]) is None


def test_a_whole_reply_keeps_its_list_and_an_empty_one_is_none() -> None:
    assert json.loads(whole([{"type": "reasoning.text", "text": "t"}]) or "") == [{"type": "reasoning.text", "text": "t"}]
    assert whole([]) is None
    assert whole(None) is None


def test_an_assistant_message_sends_its_reasoning_and_details_back_and_the_transcript_is_not_changed() -> None:
    details = '[{"type":"reasoning.text","text":"t","signature":"s"}]'
    message = ChatMessage(role="assistant", content="answer", reasoning="I thought", reasoning_details=details)
    wire = wire_message(message)
    assert wire["reasoning_content"] == "I thought"
    assert msgspec.json.encode(wire).endswith(b'"reasoning_details":' + details.encode() + b"}")
    assert message.to_openai() == {"role": "assistant", "content": "answer"}
    assert "reasoning_content" not in wire_message(ChatMessage(role="user", content="hi", reasoning="not mine"))


def test_usage_is_read_in_openai_openrouter_and_anthropic_spellings() -> None:
    openai = msgspec.json.decode(b'{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":60}}', type=Usage)
    assert tokens_of(openai) == Tokens(input=100, output=5, cache_read=60, cache_write=0)
    openrouter = msgspec.json.decode(
        b'{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":80}}', type=Usage
    )
    assert tokens_of(openrouter) == Tokens(input=100, output=5, cache_read=0, cache_write=80)
    # Anthropic's counts leave cached tokens out of the input: they are added.
    anthropic = msgspec.json.decode(b'{"prompt_tokens":10,"completion_tokens":5,"cache_read_input_tokens":70,"cache_creation_input_tokens":20}', type=Usage)
    assert tokens_of(anthropic) == Tokens(input=100, output=5, cache_read=70, cache_write=20)
    assert tokens_of(Usage()) == Tokens()


def test_cached_tokens_are_charged_at_their_own_prices_or_the_input_price() -> None:
    price = Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    # 1M prompt tokens: 600k read, 200k written, 200k plain; 100k out.
    assert cost(price, 1_000_000, 100_000, 600_000, 200_000) == pytest.approx(0.6 + 0.18 + 0.75 + 1.5)
    assert cost(Price(input=3.0, output=15.0), 1_000_000, 0, 600_000, 0) == pytest.approx(3.0)
    assert cost(price, 100, 0, 500, 0) == pytest.approx(100 * 0.3 / 1e6)  # never more cached than input


def write(home: Path, text: str) -> Path:
    home.mkdir(exist_ok=True)
    (home / "config.yaml").write_text(text)
    return home


ENV = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://h/v1"}


def test_config_gives_cache_prices_and_the_prompt_caching_switch(tmp_path: Path) -> None:
    text = "model: anthropic/claude-sonnet-4\npricing:\n  anthropic/claude-sonnet-4: {input: 3, output: 15, cache_read: 0.3}\nprompt_caching:\n  enabled: false\n  cache_ttl: 1h\n"
    settings = load_model_settings(write(tmp_path / "h", text), env=ENV)
    assert settings.prices == {"anthropic/claude-sonnet-4": Price(input=3.0, output=15.0, cache_read=0.3)}
    assert not settings.caches_prompts  # off, although the model is Claude
    assert settings.caching.cache_ttl == "1h"
    auto = load_model_settings(write(tmp_path / "a", "model: anthropic/claude-sonnet-4\n"), env=ENV)
    assert auto.caches_prompts
    assert not load_model_settings(write(tmp_path / "g", "model: gpt-4o\n"), env=ENV).caches_prompts
    forced = load_model_settings(write(tmp_path / "f", "model: gpt-4o\nprompt_caching: {enabled: true}\n"), env=ENV)
    assert forced.caches_prompts
    said_auto = load_model_settings(write(tmp_path / "s", "model: gpt-4o\nprompt_caching: {enabled: auto}\n"), env=ENV)
    assert not said_auto.caches_prompts


@pytest.mark.parametrize(
    ("section", "says"),
    [
        ("prompt_caching: yes please\n", "'prompt_caching' must be a mapping"),
        ("prompt_caching: {enabled: sometimes}\n", "prompt_caching.enabled must be auto, true or false, not 'sometimes'"),
        ("prompt_caching: {cache_ttl: 2h}\n", "prompt_caching.cache_ttl must be 5m or 1h"),
        ("pricing:\n  m: {input: 1, output: 2, cache_read: -1}\n", "pricing.m.cache_read must be USD per million tokens"),
        ("pricing:\n  m: {input: 1, output: 2, cache_write: cheap}\n", "pricing.m.cache_write must be USD per million tokens"),
    ],
)
def test_bad_caching_and_cache_price_values_say_which_key_and_what_it_takes(tmp_path: Path, section: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        load_model_settings(write(tmp_path, "model: m\n" + section), env=ENV)
