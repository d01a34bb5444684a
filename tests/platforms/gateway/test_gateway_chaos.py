"""Chaos through a real ``hermes serve`` and the test Bot API server: an adapter crashed mid-turn,
the whole process killed mid-turn, a burst of 5xx and 429 from Telegram, two messages for one
chat at once. Each ends in exactly one reply per message."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import httpx
import pytest

from actors.chaos import ModelServer, TextReply
from tests.conftest import DEADLINE
from tests.platforms.gateway.telegram_server import TelegramServer
from tests.platforms.gateway.test_serve_telegram import ALLOWED, KEY, _home, _stop
from tests.platforms.serve_process import launched


def _asked(model: ModelServer, text: str) -> None:
    model.wait_for_request(lambda r: r.path == "/v1/chat/completions" and text in str(r.body.get("messages")), timeout=DEADLINE)


def _texts(telegram: TelegramServer, chat: int) -> list[str]:
    return [s.text for s in telegram.delivered(chat)]


def test_an_adapter_crashed_mid_turn_still_sends_exactly_one_reply(
    tmp_path: Path, model: ModelServer, telegram: TelegramServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERMES_CHAOS_ROUTES", "1")
    home = _home(tmp_path, model, telegram)
    model.script([TextReply(content="the slow answer", latency=0.3), TextReply(content="the next answer")])
    with launched(home) as (process, base):
        telegram.push(ALLOWED, "take your time")
        _asked(model, "take your time")  # the turn is running in its session
        crashed = httpx.post(f"{base}/v1/chaos/crash", json={"path": "/platforms/telegram"}, headers={"authorization": f"Bearer {KEY}"}, timeout=DEADLINE)
        assert crashed.status_code == 202, crashed.text
        (reply,) = telegram.wait_delivered(ALLOWED, 1)
        telegram.push(ALLOWED, "and then")  # its reply is the barrier: no second reply to the first comes after it
        telegram.wait_delivered(ALLOWED, 2)
        _stop(process, crashed=True)
    assert reply.text == "the slow answer"
    assert _texts(telegram, ALLOWED) == ["the slow answer", "the next answer"]


def test_the_chaos_route_is_off_unless_enabled(tmp_path: Path, model: ModelServer, telegram: TelegramServer, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _home(tmp_path, model, telegram)
    monkeypatch.delenv("HERMES_CHAOS_ROUTES", raising=False)
    with launched(home) as (process, base):
        refused = httpx.post(f"{base}/v1/chaos/crash", json={"path": "/platforms/telegram"}, headers={"authorization": f"Bearer {KEY}"}, timeout=DEADLINE)
        _stop(process)
    assert refused.status_code == 404 and "HERMES_CHAOS_ROUTES=1" in refused.text


def test_a_process_killed_mid_turn_answers_the_message_once_after_the_restart(tmp_path: Path, model: ModelServer, telegram: TelegramServer) -> None:
    home = _home(tmp_path, model, telegram)
    model.script([TextReply(content="never sent", silent_after_chunks=0), TextReply(content="yes, here")])
    with launched(home) as (process, _):
        telegram.push(ALLOWED, "hang on")
        _asked(model, "hang on")
        os.killpg(process.pid, signal.SIGKILL)  # no shutdown at all: the turn dies with the process
        process.communicate(timeout=DEADLINE)
    telegram.redeliver()  # and Telegram may deliver the update again
    with launched(home) as (process, _):
        (reply,) = telegram.wait_delivered(ALLOWED, 1)
        telegram.push(ALLOWED, "still there?")
        telegram.wait_delivered(ALLOWED, 2)
        _stop(process)
    # The store's word ("restarted") if the adapter's save came before the kill, else the
    # session's own on loading (the update came again and the session knew its turn id).
    assert "server restarted" in reply.text or "server stopped" in reply.text, reply.text
    assert _texts(telegram, ALLOWED)[1] == "yes, here"
    assert len(_texts(telegram, ALLOWED)) == 2
    assert (
        sum("hang on" in str(r.body["messages"]) for r in model.requests if r.path == "/v1/chat/completions") == 2
    )  # its turn ran once (the second call is the next turn's)


def test_a_burst_of_5xx_and_429_from_telegram_delays_replies_but_loses_none(tmp_path: Path, model: ModelServer, telegram: TelegramServer) -> None:
    home = _home(tmp_path, model, telegram)
    for status, text in ((502, "Bad Gateway"), (500, "Internal Server Error")):
        telegram.fail_next_poll(status, text)
        telegram.fail_next_send(status, text)
    telegram.fail_next_poll(429, "Too Many Requests: retry after 1", retry_after=1)
    telegram.fail_next_send(429, "Too Many Requests: retry after 1", retry_after=1)
    with launched(home) as (process, base):
        for n in range(3):
            telegram.push(ALLOWED + n, f"message {n}")
        replies = [telegram.wait_delivered(ALLOWED + n, 1) for n in range(3)]
        health = httpx.get(f"{base}/health/detailed", headers={"authorization": f"Bearer {KEY}"}, timeout=DEADLINE).json()
        _stop(process)
    assert [[s.text for s in r] for r in replies] == [[f"echo: message {n}"] for n in range(3)]
    assert telegram.poll_failures == [] and telegram.failures == []  # every fault was served
    (adapter,) = health["platforms"]
    assert adapter["state"] == "running" and adapter["send_retries"] == 3 and adapter["answered"] == 3


def test_two_messages_for_one_chat_never_run_two_turns_at_once(tmp_path: Path, model: ModelServer, telegram: TelegramServer) -> None:
    home = _home(tmp_path, model, telegram)
    model.script([TextReply(content="first answer", latency=0.3), TextReply(content="second answer")])
    with launched(home) as (process, _):
        telegram.push(ALLOWED, "first question")
        telegram.push(ALLOWED, "second question")
        replies = telegram.wait_delivered(ALLOWED, 2)
        _stop(process)
    assert [s.text for s in replies] == ["first answer", "second answer"]
    calls = [r for r in model.requests if r.path == "/v1/chat/completions"]
    assert len(calls) == 2
    # The second turn's model call saw the first turn's answer: it started only after that turn ended.
    assert "first answer" in str(calls[1].body["messages"]) and "second question" not in str(calls[0].body["messages"])


def test_a_restart_answers_a_saved_message_that_never_reached_its_session_and_sends_an_owed_reply_once(
    tmp_path: Path, model: ModelServer, telegram: TelegramServer
) -> None:
    import json

    home = _home(tmp_path, model, telegram)

    def message(chat: int, message_id: int, text: str) -> dict[str, object]:
        return {"platform": "telegram", "chat_type": "dm", "chat_id": str(chat), "user_id": str(chat), "message_id": str(message_id), "text": text}

    # What a process killed right after saving leaves: the message marked seen with the turn it
    # starts (the StartTurn never reached the session), and a reply decided but not confirmed sent.
    state = {
        "offset": 0,
        "seen": [f"{ALLOWED}/901", f"{ALLOWED + 1}/902"],
        "chats": [{"running": f"gw-telegram-{ALLOWED}-901", "message": message(ALLOWED, 901, "lost in the window"), "queue": []}],
        "outbox": [{"turn_id": f"gw-telegram-{ALLOWED + 1}-902", "message": message(ALLOWED + 1, 902, "asked before"), "text": "the owed answer"}],
    }
    (home / "gateway").mkdir()
    (home / "gateway" / "telegram.json").write_text(json.dumps(state))
    with launched(home) as (process, _):
        (answer,) = telegram.wait_delivered(ALLOWED, 1)
        (owed,) = telegram.wait_delivered(ALLOWED + 1, 1)
        telegram.push(ALLOWED + 1, "anything else?")  # the barrier: the owed answer is not sent again before it
        telegram.wait_delivered(ALLOWED + 1, 2)
        _stop(process)
    with launched(home) as (process, _):  # nor after another restart
        telegram.push(ALLOWED + 1, "still one?")
        telegram.wait_delivered(ALLOWED + 1, 3)
        _stop(process)
    assert answer.text == "echo: lost in the window"
    assert owed.text == "the owed answer"
    assert _texts(telegram, ALLOWED + 1) == ["the owed answer", "echo: anything else?", "echo: still one?"]
    assert len(_texts(telegram, ALLOWED)) == 1


def test_an_adapter_crashed_mid_stream_finishes_the_same_message_once_after_its_restart(
    tmp_path: Path, model: ModelServer, telegram: TelegramServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    monkeypatch.setenv("HERMES_CHAOS_ROUTES", "1")
    home = _home(tmp_path, model, telegram)
    config = home / "config.yaml"
    config.write_text(config.read_text() + "      streaming: true\n      edit_interval: 0.1\n")
    model.script([TextReply(content="a streamed answer that the crash interrupts and the restart finishes", stall_after_chunks=2, stall_seconds=4.0)])
    state = home / "gateway" / "telegram.json"
    saved_at_edit: list[bool] = []  # whether the state file named the stream when each edit reached the platform
    first_edit, crash_sent = threading.Event(), threading.Event()

    def on_edit(_body: object) -> tuple[int, dict[str, object]] | None:
        saved_at_edit.append(bool(json.loads(state.read_text())["streams"]))
        if first_edit.is_set():
            return None
        first_edit.set()  # the adapter now waits mid-stream for this edit's answer, until it is crashed
        assert crash_sent.wait(DEADLINE)
        # Not applied, and not done either (it may be the answer's last edit): try again later.
        return 429, {"ok": False, "error_code": 429, "description": "Too Many Requests: retry after 1", "parameters": {"retry_after": 1}}

    telegram.on_edit = on_edit
    with launched(home) as (process, base):
        telegram.push(ALLOWED, "stream it")
        (streamed,) = telegram.wait_delivered(ALLOWED, 1)  # the stream's first message
        # The barrier: the stream's first edit reached the platform and is held there, so the
        # adapter is mid-stream however the model's chunks fell; a stream edits only once its
        # message's id is saved, so the state file names the message the restart must finish.
        assert first_edit.wait(DEADLINE), "the stream never edited its message"
        assert json.loads(state.read_text())["streams"], "an edit went out before the stream's id was saved"
        crashed = httpx.post(f"{base}/v1/chaos/crash", json={"path": "/platforms/telegram"}, headers={"authorization": f"Bearer {KEY}"}, timeout=DEADLINE)
        crash_sent.set()
        assert crashed.status_code == 202, crashed.text
        final = "a streamed answer that the crash interrupts and the restart finishes"
        telegram.wait_for(lambda: any(e.status == 200 and e.text == final for e in telegram.edits), "the final edit")
        _stop(process, crashed=True)
    message_id = 10_002  # the server's first message
    assert streamed.raw.endswith(" ▌")
    assert len(telegram.delivered(ALLOWED)) == 1  # no second message: the restarted adapter edited the same one
    assert telegram.texts[message_id] == (final, "MarkdownV2")
    assert [e.text for e in telegram.edits if e.status == 200].count(final) == 1
    assert saved_at_edit and all(saved_at_edit), "an edit went out before the stream's id was saved"
    assert json.loads(state.read_text())["streams"] == [] and json.loads(state.read_text())["outbox"] == []
