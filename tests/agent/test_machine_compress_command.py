"""``/compress [topic]`` in the pure turn machine: a turn of its own with no message, one forced
pass, the turn's end committed with the segment, and no model answer after it."""

from __future__ import annotations

from actors.agent._compress import SUMMARY_PREFIX, CompressionGuard
from actors.agent._machine import CallModel, MachineConfig, ModelFailed, ModelReplied, Persist, Persisted, PersistFailed, SessionState, UserInput
from actors.agent._sanitize import sanitize
from protocols import ContextCompressed, TurnCompleted, TurnFailed, TurnQueued, TurnStarted
from tests.agent.machine_driver import TRAITS, Driver, events
from tests.agent.test_machine_compression import SETTINGS, driver, long_history


def request_compress(d: Driver, focus: str = "", turn_id: str = "c1", now: float = 0.0) -> list[object]:
    effects = d.feed(UserInput(turn_id=turn_id, text=focus, compress=True, now=now))
    [opening] = d.of(Persist, effects)
    assert opening.messages == () and opening.turn is not None and opening.turn.event == "started"
    return [*effects, *d.feed(Persisted(token=opening.token, now=now))]


def test_compress_with_a_topic_summarises_once_commits_the_segment_with_the_turns_end_and_asks_the_model_nothing_more() -> None:
    d = driver(summary_model="small-model")
    before = d.state.transcript
    # Compression is paused (two weak passes) and cooling down: /compress goes ahead anyway.
    d.state = SessionState(session_id="s1", system_prompt="p", transcript=before, guard=CompressionGuard(weak_passes=2, cooldown_until=1e9))
    effects = request_compress(d, "tidal tables")
    assert [type(e).__name__ for e in events(effects)] == ["TurnStarted"]
    assert next(e for e in events(effects) if isinstance(e, TurnStarted)).text == "/compress tidal tables"
    [summary_call] = d.of(CallModel, effects)
    assert summary_call.token.step == "compress" and summary_call.model == "small-model"
    assert "tidal tables" in (summary_call.messages[0].content or ""), "the topic reaches the summariser's instructions"
    assert d.state.transcript == before, "nothing changes before the summary is back"

    effects = d.feed(ModelReplied(token=summary_call.token, content="Tides were discussed at length."))
    [segment] = d.of(Persist, effects)
    assert segment.segment is not None and segment.turn is not None and segment.turn.event == "completed"
    assert any(SUMMARY_PREFIX in (m.content or "") for m in segment.messages) and sanitize(segment.messages)[1] == 0
    assert events(effects) == [], "nothing is announced before the commit"

    effects = d.feed(Persisted(token=segment.token, now=1.0))
    compressed, completed = events(effects)
    assert isinstance(compressed, ContextCompressed) and compressed.summarised == segment.segment.summarised
    assert isinstance(completed, TurnCompleted) and f"{compressed.summarised} messages summarised" in completed.text
    assert d.of(CallModel, effects) == [], "a /compress turn makes no model call after its pass"
    assert d.state.turn is None and len(d.state.transcript) < len(before)


def test_compress_on_a_short_conversation_says_there_is_nothing_to_compress_and_records_the_turns_end() -> None:
    d = driver()
    d.state = SessionState(session_id="s1", system_prompt="p", transcript=long_history(1))
    effects = request_compress(d)
    assert d.of(CallModel, effects) == []
    [completed] = [e for e in events(effects) if isinstance(e, TurnCompleted)]
    assert completed.text.startswith("Nothing to compress")
    [end] = [p for p in d.of(Persist, effects) if p.turn is not None and p.turn.event == "completed"]
    assert end.messages == () and end.segment is None
    assert d.state.transcript == long_history(1) and d.state.turn is None


def test_compress_runs_even_with_compression_off_in_the_config() -> None:
    d = Driver(MachineConfig(traits=TRAITS, context_length=4_096))
    d.state = SessionState(session_id="s1", system_prompt="p", transcript=long_history())
    [summary_call] = d.of(CallModel, request_compress(d))
    assert summary_call.token.step == "compress"


def test_a_failed_summary_fails_the_compress_turn_and_leaves_the_conversation_as_it_was() -> None:
    d = driver()
    before = d.state.transcript
    [summary_call] = d.of(CallModel, request_compress(d))
    effects = d.feed(ModelFailed(token=summary_call.token, kind="timeout", detail="timed out after 300 s", now=2.0))
    [failed] = [e for e in events(effects) if isinstance(e, TurnFailed)]
    assert failed.kind == "compression" and "timed out after 300 s" in failed.error and "unchanged" in failed.error
    assert d.of(CallModel, effects) == [] and d.state.transcript == before and d.state.turn is None
    [end] = [p for p in d.of(Persist, effects) if p.turn is not None]
    assert end.turn is not None and end.turn.event == "failed"


def test_compress_sent_during_a_turn_waits_its_turn_then_runs() -> None:
    d = driver()
    d.config = MachineConfig(traits=TRAITS, compression=SETTINGS, context_length=1_000_000)  # no preflight pass
    effects = d.feed(UserInput(turn_id="t1", text="and tomorrow?", now=0.0))
    effects = d.feed(Persisted(token=d.of(Persist, effects)[0].token, now=0.0))
    [call] = d.of(CallModel, effects)
    queued = d.feed(UserInput(turn_id="c1", text="", compress=True, now=0.1))
    assert [type(e) for e in events(queued)] == [TurnQueued] and d.of(CallModel, queued) == []
    effects = d.answer(ModelReplied(token=call.token, content="Calm seas."))
    started = [e for e in events(effects) if isinstance(e, TurnStarted)]
    assert [e.turn_id for e in started] == ["c1"] and started[0].text == "/compress"
    [opening] = [p for p in d.of(Persist, effects) if p.turn is not None and p.turn.turn_id == "c1"]
    [summary_call] = d.of(CallModel, d.feed(Persisted(token=opening.token, now=1.0)))
    assert summary_call.token.step == "compress" and summary_call.token.turn_id == "c1"


def test_a_refused_record_of_the_compress_turn_keeps_every_message() -> None:
    d = driver()
    before = d.state.transcript
    effects = d.feed(UserInput(turn_id="c1", text="", compress=True, now=0.0))
    effects = d.feed(PersistFailed(token=d.of(Persist, effects)[0].token, error="disk full", now=0.0))
    [failed] = [e for e in events(effects) if isinstance(e, TurnFailed)]
    assert "compression could not start" in failed.error and "disk full" in failed.error
    assert d.state.transcript == before, "a turn that opened with no message takes none back"


def test_compress_that_only_prunes_old_tool_results_ends_its_turn_with_the_segment() -> None:
    from actors.agent._compress import CompressionSettings
    from tests.agent.test_machine_compression import tool_history

    settings = CompressionSettings(protect_first_n=1, tail_token_budget=600, tail_min_messages=2, summary_min_tokens=2_000, summary_ceiling_tokens=2_000)
    d = Driver(MachineConfig(traits=TRAITS, compression=settings, context_length=50_000))
    d.state = SessionState(session_id="s1", system_prompt="p", transcript=tool_history(6, 2_000))
    effects = request_compress(d)
    assert d.of(CallModel, effects) == [], "too little is left for a summary: no summary call"
    [segment] = [p for p in d.of(Persist, effects) if p.segment is not None]
    assert segment.turn is not None and segment.turn.event == "completed"
    compressed, completed = events(d.feed(Persisted(token=segment.token, now=1.0)))
    assert isinstance(compressed, ContextCompressed) and isinstance(completed, TurnCompleted)
    assert completed.text.startswith("Shrank old tool results") and d.state.turn is None
