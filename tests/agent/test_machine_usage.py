"""The turn machine's token accounting: each reply's usage (cached tokens apart) is written once,
with the next write of its turn, and the turn's end reports the sums; reasoning_details stay
with the assistant message."""

from __future__ import annotations

from actors.agent._machine import CallModel, Cancel, ModelReplied, Persist
from protocols._session import TurnCancelled, TurnCompleted
from protocols._store import TokenUsage
from tests.agent.machine_driver import Driver, events
from tests.agent.test_machine import start

DETAILS = '[{"type":"reasoning.text","text":"t","signature":"s"}]'


def test_an_empty_replys_usage_goes_with_the_answer_written_after_it_and_the_turn_reports_the_sums() -> None:
    driver = Driver()
    model = start(driver)
    effects = driver.feed(ModelReplied(token=model.token, content="", input_tokens=100, output_tokens=1, cache_read_tokens=80, cache_write_tokens=20))
    assert driver.of(Persist, effects) == []  # nothing written: asked again
    (again,) = driver.of(CallModel, effects)
    reply = ModelReplied(token=again.token, content="done", input_tokens=110, output_tokens=4, cache_read_tokens=100, reasoning_details=DETAILS)
    effects = driver.answer(reply)
    (persist,) = [p for p in driver.of(Persist, effects) if p.messages]
    assert persist.usage == TokenUsage(input_tokens=210, output_tokens=5, cache_read_tokens=180, cache_write_tokens=20)
    assert persist.messages[0].reasoning_details == DETAILS
    done = events(effects)[-1]
    assert isinstance(done, TurnCompleted)
    assert (done.input_tokens, done.output_tokens, done.cache_read_tokens, done.cache_write_tokens) == (210, 5, 180, 20)
    assert driver.state.transcript[-1].reasoning_details == DETAILS


def test_a_cancelled_turn_writes_the_usage_of_its_unwritten_replies_with_its_end() -> None:
    driver = Driver()
    model = start(driver)
    effects = driver.feed(ModelReplied(token=model.token, content="", input_tokens=40, output_tokens=0, cache_read_tokens=30))
    effects = driver.feed(Cancel(turn_id="t1", reason="user", now=1.0))
    assert isinstance(events(effects)[-1], TurnCancelled)
    (end,) = driver.of(Persist, effects)
    assert end.turn is not None and end.turn.event == "cancelled"
    assert end.usage == TokenUsage(input_tokens=40, cache_read_tokens=30)
    assert all(p.usage is None for p in driver.of(Persist) if p is not end)  # counted once


def test_a_turn_whose_replies_were_all_written_adds_nothing_at_its_end() -> None:
    driver = Driver()
    model = start(driver)
    effects = driver.answer(ModelReplied(token=model.token, content="hi", input_tokens=5, output_tokens=2))
    assert [p.usage for p in driver.of(Persist, effects)] == [TokenUsage(input_tokens=5, output_tokens=2)]
    assert driver.state.turn is None  # ended on the answer's write: no second write to carry anything
