"""The pure turn machine, driven input by input."""

from __future__ import annotations

from actors.agent._machine import (
    GRACE_INSTRUCTION,
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
    TimerFired,
    ToolDone,
    UserInput,
)
from actors.agent._sanitize import CANCELLED, sanitize
from protocols import Token
from protocols._session import (
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
    assert driver.state.transcript[-1].content == CANCELLED
    assert sanitize(driver.state.transcript)[1] == 0
    assert driver.feed(ToolDone(call_id="a", content="late")) == []
    assert driver.state.transcript[-1].content == CANCELLED


def test_cancel_during_the_model_call_cancels_the_stream() -> None:
    driver = Driver()
    model = start(driver)
    effects = driver.feed(Cancel())
    assert CancelModel(token=model.token) in effects
    assert driver.feed(ModelReplied(token=model.token, content="too late")) == []


def test_a_rate_limit_waits_for_retry_after_then_calls_again_and_a_bad_key_fails_with_advice() -> None:
    driver = Driver()
    model = start(driver)
    effects = driver.feed(ModelFailed(token=model.token, kind="rate_limit", status=429, detail="slow down", retry_after=2.0, now=1.0))
    timer = driver.of(StartTimer, effects)[0]
    assert timer.delay == 2.0
    retrying = events(effects)[0]
    assert isinstance(retrying, ModelRetrying) and retrying.attempt == 1
    effects = driver.feed(TimerFired(token=timer.token, now=3.0))
    again = driver.of(CallModel, effects)[0]
    effects = driver.feed(ModelFailed(token=again.token, kind="auth", status=401, detail="invalid key"))
    failed = events(effects)[-1]
    assert isinstance(failed, TurnFailed) and failed.kind == "auth"
    assert "OPENAI_API_KEY" in failed.error and "invalid key" in failed.error


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
