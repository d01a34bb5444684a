"""The sanitizer, the reasoning splitter, the error classifier and the batch planner."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.agent import ModelClients
from actors.agent._model import _ThinkSplitter
from actors.agent._plan import PlannedCall, ToolTraits, plan_batches
from actors.agent._retry import backoff_delay, classify
from actors.agent._sanitize import UNKNOWN_OUTCOME, repair, sanitize
from actors.chaos import TextReply, open_model_server
from protocols import ChatMessage, ToolCall
from tests.agent.http1_kit import ask, reply_of


def assistant(*ids: str) -> ChatMessage:
    return ChatMessage(role="assistant", content="", tool_calls=tuple(ToolCall(id=i, name="t", arguments="{}") for i in ids))


def tool(call_id: str, text: str = "r") -> ChatMessage:
    return ChatMessage(role="tool", tool_call_id=call_id, name="t", content=text)


def test_sanitize_adds_missing_results_drops_orphans_and_duplicates_and_restores_order() -> None:
    user = ChatMessage(role="user", content="hi")
    messages = [tool("orphan"), user, assistant("a", "b", "c"), tool("c"), tool("a"), tool("a", "again"), user]
    fixed, added = sanitize(messages)
    assert added == 1
    assert [(m.role, m.tool_call_id) for m in fixed] == [
        ("user", None),
        ("assistant", None),
        ("tool", "a"),
        ("tool", "b"),
        ("tool", "c"),
        ("user", None),
    ]
    assert fixed[3].content == UNKNOWN_OUTCOME
    assert fixed[2].content == "r"
    assert sanitize(fixed) == (fixed, 0)


_IDS = st.sampled_from(["a", "b", "c"])
_MESSAGES = st.one_of(
    st.builds(lambda: ChatMessage(role="user", content="u")),
    st.builds(lambda ids: assistant(*ids), st.lists(_IDS, max_size=3)),
    st.builds(tool, _IDS),
)


@given(st.lists(_MESSAGES, max_size=12))
def test_the_fast_path_of_sanitize_agrees_with_the_full_repair_on_any_transcript(messages: list[ChatMessage]) -> None:
    assert sanitize(messages) == repair(messages)


def test_a_result_stored_after_the_next_user_message_still_pairs_and_reused_ids_stay_with_their_turn() -> None:
    first, second = ChatMessage(role="user", content="one"), ChatMessage(role="user", content="two")
    # A failed settle write, redone by a recovery after the next turn's user message.
    late = [first, assistant("a", "b"), second, tool("b", "B"), tool("a", "A")]
    fixed, added = sanitize(late)
    assert added == 0
    assert [(m.role, m.content) for m in fixed] == [("user", "one"), ("assistant", ""), ("tool", "A"), ("tool", "B"), ("user", "two")]
    assert sanitize(fixed) == (fixed, 0)
    # A provider that numbers calls per message: the second turn's result is not the first's.
    reused = [first, assistant("call_0"), second, assistant("call_0"), tool("call_0", "second result")]
    fixed, added = sanitize(reused)
    assert added == 1
    assert [(m.role, m.content) for m in fixed][1:] == [
        ("assistant", ""),
        ("tool", UNKNOWN_OUTCOME),
        ("user", "two"),
        ("assistant", ""),
        ("tool", "second result"),
    ]


def split(*chunks: str) -> tuple[str, str]:
    """Answer and reasoning of a streamed content, as ``call_model`` joins them."""
    splitter = _ThinkSplitter()
    answer, reasoning = [], []
    for chunk in (*chunks, None):
        text, thought = splitter.feed(chunk) if chunk is not None else splitter.flush()
        answer.append(text)
        reasoning.append(thought)
    return "".join(answer), "".join(reasoning)


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        (("plain",), ("plain", "")),
        (("<think>step 1</think>The answer.",), ("The answer.", "step 1")),
        (("<th", "ink>step", " 1</thi", "nk>The ", "answer."), ("The answer.", "step 1")),
        (("<think>a</think>x<think>b</think>y",), ("xy", "ab")),
        (("<think>cut off mid-thought",), ("", "cut off mid-thought")),
        (("a < b and <thin", "g>"), ("a < b and <thing>", "")),
        (("ends with <thi",), ("ends with <thi", "")),
    ],
)
def test_think_blocks_go_to_reasoning_even_when_a_tag_is_split_across_chunks(chunks: tuple[str, ...], expected: tuple[str, str]) -> None:
    assert split(*chunks) == expected


@pytest.mark.parametrize("think", [True, False])
async def test_a_reply_keeps_its_reasoning_apart_from_the_answer(clients: ModelClients, think: bool) -> None:
    async with open_model_server() as server:
        server.script([TextReply(content="It is 4.", reasoning="two and two make four", think=think)])
        reply = reply_of(await ask(clients, server.base_url))
    assert (reply.content, reply.reasoning) == ("It is 4.", "two and two make four")


def test_errors_are_classified_as_retryable_or_fatal() -> None:
    assert classify(429, "slow").retryable
    assert classify(503, "busy").kind == "overloaded"
    assert classify(None, "connection reset").kind == "transport"
    assert classify(500, "oops").retryable
    assert classify(401, "bad key").action == "rotate", "a refused key is benched and another one tried"
    assert not classify(400, "bad field").retryable
    assert classify(400, "This model's maximum context length is 8192 tokens", code="context_length_exceeded").kind == "context_overflow"
    assert classify(400, "bad field").kind == "bad_request"
    assert not classify(404, "no such model").retryable


def test_backoff_honours_retry_after_and_grows_with_jitter_deterministically() -> None:
    assert backoff_delay(1, "k", retry_after=7.0) == 7.0
    first, third = backoff_delay(1, "k"), backoff_delay(3, "k")
    assert 0.5 <= first <= 1.0 and 2.0 <= third <= 4.0
    assert backoff_delay(3, "k") == third
    assert backoff_delay(20, "k", cap=30.0) <= 30.0


def test_the_planner_never_puts_a_read_and_a_write_of_one_path_together_and_caps_groups() -> None:
    traits = {"read": ToolTraits(read_only=True, path_argument="path"), "write": ToolTraits(path_argument="path")}
    calls = [PlannedCall(call_id=str(i), name="read", arguments={"path": f"p{i}"}) for i in range(10)]
    groups = plan_batches(calls, traits, max_parallel=8)
    assert [len(g) for g in groups] == [8, 2]
    mixed = [
        PlannedCall(call_id="r", name="read", arguments={"path": "x"}),
        PlannedCall(call_id="w", name="write", arguments={"path": "x"}),
        PlannedCall(call_id="r2", name="read", arguments={"path": "x"}),
    ]
    assert plan_batches(mixed, traits) == (("r",), ("w",), ("r2",))
