"""Compression as steps of the pure turn machine: preflight, the summary call, the new segment,
an overflow, a failed summary. Driven input by input (the planner itself: test_compress.py)."""

from __future__ import annotations

import dataclasses

import msgspec

from actors.agent._compress import SUMMARY_PREFIX, CompressionSettings
from actors.agent._machine import CallModel, MachineConfig, ModelFailed, ModelReplied, Persist, Persisted, SessionState, UserInput
from actors.agent._sanitize import sanitize
from actors.agent._tokens import request_size
from protocols import ChatMessage, ContextCompressed, ToolCall
from tests.agent.machine_driver import TRAITS, Driver, call, events

SETTINGS = CompressionSettings(protect_first_n=1, tail_token_budget=200, tail_min_messages=2, summary_min_tokens=50, summary_ceiling_tokens=200)


def long_history(turns: int = 30) -> tuple[ChatMessage, ...]:
    history: list[ChatMessage] = []
    for i in range(turns):
        history += [
            ChatMessage(role="user", content=f"question {i} " + "about tides " * 40),
            ChatMessage(role="assistant", content=f"answer {i} " + "water " * 60),
        ]
    return tuple(history)


def driver(**config: object) -> Driver:
    d = Driver(MachineConfig(traits=TRAITS, compression=SETTINGS, context_length=4_096, **config))  # type: ignore[arg-type]
    d.state = SessionState(session_id="s1", system_prompt="You are a test agent.", transcript=long_history())
    return d


def open_turn(d: Driver) -> CallModel:
    effects = d.feed(UserInput(turn_id="t1", text="and tomorrow?", now=0.0))
    effects = d.feed(Persisted(token=d.of(Persist, effects)[0].token, now=0.0))
    return d.of(CallModel, effects)[0]


def test_a_prompt_over_the_threshold_is_summarised_committed_as_a_segment_then_the_call_is_made() -> None:
    d = driver(summary_model="small-model")
    summary_call = open_turn(d)
    assert summary_call.token.step == "compress" and summary_call.model == "small-model" and not summary_call.use_tools
    assert "question 5" in (summary_call.messages[-1].content or ""), "the middle is what the summary call reads"

    effects = d.feed(ModelReplied(token=summary_call.token, content="The user asks about tides; answers were given.", input_tokens=900))
    segment = d.of(Persist, effects)[0]
    assert segment.segment is not None and segment.acked and segment.messages == d.state.transcript
    assert segment.segment.tokens_after < segment.segment.tokens_before and segment.segment.summarised > 0
    assert any(SUMMARY_PREFIX in (m.content or "") for m in segment.messages)
    assert d.state.transcript[-1] == ChatMessage(role="user", content="and tomorrow?"), "the last user message is kept"
    assert sanitize(d.state.transcript)[1] == 0
    assert d.of(CallModel, effects) == [], "the next call waits for the segment's commit"

    effects = d.feed(Persisted(token=segment.token, now=1.0))
    [compressed] = [e for e in events(effects) if isinstance(e, ContextCompressed)]
    assert (compressed.tokens_before, compressed.tokens_after, compressed.summarised) == (
        segment.segment.tokens_before,
        segment.segment.tokens_after,
        segment.segment.summarised,
    )
    [model_call] = d.of(CallModel, effects)
    assert model_call.token.step == "model" and model_call.model == ""
    assert model_call.messages[1:] == d.state.transcript


def test_a_context_overflow_compresses_and_calls_again_and_a_failed_summary_never_fails_the_turn() -> None:
    d = driver(summary_model="small-model")
    summary_call = open_turn(d)
    # The summary model is gone: the session's own model writes the summary instead.
    effects = d.feed(ModelFailed(token=summary_call.token, kind="model_not_found", detail="no such model", now=0.5))
    [again] = d.of(CallModel, effects)
    assert again.token.step == "compress" and again.model == ""
    # That fails too: the turn goes on uncompressed, and compression cools down.
    effects = d.feed(ModelFailed(token=again.token, kind="timeout", detail="timed out", now=0.6))
    [plain] = d.of(CallModel, effects)
    assert plain.token.step == "model" and d.state.guard.cooldown_until > 0.6
    # The provider refuses the long prompt: while compression cools down, the turn fails with its words.
    effects = d.feed(ModelFailed(token=plain.token, kind="context_overflow", status=400, detail="maximum context length is 4096 tokens", now=0.7))
    assert [type(e).__name__ for e in events(effects)][-1] == "TurnFailed"


def test_an_overflow_after_the_cooldown_starts_a_pass_and_the_call_is_made_again_on_the_new_segment() -> None:
    d = driver()
    d.config = dataclasses.replace(d.config, context_length=100_000)  # the metadata said 100K; the provider holds 4K
    first = open_turn(d)
    assert first.token.step == "model", "under the threshold: no preflight pass"
    effects = d.feed(ModelFailed(token=first.token, kind="context_overflow", status=400, detail="context length exceeded", now=1.0))
    [summary_call] = d.of(CallModel, effects)
    assert summary_call.token.step == "compress"
    effects = d.feed(ModelReplied(token=summary_call.token, content="notes"))
    effects = d.feed(Persisted(token=d.of(Persist, effects)[0].token, now=2.0))
    [retry] = d.of(CallModel, effects)
    assert retry.token.step == "model" and len(retry.messages) < len(first.messages)


def test_without_compression_configured_nothing_changes() -> None:
    d = Driver(MachineConfig(traits=TRAITS))
    d.state = SessionState(session_id="s1", system_prompt="p", transcript=long_history())
    call = open_turn(d)
    assert call.token.step == "model" and len(call.messages) == 1 + len(long_history()) + 1


def test_calibration_counts_the_tool_schemas_the_reported_prompt_tokens_include() -> None:
    """A provider's prompt_tokens cover the tool schemas: compared with the messages alone, the
    ratio would fall to a third and compression would start far below its threshold."""
    from actors.agent._tokens import RequestSize

    schemas = RequestSize(chars=16_000, fixed=0)
    d = Driver(MachineConfig(traits=TRAITS, compression=SETTINGS, context_length=100_000, tools_size=schemas))
    d.state = SessionState(session_id="s1", system_prompt="You are a test agent.", transcript=long_history(4))
    call = open_turn(d)
    assert call.token.step == "model"
    sent = request_size(call.messages)
    reported = (sent.chars + schemas.chars) // 4 + sent.fixed  # a provider counting 4 characters a token
    d.feed(ModelReplied(token=call.token, content="fine", input_tokens=reported))
    assert 3.8 <= d.state.ratio.chars_per_token <= 4.2, d.state.ratio


def tool_history(turns: int, output_chars: int) -> tuple[ChatMessage, ...]:
    """``turns`` tool turns, each with one result of ``output_chars`` characters."""
    history: list[ChatMessage] = []
    for i in range(turns):
        history += [
            ChatMessage(role="user", content=f"read part {i}"),
            ChatMessage(role="assistant", content=None, tool_calls=(call(f"c{i}", "read_file", f'{{"path": "/f{i}"}}'),)),
            ChatMessage(role="tool", tool_call_id=f"c{i}", name="read_file", content=f"{i}: " + "line of the file\n" * (output_chars // 17)),
            ChatMessage(role="assistant", content=f"read {i}"),
        ]
    return tuple(history)


def test_when_pruning_leaves_too_little_to_summarise_the_pruned_transcript_is_committed_without_a_summary_call() -> None:
    # Large old tool results over the threshold: pruning turns them into one-line stubs, and what
    # is left between head and tail is smaller than a summary's budget, so no summary is asked
    # for; the pruned transcript is the next segment (before the fix nothing was committed, and
    # the results stayed whole until the window overflowed and failed the turn).
    settings = CompressionSettings(protect_first_n=1, tail_token_budget=600, tail_min_messages=2, summary_min_tokens=2_000, summary_ceiling_tokens=2_000)
    d = Driver(MachineConfig(traits=TRAITS, compression=settings, context_length=5_000))
    d.state = SessionState(session_id="s1", system_prompt="You are a test agent.", transcript=tool_history(6, 2_000))
    effects = d.feed(UserInput(turn_id="t1", text="and the next part?", now=0.0))
    effects = d.feed(Persisted(token=d.of(Persist, effects)[0].token, now=0.0))
    assert d.of(CallModel, effects) == [], "no summary call"
    [segment] = d.of(Persist, effects)
    assert segment.segment is not None and segment.segment.summary == "" and segment.segment.summarised == 0
    assert segment.segment.tokens_after < segment.segment.tokens_before * 0.5
    assert len(segment.messages) == len(tool_history(6, 2_000)) + 1 and segment.messages == d.state.transcript
    assert sanitize(d.state.transcript)[1] == 0, "every call keeps its one result"
    assert sum("[pruned]" in (m.content or "") for m in d.state.transcript) >= 4
    effects = d.feed(Persisted(token=segment.token, now=1.0))
    assert [type(e).__name__ for e in events(effects)] == ["ContextCompressed"]
    [model_call] = d.of(CallModel, effects)
    assert model_call.token.step == "model" and model_call.messages[1:] == d.state.transcript


def test_a_pruning_that_saves_less_than_min_saving_commits_nothing_and_the_call_goes_ahead() -> None:
    settings = CompressionSettings(protect_first_n=1, tail_token_budget=600, tail_min_messages=2, summary_min_tokens=2_000, summary_ceiling_tokens=2_000)
    d = Driver(MachineConfig(traits=TRAITS, compression=settings, context_length=2_000))
    d.state = SessionState(session_id="s1", system_prompt="You are a test agent.", transcript=tool_history(6, 220))  # stubs barely shorter
    effects = d.feed(UserInput(turn_id="t1", text="and the next part?", now=0.0))
    effects = d.feed(Persisted(token=d.of(Persist, effects)[0].token, now=0.0))
    [model_call] = d.of(CallModel, effects)
    assert model_call.token.step == "model" and d.of(Persist, effects) == []


def test_when_only_pruning_makes_room_the_pruned_conversation_is_committed_as_a_segment_without_a_summary_call() -> None:
    # Found by the simulator's ``long`` plan: old tool output over the window, a middle that once
    # pruned is smaller than a summary would be. The plan was refused and the pruned transcript
    # thrown away, so every later call of the session overflowed.
    d = driver()
    read = ToolCall(id="c1", name="read_file", arguments='{"path": "big.log"}')
    d.state = msgspec.structs.replace(
        d.state,
        transcript=(
            ChatMessage(role="user", content="read the log"),
            ChatMessage(role="assistant", content="", tool_calls=(read,)),
            ChatMessage(role="tool", tool_call_id="c1", name="read_file", content="x" * 20_000),
            ChatMessage(role="assistant", content="done"),
        ),
    )
    effects = d.feed(UserInput(turn_id="t1", text="and now?", now=0.0))
    effects = d.feed(Persisted(token=d.of(Persist, effects)[0].token, now=0.0))
    assert d.of(CallModel, effects) == [], "no summary call: nothing is worth summarising"
    [segment] = d.of(Persist, effects)
    assert segment.segment is not None and segment.segment.reason == "prune" and segment.segment.summarised == 0
    assert segment.messages == d.state.transcript and len(segment.messages) == 5
    assert (segment.messages[2].content or "").startswith("[pruned] read_file"), "the old result is a one-line stub"
    assert segment.segment.tokens_after < segment.segment.tokens_before

    effects = d.feed(Persisted(token=segment.token, now=1.0))
    [compressed] = [e for e in events(effects) if isinstance(e, ContextCompressed)]
    assert compressed.summarised == 0 and compressed.segment == 1
    [model_call] = d.of(CallModel, effects)
    assert model_call.token.step == "model" and sum(len(m.content or "") for m in model_call.messages) < 1_000
