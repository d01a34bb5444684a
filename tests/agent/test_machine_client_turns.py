"""The turn machine with what an API client asks: client tools that pause a turn, response_format."""

from __future__ import annotations

from actors.agent._answer_format import answer_problem
from actors.agent._machine import CallModel, ModelReplied, Persist, Persisted, RunTool, ToolDone, UserInput
from protocols import ChatMessage, ClientTool, ToolCall, TurnOptions
from protocols._session import TurnCompleted, TurnFailed
from tests.agent.machine_driver import Driver, call, events

WEATHER = ClientTool(name="get_weather", schema={"type": "function", "function": {"name": "get_weather"}})


def driver_reply(token: str, calls: tuple[ToolCall, ...], content: str = "") -> ModelReplied:
    return ModelReplied(token=token, content=content, tool_calls=calls)


def open_turn(driver: Driver, options: TurnOptions, **fields: object) -> CallModel:
    effects = driver.feed(UserInput(turn_id="t1", text="hi", options=options, now=0.0, **fields))  # type: ignore[arg-type]
    persist = driver.of(Persist, effects)[0]
    return driver.of(CallModel, driver.feed(Persisted(token=persist.token)))[0]


def test_a_call_to_a_client_tool_ends_the_turn_with_that_call_after_the_server_tools_ran() -> None:
    driver = Driver()
    model = open_turn(driver, TurnOptions(client_tools=(WEATHER,)))
    assert model.options is not None and model.use_tools
    calls = (call("c1", "get_weather", '{"city": "Porto"}'), call("c2", "read_file", '{"path": "a"}'))
    effects = driver.feed(driver_reply(model.token, calls))
    effects = driver.feed(Persisted(token=driver.of(Persist, effects)[0].token))
    assert [r.name for r in driver.of(RunTool, effects)] == ["read_file"]  # only the server's tool runs here
    effects = driver.feed(ToolDone(call_id="c2", content="text of a"))
    assert [e for e in events(effects) if isinstance(e, TurnCompleted)] == []  # not before its end is durable
    pause = [p for p in driver.of(Persist, effects) if p.turn is not None]
    assert len(pause) == 1 and pause[0].turn.event == "completed" and pause[0].messages == () and pause[0].acked
    effects = driver.feed(Persisted(token=pause[0].token))
    completed = [e for e in events(effects) if isinstance(e, TurnCompleted)]
    assert len(completed) == 1 and [c.id for c in completed[0].tool_calls] == ["c1"]
    assert driver.state.turn is None and driver.of(CallModel, effects) == []
    results = [m for m in driver.state.transcript if m.role == "tool"]
    assert [m.tool_call_id for m in results] == ["c2"]  # the client's call waits for the client's result


def test_the_clients_tool_results_open_the_next_turn_and_reach_the_model() -> None:
    driver = Driver()
    model = open_turn(driver, TurnOptions(client_tools=(WEATHER,)))
    effects = driver.feed(driver_reply(model.token, (call("c1", "get_weather", "{}"),)))
    effects = driver.feed(Persisted(token=driver.of(Persist, effects)[0].token))
    driver.feed(Persisted(token=driver.of(Persist, effects)[0].token))  # the pause is durable: the turn ends
    assert driver.state.turn is None
    result = ChatMessage(role="tool", tool_call_id="c1", content="sunny")
    effects = driver.feed(UserInput(turn_id="t2", text="", tool_results=(result,), options=TurnOptions(client_tools=(WEATHER,)), now=1.0))
    persist = driver.of(Persist, effects)[0]
    assert persist.messages == (result,) and persist.acked
    model = driver.of(CallModel, driver.feed(Persisted(token=persist.token)))[0]
    assert [m.role for m in model.messages if m.role != "system"] == ["user", "assistant", "tool"]
    assert model.messages[-1].content == "sunny"


def test_an_answer_that_breaks_the_response_format_is_asked_again_once_then_fails_clearly() -> None:
    driver = Driver()
    schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "required": ["city"]}}}
    model = open_turn(driver, TurnOptions(response_format=schema))
    again = driver.of(CallModel, driver.feed(driver_reply(model.token, (), content="Porto")))[0]
    assert "not valid JSON" in (again.messages[-1].content or "") and again.messages[-2].content == "Porto"
    effects = driver.feed(driver_reply(again.token, (), content='{"town": "Porto"}'))
    failed = [e for e in events(effects) if isinstance(e, TurnFailed)]
    assert len(failed) == 1 and failed[0].kind == "format" and "city" in failed[0].error
    assert not any(m.content in ("Porto", '{"town": "Porto"}') for m in driver.state.transcript)  # never stored


def test_a_well_formed_retry_completes_the_turn() -> None:
    driver = Driver()
    model = open_turn(driver, TurnOptions(response_format={"type": "json_object"}))
    again = driver.of(CallModel, driver.feed(driver_reply(model.token, (), content="sure!")))[0]
    effects = driver.answer(driver_reply(again.token, (), content='```json\n{"ok": true}\n```'))
    assert [e.text for e in events(effects) if isinstance(e, TurnCompleted)] == ['```json\n{"ok": true}\n```']


def test_the_format_check_reads_plain_and_fenced_json_and_names_the_failing_path() -> None:
    schema = {"type": "json_schema", "json_schema": {"schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}}
    assert answer_problem('{"n": 1}', schema) is None
    assert answer_problem('```\n{"n": 1}\n```', schema) is None
    assert "n" in (answer_problem('{"n": "one"}', schema) or "")
    assert answer_problem("[1]", {"type": "json_object"}) == "the answer is JSON but not an object (it is a list)"
    assert answer_problem("anything", {"type": "text"}) is None
