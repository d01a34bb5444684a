"""The session's pure decisions about its own wiring: a model call's layers, work for the next incarnation, what is told once."""

from __future__ import annotations

from actors.agent._session_core import for_next_incarnation, model_call_layers, told_once
from protocols._session import CancelTurn, CompressContext, EnsureSession, StartTurn, Subscribe, SwitchModel, UndoTurn, Unsubscribe


def test_a_turn_call_is_recalled_and_hooked_and_a_summary_only_gets_pre_compress_texts() -> None:
    assert model_call_layers("model", provider=True, hooks=True) == ("recall", True)
    assert model_call_layers("compress", provider=True, hooks=True) == ("pre_compress", False)
    assert model_call_layers("model", provider=False, hooks=False) == (None, False)
    assert model_call_layers("compress", provider=False, hooks=True) == (None, False)


def test_a_stopping_incarnation_hands_new_work_to_the_next_and_keeps_the_rest() -> None:
    work = [StartTurn(text="x"), CompressContext(), CancelTurn(), EnsureSession(), SwitchModel(model="m"), UndoTurn()]
    assert all(for_next_incarnation(False, m) for m in work)
    assert not any(for_next_incarnation(True, m) for m in work)
    assert not for_next_incarnation(False, Unsubscribe(subscriber=None)) and not for_next_incarnation(False, Subscribe(subscriber=None))


def test_what_settling_at_start_found_is_told_only_to_a_stream_that_has_not_seen_a_turn() -> None:
    found = (("t1",), 2)
    assert told_once(found, seen=False) == found and told_once(found, seen=True) is None
    assert told_once(None, seen=False) is None
