"""Occurrences that fell due while ``hermes serve`` was down, after a real restart: one past the
grace window is recorded ``missed`` (visible through ``/api/jobs``), one inside it fires once,
and a further restart fires neither again.

The downtime is a day: while the server is stopped, the test moves both jobs' ``created_at``
back a day in ``state.db`` (the anchor of ``every 1d``), so their first occurrences are 3
hours (past a daily job's 2 h grace) and 30 seconds in the past when the server starts again."""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path

import httpx

from actors.chaos import ModelServer, TextReply
from tests.conftest import DEADLINE
from tests.platforms.serve_process import launched
from tests.scheduler.test_serve_cron_delivery import settled

KEY = "hk-cron-missed-key-0123456789"
HEADERS = {"Authorization": f"Bearer {KEY}"}
DAY = 86400.0


def _stop(process: object) -> None:
    process.send_signal(signal.SIGTERM)  # type: ignore[attr-defined]
    _, stderr = process.communicate(timeout=DEADLINE)  # type: ignore[attr-defined]
    assert process.returncode == 0 and "Traceback" not in stderr, stderr  # type: ignore[attr-defined]


def test_an_occurrence_missed_while_down_is_recorded_missed_and_one_inside_grace_fires_once(tmp_path: Path, model_server: ModelServer) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(f"model:\n  default: test-model\n  base_url: {model_server.base_url}\n  api_key: upstream\n")
    (home / ".env").write_text(f"API_SERVER_KEY={KEY}\n")
    with launched(home) as (process, url), httpx.Client(base_url=url, headers=HEADERS, timeout=DEADLINE) as http:
        missed = http.post("/api/jobs", json={"name": "stale", "prompt": "report STALE", "schedule": "every 1d"}).json()["job"]["id"]
        late = http.post("/api/jobs", json={"name": "late", "prompt": "report LATE", "schedule": "every 1d"}).json()["job"]["id"]
        _stop(process)
    now = time.time()
    with sqlite3.connect(home / "state.db") as db:
        db.execute("UPDATE cron_jobs SET job = json_set(job, '$.created_at', ?) WHERE id = ?", (now - DAY - 3 * 3600, missed))
        db.execute("UPDATE cron_jobs SET job = json_set(job, '$.created_at', ?) WHERE id = ?", (now - DAY - 30, late))
    db.close()
    model_server.script([TextReply(content="late but done")], model="test-model")
    with launched(home) as (process, url), httpx.Client(base_url=url, headers=HEADERS, timeout=DEADLINE) as http:
        stale = settled(http, missed)
        fired = settled(http, late)
        _stop(process)
    assert stale["last_status"] == "missed" and stale["last_session_id"] is None
    assert "missed" in stale["last_error"] and stale["repeat"]["completed"] == 0
    assert stale["state"] == "scheduled" and stale["next_run_at"] > stale["last_run_at"]  # the schedule goes on
    assert fired["last_status"] == "completed" and fired["repeat"]["completed"] == 1
    assert abs(time.mktime(time.strptime(fired["last_run_at"], "%Y-%m-%dT%H:%M:%S+00:00")) - time.mktime(time.gmtime(now - 30))) <= 1
    calls = [r for r in model_server.requests if r.path.endswith("/chat/completions")]
    assert len(calls) == 1 and "report LATE" in str(calls[0].body)
    # a third start fires neither again: the one is claimed, the other recorded
    with launched(home) as (process, url), httpx.Client(base_url=url, headers=HEADERS, timeout=DEADLINE) as http:
        jobs = {j["id"]: j for j in http.get("/api/jobs").json()["jobs"]}
        _stop(process)
    assert jobs[missed]["last_status"] == "missed" and jobs[late]["last_status"] == "completed"
    assert len([r for r in model_server.requests if r.path.endswith("/chat/completions")]) == 1
