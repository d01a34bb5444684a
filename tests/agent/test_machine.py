"""The pure turn machine, driven input by input."""

from __future__ import annotations

from actors.agent._machine import (
    CONTINUE_INSTRUCTION,
    EMPTY_ANSWER,
    GRACE_INSTRUCTION,
    NO_KEY,
    CallModel,
    Cancel,
    CancelModel,
    CancelTimer,
    CancelTool,
    Emit,
    MachineConfig,
    ModelFailed,
    ModelReplied,
    Persist,
    Persisted,
    PersistFailed,
    RunTool,
    StartTimer,
    Stop,
    TimerFired,
    ToolDone,
    UserInput,
)
from actors.agent._sanitize import cancelled_result, sanitize
from protocols import Token, TurnMark
from protocols._session import (
    ModelFallback,
    ModelRetrying,
    ToolFinished,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnQueued,
    TurnRejected,
    TurnStarted,
)
from tests.agent.machine_driver import TRAITS, Driver, call


def events(effects: list) -> list:
    return [e.event for e in effects if isinstance(e, Emit)]


def reply_with_calls(driver: Driver, token: str, calls: tuple) -> list:
    """The model asks for tools; the machine persists the calls first, then runs them."""
    effects = driver.feed(ModelReplied(token=token, content="", tool_calls=calls))
    persist = [p for p in driver.of(Persist, effects) if p.acked]
    assert persist and driver.of(RunTool, effects) == [], "tools must wait until their calls are durable"
    return effects + driver.feed(Persisted(token=persist[0].token))


def start(driver: Driver, text: str = "hello", turn_id: str = "t1") -> CallModel:
    effects = driver.feed(UserInput(turn_id=turn_id, text=text, now=0.0))
    persist = driver.of(Persist, effects)[0]
    assert persist.acked
    effects = driver.feed(Persisted(token=persist.token, now=0.0))
    return driver.of(CallModel, effects)[0]


def test_a_text_turn_persists_the_user_message_before_calling_the_model_and_completes() -> None:
    driver = Driver()
    effects = driver.feed(UserInput(turn_id="t1", text="hello", now=0.0))
    assert [type(e).__name__ for e in effects] == ["Emit", "StartTimer", "Persist"]
    assert isinstance(events(effects)[0], TurnStarted)
    assert driver.of(CallModel) == []  # not before the user message is durable
    model = start(Driver())
    assert [m.role for m in model.messages] == ["system", "user"]
    assert model.use_tools
    driver = Driver()
    model = start(driver)
    effects = driver.feed(ModelReplied(token=model.token, content="hi there", input_tokens=5, output_tokens=2))
    assert events(effects) == [], "the turn completes only once its answer is durable"
    (persist,) = driver.of(Persist, effects)
    assert persist.acked and persist.messages[0].content == "hi there"
    effects += driver.feed(Persisted(token=persist.token))
    done = events(effects)[-1]
    assert isinstance(done, TurnCompleted)
    assert (done.text, done.iterations, done.input_tokens, done.session_id) == ("hi there", 1, 5, "s1")
    assert driver.state.turn is None
    assert [m.role for m in driver.state.transcript] == ["user", "assistant"]
    assert CancelTimer(token=Token(step="deadline", turn_id="t1")) in effects


def test_two_tool_rounds_run_independent_reads_together_and_return_results_in_the_models_order() -> None:
    driver = Driver()
    model = start(driver)
    calls = (call("a", "read_file", '{"path": "x"}'), call("b", "read_file", '{"path": "y"}'))
    effects = reply_with_calls(driver, model.token, calls)
    runs = driver.of(RunTool, effects)
    assert [r.call_id for r in runs] == ["a", "b"]
    assert runs[0].arguments == {"path": "x"}
    assert driver.of(CallModel, driver.feed(ToolDone(call_id="b", content="B"))) == []
    second = driver.of(CallModel, driver.feed(ToolDone(call_id="a", content="A")))[0]
    roles = [(m.role, m.tool_call_id) for m in second.messages]
    assert roles[-3:] == [("assistant", None), ("tool", "a"), ("tool", "b")]
    effects = reply_with_calls(driver, second.token, (call("c", "terminal", '{"command": "ls"}'),))
    assert [r.call_id for r in driver.of(RunTool, effects)] == ["c"]
    third = driver.of(CallModel, driver.feed(ToolDone(call_id="c", content="files")))[0]
    final = events(driver.answer(ModelReplied(token=third.token, content="done")))[-1]
    assert isinstance(final, TurnCompleted) and final.iterations == 3
    assert sanitize(driver.state.transcript)[1] == 0


def test_writes_to_the_same_path_run_one_after_the_other() -> None:
    driver = Driver()
    model = start(driver)
    calls = (
        call("w1", "write_file", '{"path": "f", "content": "1"}'),
        call("w2", "write_file", '{"path": "f", "content": "2"}'),
        call("w3", "write_file", '{"path": "g", "content": "3"}'),
    )
    effects = reply_with_calls(driver, model.token, calls)
    assert [r.call_id for r in driver.of(RunTool, effects)] == ["w1"]
    effects = driver.feed(ToolDone(call_id="w1", content="ok"))
    assert [r.call_id for r in driver.of(RunTool, effects)] == ["w2", "w3"]


def test_a_call_with_malformed_arguments_is_answered_with_an_error_and_never_run() -> None:
    driver = Driver()
    model = start(driver)
    calls = (call("bad", "read_file", '{"path": '), call("good", "read_file", '{"path": "x"}'), call("nope", "rm_rf", "{}"))
    effects = reply_with_calls(driver, model.token, calls)
    assert [r.call_id for r in driver.of(RunTool, effects)] == ["good"]
    finished = {e.call_id: e for e in events(effects) if isinstance(e, ToolFinished)}
    assert not finished["bad"].ok and "not valid JSON" in finished["bad"].preview
    assert "unknown tool 'rm_rf'" in finished["nope"].preview and "read_file" in finished["nope"].preview


def test_missing_or_repeated_tool_call_ids_are_made_unique() -> None:
    driver = Driver()
    model = start(driver)
    calls = (call("", "read_file", '{"path": "x"}'), call("same", "read_file", '{"path": "y"}'), call("same", "read_file", '{"path": "z"}'))
    effects = reply_with_calls(driver, model.token, calls)
    ids = [r.call_id for r in driver.of(RunTool, effects)]
    assert len(set(ids)) == 3 and all(ids)


def test_cancel_during_tools_cancels_them_settles_the_transcript_and_ignores_late_results() -> None:
    driver = Driver()
    model = start(driver)
    reply_with_calls(driver, model.token, (call("a", "terminal", '{"command": "sleep 30"}'),))
    effects = driver.feed(Cancel(reason="stop"))
    assert CancelTool(call_id="a") in effects
    assert isinstance(events(effects)[-1], TurnCancelled)
    assert driver.state.transcript[-1].content == cancelled_result("stop")
    assert sanitize(driver.state.transcript)[1] == 0
    assert driver.feed(ToolDone(call_id="a", content="late")) == []
    assert driver.state.transcript[-1].content == cancelled_result("stop")


def test_a_stop_ends_the_running_and_the_queued_turns_and_starts_none() -> None:
    """A stopping incarnation (shutdown, a lost lease) answers every turn it holds; a queued turn
    it started would never be answered. Cancelled, or failed with the kind given."""
    for failed in ("", "not_owner"):
        driver = Driver()
        model = start(driver)
        reply_with_calls(driver, model.token, (call("a", "terminal", '{"command": "sleep 30"}'),))
        queued = driver.feed(UserInput(turn_id="t2", text="and then", now=1.0)) + driver.feed(UserInput(turn_id="t3", text="later", now=1.0))
        assert all(isinstance(e, TurnQueued) for e in events(queued)) and [q.turn_id for q in driver.state.queued] == ["t2", "t3"]
        effects = driver.feed(Stop(reason="node-b took it", failed=failed, now=2.0))
        ended = events(effects)
        assert [e.turn_id for e in ended] == ["t1", "t2", "t3"]
        if failed:
            assert all(isinstance(e, TurnFailed) and e.kind == "not_owner" and e.error == "node-b took it" for e in ended), ended
        else:
            assert all(isinstance(e, TurnCancelled) and e.reason == "node-b took it" for e in ended), ended
        assert CancelTool(call_id="a") in effects and driver.of(CallModel, effects) == [] and not any(isinstance(e, TurnStarted) for e in ended)
        assert driver.state.turn is None and driver.state.queued == ()
        assert driver.state.transcript[-1].role == "tool" and sanitize(driver.state.transcript)[1] == 0  # the call has its one result
        # every turn's end is recorded, the queued ones' too (they never started: no messages)
        marks = {p.turn.turn_id: p for p in driver.of(Persist, effects) if p.turn is not None}
        assert sorted(marks) == ["t1", "t2", "t3"]
        assert {marks[t].turn.event for t in marks} == {"failed" if failed else "cancelled"}  # type: ignore[union-attr]
        assert marks["t2"].messages == () and marks["t3"].messages == ()
        assert driver.feed(ToolDone(call_id="a", content="late")) == []


def test_cancel_during_the_model_call_cancels_the_stream() -> None:
    driver = Driver()
    model = start(driver)
    effects = driver.feed(Cancel())
    assert CancelModel(token=model.token) in effects
    assert driver.feed(ModelReplied(token=model.token, content="too late")) == []


def test_a_rate_limit_rotates_the_key_then_waits_for_the_first_key_back_and_a_bad_key_fails_with_advice() -> None:
    driver = Driver()
    model = start(driver)
    effects = driver.feed(ModelFailed(token=model.token, kind="rate_limit", status=429, detail="slow down", retry_after=2.0, now=1.0))
    retrying = events(effects)[0]
    assert isinstance(retrying, ModelRetrying) and (retrying.attempt, retrying.delay_s) == (1, 0.0)
    assert driver.of(StartTimer, effects) == [], "another key is tried at once"
    rotated = driver.of(CallModel, effects)[0]
    # The pool has no other key: the turn waits until the benched one is back.
    effects = driver.feed(ModelFailed(token=rotated.token, kind=NO_KEY, detail="every key is rate limited", retry_after=2.0, benched="rate_limit", now=1.0))
    timer = driver.of(StartTimer, effects)[0]
    assert timer.delay == 2.0
    effects = driver.feed(TimerFired(token=timer.token, now=3.0))
    again = driver.of(CallModel, effects)[0]
    effects = driver.feed(ModelFailed(token=again.token, kind="auth", status=401, detail="invalid key", now=3.0))
    last = driver.of(CallModel, effects)[0]
    # Every key benched for a bad key: waiting would not help, the turn fails with the advice.
    effects = driver.feed(ModelFailed(token=last.token, kind=NO_KEY, detail="key-1 benched (auth)", retry_after=300.0, benched="auth", now=3.0))
    failed = events(effects)[-1]
    assert isinstance(failed, TurnFailed) and failed.kind == "auth"
    assert "OPENAI_API_KEY" in failed.error and "invalid key" in failed.error and "key-1 benched" in failed.error


def test_a_rate_limit_whose_keys_are_back_only_after_the_deadline_fails_at_once_saying_so() -> None:
    driver = Driver(MachineConfig(traits=TRAITS, turn_timeout=60.0))
    model = start(driver)
    rotated = driver.of(CallModel, driver.feed(ModelFailed(token=model.token, kind="rate_limit", status=429, now=1.0)))[0]
    effects = driver.feed(ModelFailed(token=rotated.token, kind=NO_KEY, detail="first key back in 3600 s", retry_after=3600.0, benched="rate_limit", now=1.0))
    failed = events(effects)[-1]
    assert isinstance(failed, TurnFailed) and failed.kind == "rate_limit" and "after this turn's deadline" in failed.error


def test_the_fallback_chain_takes_over_when_keys_or_retries_run_out_and_the_next_turn_starts_on_the_primary() -> None:
    chain = (("openrouter", "big-model"), ("custom:local", "small-model"))
    driver = Driver(MachineConfig(traits=TRAITS, providers=chain, max_attempts=2, retry_base=0.01))
    model = start(driver)
    assert model.provider == 0
    rotated = driver.of(CallModel, driver.feed(ModelFailed(token=model.token, kind="billing", status=402, detail="no credit", now=1.0)))[0]
    effects = driver.feed(ModelFailed(token=rotated.token, kind=NO_KEY, detail="every key is out of credit", retry_after=3600.0, benched="billing", now=1.0))
    fallback = events(effects)[0]
    assert isinstance(fallback, ModelFallback)
    assert (fallback.from_provider, fallback.to_provider, fallback.model) == ("openrouter", "custom:local", "small-model")
    assert "out of credit" in fallback.reason
    moved = driver.of(CallModel, effects)[0]
    assert moved.provider == 1 and moved.token != model.token
    # The last provider: nothing to fall back to, so its failures end the turn.
    timer = driver.of(StartTimer, driver.feed(ModelFailed(token=moved.token, kind="server", status=500, now=2.0)))[0]
    again = driver.of(CallModel, driver.feed(TimerFired(token=timer.token, now=3.0)))[0]
    failed = events(driver.feed(ModelFailed(token=again.token, kind="server", status=500, now=3.0)))[-1]
    assert isinstance(failed, TurnFailed) and "after 2 attempts" in failed.error
    assert start(driver, turn_id="t2").provider == 0, "each turn starts on the primary"


def test_a_model_the_provider_does_not_know_falls_back_at_once_and_without_a_fallback_fails() -> None:
    driver = Driver(MachineConfig(traits=TRAITS, providers=(("a", "m1"), ("b", "m2"))))
    model = start(driver)
    effects = driver.feed(ModelFailed(token=model.token, kind="model_not_found", status=404, detail="no such model", now=1.0))
    assert isinstance(events(effects)[0], ModelFallback) and driver.of(CallModel, effects)[0].provider == 1
    alone = Driver()
    model = start(alone)
    failed = events(alone.feed(ModelFailed(token=model.token, kind="model_not_found", status=404, detail="no such model")))[-1]
    assert isinstance(failed, TurnFailed) and failed.kind == "model_not_found"


def test_an_answer_cut_by_the_token_limit_is_continued_up_to_three_times_and_stored_as_one() -> None:
    driver = Driver()
    model = start(driver)
    parts = ["one ", "two ", "three ", "four"]
    for number, part in enumerate(parts[:3], start=1):
        effects = driver.feed(ModelReplied(token=model.token, content=part, finish_reason="length", now=float(number)))
        assert driver.of(Persist, effects) == [] and events(effects) == [], "a cut answer is not stored or shown as final"
        model = driver.of(CallModel, effects)[0]
        assert model.messages[-2].content == "".join(parts[:number]) and model.messages[-1].content == CONTINUE_INSTRUCTION
    done = events(driver.answer(ModelReplied(token=model.token, content=parts[3], finish_reason="length")))[-1]
    assert isinstance(done, TurnCompleted) and done.text == "one two three four", "after three continuations the partial answer is kept"
    assert driver.state.transcript[-1].content == "one two three four"
    assert all(m.content != CONTINUE_INSTRUCTION for m in driver.state.transcript), "the request to continue is never stored"


def test_an_empty_or_reasoning_only_reply_is_asked_again_once_then_recorded_as_empty() -> None:
    driver = Driver()
    model = start(driver)
    effects = driver.feed(ModelReplied(token=model.token, content="  ", reasoning="thinking...", finish_reason="stop"))
    assert events(effects) == []
    again = driver.of(CallModel, effects)[0]
    done = events(driver.answer(ModelReplied(token=again.token, content="", finish_reason="stop")))[-1]
    assert isinstance(done, TurnCompleted) and done.text == EMPTY_ANSWER
    driver2 = Driver()
    model = start(driver2)
    again = driver2.of(CallModel, driver2.feed(ModelReplied(token=model.token, content="")))[0]
    done = events(driver2.answer(ModelReplied(token=again.token, content="here it is")))[-1]
    assert isinstance(done, TurnCompleted) and done.text == "here it is"


def test_retries_stop_after_the_attempt_limit() -> None:
    driver = Driver(MachineConfig(traits=TRAITS, max_attempts=2, retry_base=0.01))
    model = start(driver)
    timer = driver.of(StartTimer, driver.feed(ModelFailed(token=model.token, kind="server", status=500)))[0]
    again = driver.of(CallModel, driver.feed(TimerFired(token=timer.token)))[0]
    failed = events(driver.feed(ModelFailed(token=again.token, kind="server", status=500)))[-1]
    assert isinstance(failed, TurnFailed) and "after 2 attempts" in failed.error


def test_the_iteration_budget_ends_with_one_tool_less_grace_call() -> None:
    driver = Driver(MachineConfig(traits=TRAITS, max_iterations=2))
    model = start(driver)
    reply_with_calls(driver, model.token, (call("a", "read_file", '{"path": "x"}'),))
    second = driver.of(CallModel, driver.feed(ToolDone(call_id="a", content="A")))[0]
    # The budget is used up: the calls are answered without running, no need to wait for the store.
    effects = driver.feed(ModelReplied(token=second.token, content="", tool_calls=(call("b", "read_file", '{"path": "y"}'),)))
    assert driver.of(RunTool, effects) == []
    (persist,) = driver.of(Persist, effects)  # the call and its "not run" result: one write, both or neither
    assert [(m.role, m.tool_call_id) for m in persist.messages] == [("assistant", None), ("tool", "b")]
    grace = driver.of(CallModel, effects)[0]
    assert not grace.use_tools
    assert grace.messages[-1].content == GRACE_INSTRUCTION
    final = events(driver.answer(ModelReplied(token=grace.token, content="summary")))[-1]
    assert isinstance(final, TurnCompleted) and final.text == "summary"
    assert sanitize(driver.state.transcript)[1] == 0


def test_busy_policies_queue_reject_and_interrupt() -> None:
    driver = Driver()
    model = start(driver)
    queued = events(driver.feed(UserInput(turn_id="t2", text="next")))
    assert isinstance(queued[0], TurnQueued) and queued[0].position == 1
    rejected = events(driver.feed(UserInput(turn_id="t3", text="no", policy="reject")))
    assert isinstance(rejected[0], TurnRejected) and "busy" in rejected[0].reason
    effects = driver.answer(ModelReplied(token=model.token, content="first done"))
    kinds = [type(e).__name__ for e in events(effects)]
    assert kinds == ["TurnCompleted", "TurnStarted"]
    effects = driver.feed(UserInput(turn_id="t4", text="now!", policy="interrupt"))
    kinds = [(type(e).__name__, e.turn_id) for e in events(effects)]
    assert kinds == [("TurnCancelled", "t2"), ("TurnStarted", "t4")]


def test_cancelling_a_queued_turn_by_id_ends_it_with_its_own_row_and_leaves_the_running_turn() -> None:
    driver = Driver()
    start(driver)
    driver.feed(UserInput(turn_id="t2", text="next"))
    effects = driver.feed(Cancel(reason="never mind", turn_id="t2"))
    assert [(type(e).__name__, e.turn_id) for e in events(effects)] == [("TurnCancelled", "t2")]
    [row] = [p for p in driver.of(Persist, effects) if p.turn is not None]
    assert row.turn == TurnMark(turn_id="t2", event="cancelled", reason="never mind") and row.messages == ()
    assert driver.state.turn is not None and driver.state.turn.turn_id == "t1" and driver.state.queued == ()


def test_the_turn_deadline_fails_the_turn() -> None:
    driver = Driver()
    start(driver)
    failed = events(driver.feed(TimerFired(token=Token(step="deadline", turn_id="t1"), now=900.0)))[-1]
    assert isinstance(failed, TurnFailed) and failed.kind == "deadline"


def test_a_user_message_that_cannot_be_saved_is_taken_back_and_the_turn_fails() -> None:
    driver = Driver()
    effects = driver.feed(UserInput(turn_id="t1", text="hello"))
    token = driver.of(Persist, effects)[0].token
    failed = events(driver.feed(PersistFailed(token=token, error="disk full")))[-1]
    assert isinstance(failed, TurnFailed) and "disk full" in failed.error and "send it again" in failed.error
    assert driver.state.transcript == ()
