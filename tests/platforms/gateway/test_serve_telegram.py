"""The Telegram adapter through a real ``hermes serve``, against the test Bot API server and
the test model server (echo mode: the answer to ``x`` is ``echo: x``)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from tests.conftest import DEADLINE
from tests.platforms.gateway.health import adapter_health_when
from tests.platforms.gateway.telegram_server import TOKEN, TelegramServer
from tests.platforms.serve_process import CLEARED, HERMES, launched

ALLOWED = 111
STRANGER = 222
KEY = "sk-hermes-gateway-test"


def _home(tmp_path: Path, model: ModelServer, telegram: TelegramServer) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(
        f'model:\n  default: test-model\n  base_url: "{model.base_url}"\n  api_key: unused\n'
        f'platforms:\n  telegram:\n    enabled: true\n    extra:\n      base_url: "{telegram.base_url}"\n      poll_timeout: 5\n      batch_delay: 0\n'
    )
    (home / ".env").write_text(f"API_SERVER_KEY={KEY}\nTELEGRAM_BOT_TOKEN={TOKEN}\nTELEGRAM_ALLOWED_USERS={ALLOWED},{ALLOWED + 1},{ALLOWED + 2}\n")
    return home


def _stop(process: subprocess.Popen[str], *, crashed: bool = False) -> None:
    """SIGTERM, then a clean exit; ``crashed``: an actor was crashed on purpose (its traceback is logged)."""
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=DEADLINE)
    assert process.returncode == 0 and (crashed or "Traceback" not in stderr), stderr


def _model_saw(model: ModelServer, text: str) -> bool:
    return any(text in str(r.body.get("messages")) for r in model.requests if r.path == "/v1/chat/completions")


def test_an_allowed_user_gets_exactly_one_reply_and_a_429_is_retried_after_retry_after(tmp_path: Path, model: ModelServer, telegram: TelegramServer) -> None:
    home = _home(tmp_path, model, telegram)
    telegram.fail_next_send(429, "Too Many Requests: retry after 1", retry_after=1)
    with launched(home) as (process, base):
        telegram.push(ALLOWED, "hello there")
        first = telegram.wait_delivered(ALLOWED, 1)
        telegram.push(ALLOWED, "and again")  # its reply is the barrier: nothing more comes for the first
        both = telegram.wait_delivered(ALLOWED, 2)
        adapter = adapter_health_when(base, KEY, lambda a: a["answered"] >= 2, "both replies counted as sent")
        _stop(process)
    assert first[0].text == "echo: hello there"
    assert [s.text for s in both] == ["echo: hello there", "echo: and again"]
    attempts = [s for s in telegram.sent if s.text == "echo: hello there"]
    assert [s.status for s in attempts] == [429, 200]
    assert attempts[1].at - attempts[0].at >= 1.0  # waited retry_after (a lower bound only)
    assert adapter["platform"] == "telegram" and adapter["state"] == "running"
    assert adapter["send_retries"] == 1 and adapter["answered"] == 2


def test_an_unknown_user_gets_only_a_pairing_code_until_approved(tmp_path: Path, model: ModelServer, telegram: TelegramServer) -> None:
    home = _home(tmp_path, model, telegram)
    env = {k: v for k, v in os.environ.items() if k not in CLEARED} | {"HERMES_HOME": str(home)}
    with launched(home) as (process, _):
        telegram.push(STRANGER, "let me in")
        (notice,) = telegram.wait_delivered(STRANGER, 1)
        found = re.search(r"hermes pairing approve telegram ([A-Z0-9]{8})", notice.text)
        assert found, notice.text
        assert not _model_saw(model, "let me in")  # the agent never saw it
        listed = subprocess.run([*HERMES, "pairing", "list"], env=env, capture_output=True, text=True, timeout=DEADLINE, check=True)
        assert found.group(1) in listed.stdout
        approved = subprocess.run([*HERMES, "pairing", "approve", "telegram", found.group(1)], env=env, capture_output=True, text=True, timeout=DEADLINE)
        assert approved.returncode == 0, approved.stderr
        telegram.push(STRANGER, "thanks")
        replies = telegram.wait_delivered(STRANGER, 2)
        _stop(process)
    assert replies[1].text == "echo: thanks"
    again = subprocess.run([*HERMES, "pairing", "approve", "telegram", found.group(1)], env=env, capture_output=True, text=True, timeout=DEADLINE)
    assert again.returncode == 1 and "no pending telegram pairing code" in again.stderr


def test_an_update_delivered_again_after_a_restart_is_answered_once(tmp_path: Path, model: ModelServer, telegram: TelegramServer) -> None:
    home = _home(tmp_path, model, telegram)
    with launched(home) as (process, _):
        telegram.push(ALLOWED, "only once")
        telegram.wait_delivered(ALLOWED, 1)
        _stop(process)
    telegram.redeliver()  # Telegram never got the confirming offset: the update comes again
    with launched(home) as (process, _):
        telegram.push(ALLOWED, "after the restart")
        replies = telegram.wait_delivered(ALLOWED, 2)  # updates are handled in order: the old one came first
        _stop(process)
    assert [s.text for s in replies] == ["echo: only once", "echo: after the restart"]
    assert sum(_model_saw(model, "only once") for _ in (0,)) == 1
    assert [r for r in model.requests if r.path == "/v1/chat/completions" and "only once" in str(r.body["messages"][-1])].__len__() == 1


def test_a_dangerous_command_waits_for_approve_from_the_chat(tmp_path: Path, model: ModelServer, telegram: TelegramServer) -> None:
    home = _home(tmp_path, model, telegram)
    (home / "work").mkdir()
    call = ScriptedCall(name="terminal", arguments=json.dumps({"command": f"rm -rf {home / 'work'}"}))
    model.script([ToolCallsReply(calls=(call,)), TextReply(content="cleaned up")])
    with launched(home) as (process, _):
        telegram.push(ALLOWED, "clean the work folder")
        (ask,) = telegram.wait_delivered(ALLOWED, 1)
        assert ask.text.startswith("Approval needed: rm -rf") and "/approve" in ask.text, ask.text
        telegram.push(ALLOWED, "/approve")
        replies = telegram.wait_delivered(ALLOWED, 2)
        _stop(process)
    assert replies[1].text == "cleaned up"
    assert not (home / "work").exists()  # it ran, after the approval


def test_an_approval_shows_buttons_and_a_tap_on_approve_runs_the_command(tmp_path: Path, model: ModelServer, telegram: TelegramServer) -> None:
    home = _home(tmp_path, model, telegram)
    (home / "work").mkdir()
    call = ScriptedCall(name="terminal", arguments=json.dumps({"command": f"rm -rf {home / 'work'}"}))
    model.script([ToolCallsReply(calls=(call,)), TextReply(content="**Cleaned** the `work` folder.")])
    with launched(home) as (process, _):
        telegram.push(ALLOWED, "clean the work folder")
        (ask,) = telegram.wait_delivered(ALLOWED, 1)
        (row,) = ask.payload["reply_markup"]["inline_keyboard"]
        assert [b["text"] for b in row] == ["Approve", "Deny"]
        assert all(len(b["callback_data"].encode()) <= 64 for b in row)  # Telegram's limit
        telegram.press(ALLOWED, ask, "/approve #stale-request-id")  # a button of another approval answers nothing
        assert telegram.wait_delivered(ALLOWED, 2)[1].text == "Nothing is waiting for an approval."
        pressed = telegram.press(ALLOWED, ask, row[0]["callback_data"])
        replies = telegram.wait_delivered(ALLOWED, 3)
        _stop(process)
    assert replies[2].text == "Cleaned the work folder."
    assert replies[2].entities == ["bold", "code"]  # MarkdownV2, as the model's Markdown meant
    assert pressed["callback_query"]["id"] in telegram.callbacks_answered
    assert not (home / "work").exists()


def test_an_answer_telegram_cannot_parse_is_sent_again_as_plain_text(tmp_path: Path, model: ModelServer, telegram: TelegramServer) -> None:
    home = _home(tmp_path, model, telegram)
    model.script([TextReply(content="Sums: 1+1=2 (mostly)!")])
    telegram.fail_next_send(400, "Bad Request: can't parse entities: Character '!' is reserved")
    with launched(home) as (process, _):
        telegram.push(ALLOWED, "add")
        (reply,) = telegram.wait_delivered(ALLOWED, 1)
        _stop(process)
    attempts = [s for s in telegram.sent if s.chat_id == ALLOWED]
    assert [(s.status, s.payload.get("parse_mode")) for s in attempts] == [(400, "MarkdownV2"), (200, None)]
    assert reply.text == "Sums: 1+1=2 (mostly)!"
