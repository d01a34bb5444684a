"""A command that reaches a session while it passivates for new settings (``RefreshSettings``,
``hermes serve``'s reload) is taken by its next incarnation, never started in the one that is
stopping (where the turn would die with it, "the session restarted while this turn was running")."""

from __future__ import annotations

from pathlib import Path

from actors.chaos import ModelServer, TextReply
from protocols import TurnCompleted, TurnFailed
from protocols._session import RefreshSettings, StartTurn
from supervisor import ChildExited
from tests.agent.session_kit import start_kit, until
from tests.conftest import DEADLINE, Probe


def test_a_turn_told_while_the_session_passivates_for_new_settings_runs_in_the_next_incarnation(tmp_path: Path, model_server: ModelServer) -> None:
    kit = start_kit(tmp_path / "state.db", model_server)
    try:
        exits = Probe()
        kit.runtime.subscribe(exits.put)
        model_server.script([TextReply(content="first answer"), TextReply(content="second answer")], session="rf")
        probe = kit.subscribe("rf")
        kit.start_turn("rf", "first question")
        until(probe, TurnCompleted)  # loaded and idle: the next RefreshSettings passivates it
        session = kit.session("rf")
        session.tell(RefreshSettings())
        session.tell(StartTurn(text="second question", turn_id="t2"))  # in its inbox before the stop, mostly
        end = until(probe, (TurnCompleted, TurnFailed))[-1]
        assert isinstance(end, TurnCompleted) and end.text == "second answer", end
        exits.get_matching(lambda e: isinstance(e, ChildExited) and e.path == "/sessions/rf")  # it did passivate
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)
