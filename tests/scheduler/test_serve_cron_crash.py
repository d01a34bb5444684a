"""SIGKILL of a real ``hermes serve`` mid-job and right after a claim: after the restart no
occurrence has fired twice and none is lost without a record."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx

from actors.chaos import ModelServer, TextReply
from tests.chaos.test_serve_crash import start
from tests.conftest import DEADLINE

KEY = "hk-cron-crash-key-0123456789"
HEADERS = {"Authorization": f"Bearer {KEY}"}


def _home(tmp_path: Path, model_server: ModelServer) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(f"model:\n  default: test-model\n  base_url: {model_server.base_url}\n  api_key: upstream\n")
    (home / ".env").write_text(f"API_SERVER_KEY={KEY}\n")
    return home


def _is_cron(prompt_marker: str) -> object:
    return lambda r: r.path.endswith("/chat/completions") and prompt_marker in str(r.body)


def test_kill_9_during_a_run_and_right_after_a_claim_never_runs_an_occurrence_twice_and_records_both(tmp_path: Path, model_server: ModelServer) -> None:
    home = _home(tmp_path, model_server)
    # The first job's model call hangs: the run is in the middle when the server dies.
    model_server.script([TextReply(content="never seen", silent_after_chunks=0)], model="test-model")
    first, url, _ = start(home)
    try:
        with httpx.Client(base_url=url, headers=HEADERS, timeout=DEADLINE) as http:
            made = http.post("/api/jobs", json={"name": "digest", "prompt": "summarise the inbox MID-RUN", "schedule": "every 1d"})
            assert made.status_code == 201, made.text
            mid = made.json()["job"]["id"]
            assert made.json()["job"]["state"] == "scheduled" and made.json()["job"]["next_run_at"]
            claimed = http.post(f"/api/jobs/{mid}/run")
            assert claimed.status_code == 202, claimed.text  # the claim is committed
            model_server.wait_for_request(_is_cron("MID-RUN"), timeout=DEADLINE)  # the run is under way
            other = http.post("/api/jobs", json={"prompt": "check the weather JUST-CLAIMED", "schedule": "every 1d"}).json()["job"]["id"]
            assert http.post(f"/api/jobs/{other}/run").status_code == 202
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # right after the second claim committed
        first.communicate(timeout=DEADLINE)
    before = [r.session for r in model_server.requests if "JUST-CLAIMED" in str(r.body) or "MID-RUN" in str(r.body)]
    second, url, _ = start(home)
    try:
        with httpx.Client(base_url=url, headers=HEADERS, timeout=DEADLINE) as http:
            jobs = {j["id"]: j for j in http.get("/api/jobs").json()["jobs"]}
            assert jobs[mid]["last_status"] == "interrupted" and "not run again" in jobs[mid]["last_error"]
            assert jobs[other]["last_status"] == "interrupted"
            assert jobs[mid]["state"] == jobs[other]["state"] == "scheduled"  # the schedule goes on
            assert jobs[mid]["repeat"]["completed"] == 1
            # A fresh manual run still works after the restart, in a new session.
            model_server.script([TextReply(content="all quiet")], model="test-model")
            seen = len(model_server.requests)
            assert http.post(f"/api/jobs/{mid}/run").status_code == 202
            model_server.wait_for_request(_is_cron("MID-RUN"), after=seen, timeout=DEADLINE)
    finally:
        second.send_signal(signal.SIGTERM)
        _, stderr = second.communicate(timeout=DEADLINE)
    assert second.returncode == 0, stderr
    calls = [r for r in model_server.requests if "JUST-CLAIMED" in str(r.body) or "MID-RUN" in str(r.body)]
    sessions = [r.session for r in calls]
    # The interrupted occurrences reached the model before the kill and never after it; the new
    # manual run is one more call, in its own session.
    assert len(sessions) == len(before) + 1 and sessions[: len(before)] == before
    assert len(set(sessions)) == len(sessions), sessions
