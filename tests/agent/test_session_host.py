"""The session interpreter the actor and the simulator share, and turn ids that run once for good."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.agent._session_host import SessionHost
from actors.chaos import ModelServer, TextReply
from protocols import StartTurn, TurnCompleted, TurnStarted
from protocols._supervision import InjectCrash
from tests.agent.session_kit import AgentKit, start_kit, until
from tests.conftest import DEADLINE


def test_the_session_actor_runs_the_interpreter_the_simulator_runs(agent: AgentKit, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other half of ``tests/chaos/test_simulator.py``: the same ``SessionHost.feed``,
    driven here by the real actor (and there by the simulated world)."""
    fed: list[str] = []
    real_feed = SessionHost.feed

    def feed(self: SessionHost, event: object) -> None:
        fed.append(type(self.port).__name__)
        real_feed(self, event)  # type: ignore[arg-type]

    monkeypatch.setattr(SessionHost, "feed", feed)
    agent.server.script([TextReply(content="hello")], session="h1")
    probe = agent.subscribe("h1")
    agent.start_turn("h1", "hi", turn_id="h1-t1")
    until(probe, TurnCompleted)
    assert len(fed) >= 3 and set(fed) == {"SessionActor"}


def _started(events: list[object]) -> list[str]:
    return [e.turn_id for e in events if isinstance(e, TurnStarted)]  # type: ignore[attr-defined]


def test_a_retried_turn_id_never_runs_again_after_a_crash_or_a_new_process(tmp_path: Path, model_server: ModelServer) -> None:
    store = tmp_path / "state.db"
    kit = start_kit(store, model_server)
    try:
        model_server.script([TextReply(content="once")], session="r1")
        probe = kit.subscribe("r1")
        kit.start_turn("r1", "do it once", turn_id="r1-t1")
        assert _started(until(probe, TurnCompleted)) == ["r1-t1"]
        kit.session("r1").tell(InjectCrash(reason="test"))
        kit.start_turn("r1", "do it once", turn_id="r1-t1")  # a client's retry, after the restart
        kit.start_turn("r1", "next", turn_id="r1-t2")  # a barrier: handled after the retry
        model_server.script([TextReply(content="next answer")], session="r1")
        assert _started(until(probe, TurnCompleted)) == ["r1-t2"]
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)
    kit = start_kit(store, model_server)  # a new process: a new hub, only the store remembers
    try:
        model_server.script([TextReply(content="third")], session="r1")
        probe = kit.subscribe("r1")
        for turn_id in ("r1-t1", "r1-t2"):
            kit.session("r1").tell(StartTurn(text="again", turn_id=turn_id))
        kit.start_turn("r1", "third", turn_id="r1-t3")
        assert _started(until(probe, TurnCompleted)) == ["r1-t3"]
        users = [m.content for m in kit.transcript("r1") if m.role == "user"]
        assert users == ["do it once", "next", "third"]
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)
