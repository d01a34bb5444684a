"""A scheduled job's answer to ``telegram:<chat_id>:<thread_id>`` goes out through the running
Telegram adapter of a real ``hermes serve`` (``sendMessage`` on the test Bot API server); a
refusal that will not get better (400, chat not found) is recorded after one attempt."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from actors.chaos import ModelServer, TextReply
from tests.conftest import DEADLINE
from tests.platforms.gateway.telegram_server import TOKEN, TelegramServer
from tests.platforms.serve_process import launched
from tests.scheduler.test_serve_cron_delivery import settled

KEY = "hk-cron-telegram-key-0123456789"
HEADERS = {"Authorization": f"Bearer {KEY}"}
CHAT = -100123


@pytest.fixture
def telegram() -> Iterator[TelegramServer]:
    with TelegramServer() as server:
        yield server


def test_a_job_delivers_to_a_telegram_chat_thread_and_a_refused_chat_is_recorded_once(
    tmp_path: Path, model_server: ModelServer, telegram: TelegramServer
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(
        f"model:\n  default: test-model\n  base_url: {model_server.base_url}\n  api_key: upstream\n"
        f'platforms:\n  telegram:\n    enabled: true\n    extra:\n      base_url: "{telegram.base_url}"\n      poll_timeout: 5\n'
    )
    (home / ".env").write_text(f"API_SERVER_KEY={KEY}\nTELEGRAM_BOT_TOKEN={TOKEN}\n")
    model_server.script([TextReply(content="Morning digest: all green."), TextReply(content="to nowhere")], model="test-model")
    with launched(home) as (process, url), httpx.Client(base_url=url, headers=HEADERS, timeout=DEADLINE) as http:
        made = http.post("/api/jobs", json={"name": "digest", "prompt": "digest", "schedule": "every 1d", "deliver": f"telegram:{CHAT}:7"})
        assert made.status_code == 201, made.text
        job_id = made.json()["job"]["id"]
        assert http.post(f"/api/jobs/{job_id}/run").status_code == 202
        sent = telegram.wait_delivered(CHAT, 1)
        done = settled(http, job_id)
        telegram.fail_next_send(400, "Bad Request: chat not found")
        lost = http.post("/api/jobs", json={"prompt": "digest", "schedule": "every 1d", "deliver": "telegram:404"}).json()["job"]["id"]
        assert http.post(f"/api/jobs/{lost}/run").status_code == 202
        refused = settled(http, lost)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=DEADLINE)
    assert process.returncode == 0 and "Traceback" not in stderr, stderr
    assert [(s.text, s.payload.get("message_thread_id")) for s in sent] == [("Morning digest: all green.", 7)]
    assert done["last_status"] == "completed" and done["last_delivery"].startswith(f"telegram:{CHAT}:7;")
    assert [s.status for s in telegram.sent if s.chat_id == 404] == [400]  # not retried
    assert refused["last_delivery"].startswith("failed: telegram:404: telegram chat 404: HTTP 400: Bad Request: chat not found (attempt 1 of 3)")
