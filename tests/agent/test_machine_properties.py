"""Property test: random input sequences never break the machine's invariants."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.agent._machine import (
    CallModel,
    Cancel,
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
from actors.agent._sanitize import sanitize
from protocols import Token, ToolCall
from protocols._session import TurnCancelled, TurnCompleted, TurnFailed, TurnStarted
from tests.agent.machine_driver import TRAITS, Driver, events

ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["user", "ack", "persist_fail", "text", "tools", "fail", "done", "backoff", "deadline", "cancel", "stale"]),
        st.integers(min_value=0, max_value=7),
    ),
    max_size=60,
)
POLICIES = ["queue", "reject", "interrupt", None]
FAILURES = [("rate_limit", 429), ("server", 500), ("auth", 401), ("transport", None), ("context_overflow", 400)]
TOOLS = ["read_file", "write_file", "terminal", "nope"]


class World:
    """Interprets abstract actions against what the machine last asked for."""

    def __init__(self) -> None:
        self.driver = Driver(MachineConfig(traits=TRAITS, max_iterations=3, max_attempts=3, queue_limit=2))
        self.turns = 0
        self.now = 0.0
        self.acks: list[str] = []
        self.model: str | None = None
        self.running: list[str] = []
        self.timers: list[str] = []
        self.calls = 0

    def feed(self, event: Any) -> None:
        effects = self.driver.feed(event)
        for effect in effects:
            if isinstance(effect, Persist) and effect.acked:
                self.acks.append(effect.token)
            elif isinstance(effect, CallModel):
                self.model = effect.token
                body = effect.messages[1:]
                assert sanitize(body) == (body, 0), "a model was sent an unsanitized transcript"
            elif isinstance(effect, RunTool):
                self.running.append(effect.call_id)
            elif isinstance(effect, StartTimer):
                self.timers.append(effect.token)
        state = self.driver.state
        if state.turn is None:
            # Results are kept in the order they finished; the sanitizer may reorder them, but
            # it must neither add a missing result nor drop an orphan.
            fixed, added = sanitize(state.transcript)
            assert added == 0 and len(fixed) == len(state.transcript), "an idle session has an unsettled transcript"

    def act(self, action: str, n: int) -> None:
        self.now += 1.0
        if action == "user":
            self.turns += 1
            self.feed(UserInput(turn_id=f"t{self.turns}", text="go", policy=POLICIES[n % 4], now=self.now))
        elif action == "ack" and self.acks:
            self.feed(Persisted(token=self.acks.pop(0), now=self.now))
        elif action == "persist_fail" and self.acks:
            self.feed(PersistFailed(token=self.acks.pop(0), error="disk full", now=self.now))
        elif action == "text" and self.model:
            self.feed(ModelReplied(token=self.model, content="answer", now=self.now))
        elif action == "tools" and self.model:
            calls = []
            for i in range(n % 4 + 1):
                self.calls += 1
                arguments = f'{{"path": "p{i % 2}"}}' if i != 3 else '{"path": '
                calls.append(ToolCall(id=f"c{self.calls}", name=TOOLS[(n + i) % 4], arguments=arguments))
            self.feed(ModelReplied(token=self.model, content="", tool_calls=tuple(calls), now=self.now))
        elif action == "fail" and self.model:
            kind, status = FAILURES[n % len(FAILURES)]
            self.feed(ModelFailed(token=self.model, kind=kind, status=status, detail="x", now=self.now))
        elif action == "done" and self.running:
            self.feed(ToolDone(call_id=self.running.pop(n % len(self.running)), content="ok", now=self.now))
        elif action == "backoff" and self.timers:
            self.feed(TimerFired(token=self.timers.pop(n % len(self.timers)), now=self.now))
        elif action == "deadline" and self.turns:
            self.feed(TimerFired(token=Token(step="deadline", turn_id=f"t{self.turns}"), now=self.now))
        elif action == "cancel":
            self.feed(Cancel(now=self.now))
        elif action == "stale":
            self.feed(ToolDone(call_id="never-started", content="?", now=self.now))
            self.feed(ModelReplied(token=Token(step="model", turn_id="t0", n=9, attempt=9), content="stale", now=self.now))


@settings(max_examples=300, deadline=None)
@given(ACTIONS)
def test_random_inputs_keep_transcripts_valid_and_every_turn_ends_exactly_once(actions: list[tuple[str, int]]) -> None:
    world = World()
    for action, n in actions:
        world.act(action, n)
    # Drain: cancel until nothing runs or waits.
    for _ in range(10):
        if world.driver.state.turn is None and not world.driver.state.queued:
            break
        world.feed(Cancel(now=world.now))
    assert world.driver.state.turn is None and not world.driver.state.queued
    emitted = events(world.driver.effects)
    started = Counter(e.turn_id for e in emitted if isinstance(e, TurnStarted))
    ended = Counter(e.turn_id for e in emitted if isinstance(e, TurnCompleted | TurnFailed | TurnCancelled))
    assert all(count == 1 for count in started.values()), started
    assert ended == started, (started, ended)
