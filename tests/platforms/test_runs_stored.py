"""Runs survive a restart: a run this server never saw is answered from the store's turns."""

from __future__ import annotations

from pathlib import Path

from actors.chaos import ModelServer
from actors.store import settle_interrupted
from protocols import ChatMessage
from tests.conftest import DEADLINE
from tests.platforms.server_kit import start_server
from tests.store_kit import StartRuntime, user
from tests.test_settle import calls, written


def test_a_run_from_before_a_restart_is_answered_from_the_store(start_runtime: StartRuntime, tmp_path: Path, model_server: ModelServer) -> None:
    store = tmp_path / "state.db"  # where start_server puts it
    runtime, write = written(start_runtime, store)
    for session_id in ("done", "died", "stopped"):
        write.session(session_id)
    write("done", user("q"), at=100.0, turn="run_done")
    write("done", ChatMessage(role="assistant", content="the answer"), at=101.0, turn="run_done", event="completed")
    write("died", user("q"), at=110.0, turn="run_died")
    write("died", calls("c1"), at=111.0)
    write("stopped", user("q"), at=120.0, turn="run_stopped")
    write("stopped", at=121.0, turn="run_stopped", event="cancelled", reason="stopped through the API")
    assert runtime.stop(timeout=DEADLINE)
    # The previous server died with run_died open: the next start settles it.
    assert list(settle_interrupted(store, result_text="unknown", now=200.0).sessions) == ["died"]

    kit = start_server(tmp_path, model_server)
    try:
        with kit.http() as http:
            done = http.get("/v1/runs/run_done")
            assert done.status_code == 200
            assert done.json() == {
                "run_id": "run_done",
                "object": "hermes.run",
                "session_id": "done",
                "status": "completed",
                "created_at": 100,
                "output": None,
                "error": None,
                "pending_approvals": [],
                "compressions": [],
            }
            died = http.get("/v1/runs/run_died").json()
            assert (died["status"], died["session_id"]) == ("failed", "died")
            assert died["error"].startswith("interrupted: the server stopped while this run was in progress")
            stopped = http.get("/v1/runs/run_stopped").json()
            assert (stopped["status"], stopped["error"]) == ("cancelled", "stopped through the API")
            missing = http.get("/v1/runs/run_never")
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "run_not_found"
    finally:
        assert kit.stop()
