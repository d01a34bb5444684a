"""The system-and-3 cache marks (pure): where each mark goes, and which messages get one."""

from __future__ import annotations

import copy
from typing import Any

from actors.agent._caching import breakpoints, count_breakpoints, is_anthropic_model, is_native_anthropic, mark, with_breakpoints

EPHEMERAL = {"type": "ephemeral"}


def test_a_string_content_becomes_one_text_part_carrying_the_mark() -> None:
    assert mark({"role": "user", "content": "hello"}, EPHEMERAL, native=False) == {
        "role": "user",
        "content": [{"type": "text", "text": "hello", "cache_control": EPHEMERAL}],
    }


def test_a_list_content_gets_the_mark_on_its_last_part_only() -> None:
    message = {"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "data:x"}}]}
    marked = mark(message, EPHEMERAL, native=False)
    assert marked is not None
    assert marked["content"] == [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "data:x"}, "cache_control": EPHEMERAL}]
    assert "cache_control" not in message["content"][1]  # the input is not changed


def test_an_empty_content_gets_the_mark_on_the_message_itself() -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    for empty in ("", None):
        marked = mark({"role": "assistant", "content": empty, "tool_calls": calls}, EPHEMERAL, native=False)
        assert marked == {"role": "assistant", "content": empty, "tool_calls": calls, "cache_control": EPHEMERAL}


def test_a_tool_message_is_marked_on_itself_only_for_anthropics_own_endpoint() -> None:
    tool = {"role": "tool", "content": "result", "tool_call_id": "c1"}
    assert mark(tool, EPHEMERAL, native=True) == {**tool, "cache_control": EPHEMERAL}
    assert mark(tool, EPHEMERAL, native=False) is None


def test_the_system_prompt_and_the_last_three_other_messages_are_marked_four_at_most() -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "rules"}]
    messages += [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(8)]
    before = copy.deepcopy(messages)
    out = with_breakpoints(messages, native=False)
    assert messages == before  # the input list and its dicts are left as they were
    assert count_breakpoints(out) == 4
    marked = [i for i, m in enumerate(out) if isinstance(m["content"], list)]
    assert marked == [0, 6, 7, 8]
    assert [out[i] for i in (1, 2, 3, 4, 5)] == messages[1:6]  # the others are the very same dicts
    assert all(out[i] is messages[i] for i in (1, 2, 3, 4, 5))


def test_a_second_system_message_is_neither_marked_nor_counted_among_the_last_three() -> None:
    roles = ["system", "system", "user", "assistant", "user"]
    assert breakpoints(roles) == (0, 2, 3, 4)


def test_fewer_than_three_messages_are_all_marked() -> None:
    assert breakpoints(["system", "user"]) == (0, 1)
    out = with_breakpoints([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], native=False)
    assert count_breakpoints(out) == 2
    assert breakpoints([]) == ()


def test_without_a_system_prompt_only_the_last_three_are_marked() -> None:
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
        {"role": "assistant", "content": "d"},
    ]
    out = with_breakpoints(messages, native=False)
    assert [isinstance(m["content"], list) for m in out] == [False, True, True, True]
    assert count_breakpoints(out) == 3


def test_a_tool_result_off_anthropic_counts_among_the_last_three_but_carries_no_mark() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "content": "r", "tool_call_id": "c1"},
    ]
    relayed = with_breakpoints(messages, native=False)
    assert count_breakpoints(relayed) == 3
    assert "cache_control" not in relayed[3]
    assert relayed[2]["cache_control"] == EPHEMERAL
    native = with_breakpoints(messages, native=True)
    assert count_breakpoints(native) == 4
    assert native[3]["cache_control"] == EPHEMERAL


def test_an_hour_long_cache_says_so_in_every_mark() -> None:
    out = with_breakpoints([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], native=False, ttl="1h")
    assert out[0]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert out[1]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_claude_is_recognised_natively_and_through_routers_and_by_its_provider() -> None:
    assert is_anthropic_model("claude-sonnet-4-5", "custom")
    assert is_anthropic_model("anthropic/claude-sonnet-4", "openrouter")
    assert is_anthropic_model("Claude-3-Haiku", "custom")
    assert is_anthropic_model("any-name", "anthropic")
    assert not is_anthropic_model("gpt-4o", "openai")
    assert not is_anthropic_model("test-model", "custom")
    assert is_native_anthropic("anthropic", "https://example.test/v1")
    assert is_native_anthropic("custom", "https://api.anthropic.com/v1")
    assert not is_native_anthropic("openrouter", "https://openrouter.ai/api/v1")
