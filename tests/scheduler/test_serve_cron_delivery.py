"""Scheduled jobs' answers delivered through the gateway's webhook adapter, in a real ``hermes
serve``: a job made through ``/api/jobs`` fires on its own timer and its answer reaches the
route's receiver, signed (after the receiver's 503, retried and recorded); a ``[SILENT]`` job
delivers nothing; a target that names no running adapter or no route is a recorded failure."""

from __future__ import annotations

import hashlib
import hmac
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from actors.chaos import ModelServer, TextReply
from tests.conftest import DEADLINE
from tests.platforms.gateway.test_serve_webhook import Receiver
from tests.platforms.serve_process import launched

KEY = "hk-cron-delivery-key-0123456789"
HEADERS = {"Authorization": f"Bearer {KEY}"}
SECRET = "cron-route-secret"
FINAL = ("completed", "silent", "failed", "missed", "interrupted")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.http.shutdown()
    server.http.server_close()


def settled(http: httpx.Client, job_id: str) -> dict[str, Any]:
    """The job once its latest occurrence has ended (asked again until then, within the deadline)."""
    end = time.monotonic() + DEADLINE
    while True:
        job: dict[str, Any] = http.get(f"/api/jobs/{job_id}").json()["job"]
        if job["last_status"] in FINAL and job["state"] != "running":
            return job
        assert time.monotonic() < end, f"job {job_id} did not settle: {job}"


def test_a_job_made_through_the_api_fires_on_its_timer_and_delivers_to_the_webhook_receiver_retrying_a_503(
    tmp_path: Path, receiver: Receiver, model_server: ModelServer
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(
        f"model:\n  default: test-model\n  base_url: {model_server.base_url}\n  api_key: upstream\n"
        "platforms:\n  webhook:\n    enabled: true\n    extra:\n      port: 0\n      routes:\n"
        f'        ops:\n          secret: {SECRET}\n          deliver_url: "{receiver.url}"\n'
        "        quiet:\n          secret: other\n"
    )
    (home / ".env").write_text(f"API_SERVER_KEY={KEY}\n")
    model_server.script(
        [TextReply(content="[SILENT]"), TextReply(content="Inbox: 3 new messages, none urgent."), TextReply(content="nowhere to go")], model="test-model"
    )
    with launched(home) as (process, url), httpx.Client(base_url=url, headers=HEADERS, timeout=DEADLINE) as http:
        # [SILENT]: recorded, not delivered
        silent = http.post("/api/jobs", json={"name": "quiet", "prompt": "anything new?", "schedule": "every 1d", "deliver": "webhook:ops"})
        assert silent.status_code == 201, silent.text
        assert http.post(f"/api/jobs/{silent.json()['job']['id']}/run").status_code == 202
        quiet = settled(http, silent.json()["job"]["id"])
        assert quiet["last_status"] == "silent" and "not delivered" in quiet["last_delivery"]
        assert receiver.posts == []
        # a job due in a second fires by itself; the receiver's first answer is a 503
        made = http.post("/api/jobs", json={"name": "digest", "prompt": "summarise the inbox", "schedule": "1s", "deliver": "webhook:ops"})
        assert made.status_code == 201, made.text
        job_id = made.json()["job"]["id"]
        headers, body = receiver.wait_delivered()
        done = settled(http, job_id)
        health = http.get("/health/detailed").json()["scheduler"]
        # a route with no deliver_url, and a platform with no adapter: failures, recorded, not retried
        bad = http.post("/api/jobs", json={"prompt": "x", "schedule": "every 1d", "deliver": "webhook:quiet"}).json()["job"]["id"]
        assert http.post(f"/api/jobs/{bad}/run").status_code == 202
        no_route = settled(http, bad)
        unknown = http.post("/api/jobs", json={"prompt": "x", "schedule": "every 1d", "deliver": "telegram:42"})
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=DEADLINE)
    assert process.returncode == 0 and "Traceback" not in stderr, stderr
    assert [status for status, _, _ in receiver.posts] == [503, 200]
    answer = json.loads(body)
    assert answer["text"] == "Inbox: 3 new messages, none urgent." and answer["route"] == "ops" and answer["source"] == "cron"
    assert headers["x-webhook-signature"] == hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert done["last_status"] == "completed" and done["state"] == "finished"
    assert done["last_delivery"].startswith("webhook:ops (attempt 2)"), done
    assert done["last_session_id"].startswith(f"cron:{job_id}:") and "manual" not in done["last_session_id"]
    assert no_route["last_status"] == "completed" and "has no deliver_url" in no_route["last_delivery"] and "attempt 1 of 3" in no_route["last_delivery"]
    assert unknown.status_code == 400 and "telegram" in unknown.json()["error"]["message"]
    # /health/detailed: the job fired by its timer, on time; the silent one is still scheduled
    assert health["loaded"] and health["jobs"] == 2 and health["running"] == 0 and health["fired"] == 1
    assert health["next_run_at"] == quiet["next_run_at"] and 0 <= health["last_lateness_ms"] < 5000
    saved = sorted((home / "cron" / "output" / job_id).glob("*.md"))
    assert len(saved) == 1 and "Inbox: 3 new messages" in saved[0].read_text()
