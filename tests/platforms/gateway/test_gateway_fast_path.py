"""The crash windows of the gateway's fast path (``actors/platforms/gateway/_effects.py``): a
turn's ``StartTurn`` is told before the adapter's state is saved, and a final reply is sent while
it is. A crash in between, of the adapter or of the whole ``hermes serve``, still answers each
message once and never runs its turn twice.

Each window is made exactly, not by timing: the state file is put back to what it was before
the message (as if the save never happened) and Telegram delivers the update again.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import threading
from pathlib import Path

import httpx
import pytest
import trio
import trio.testing

from actors.chaos import ModelServer, TextReply
from actors.platforms.gateway._chats import Chat
from actors.platforms.gateway._dedup import SeenLog
from actors.platforms.gateway._state_file import Durable, Outgoing, StateFile
from protocols import PlatformMessage
from tests.conftest import DEADLINE
from tests.platforms.gateway.telegram_server import TOKEN, TelegramServer
from tests.platforms.gateway.test_serve_telegram import ALLOWED, KEY, _home, _stop
from tests.platforms.serve_process import launched


def _runs_of(model: ModelServer, text: str) -> int:
    """Model calls made for a turn of ``text`` (the user message last in the prompt)."""
    return sum(1 for r in model.requests if r.path == "/v1/chat/completions" and text in str(r.body["messages"][-1]))


def _texts(telegram: TelegramServer, chat: int) -> list[str]:
    return [s.text for s in telegram.delivered(chat)]


def test_a_process_killed_after_start_turn_but_before_the_save_answers_the_redelivered_update_once(
    tmp_path: Path, model: ModelServer, telegram: TelegramServer
) -> None:
    home = _home(tmp_path, model, telegram)
    model.script([TextReply(content="never sent", silent_after_chunks=0), TextReply(content="yes, here")])
    with launched(home) as (process, _):
        telegram.push(ALLOWED, "hang on")
        model.wait_for_request(lambda r: r.path == "/v1/chat/completions" and "hang on" in str(r.body.get("messages")), timeout=DEADLINE)
        os.killpg(process.pid, signal.SIGKILL)  # the turn is stored (the model is called after that) and dies with the process
        process.communicate(timeout=DEADLINE)
    (home / "gateway" / "telegram.json").unlink(missing_ok=True)  # a fresh home had none: as if the save never happened
    telegram.redeliver()  # never confirmed: Telegram delivers it again
    with launched(home) as (process, _):
        (reply,) = telegram.wait_delivered(ALLOWED, 1)
        telegram.push(ALLOWED, "still there?")  # the barrier: no second answer to the first comes after its reply
        telegram.wait_delivered(ALLOWED, 2)
        _stop(process)
    assert "server stopped" in reply.text, reply.text  # the session knew the turn id: its end, not a second run
    assert _texts(telegram, ALLOWED)[1:] == ["yes, here"]
    assert _runs_of(model, "hang on") == 1


def test_an_offset_a_killed_client_sent_before_redeliver_confirms_nothing(telegram: TelegramServer) -> None:
    # The window the tests above make: the killed process's last ``getUpdates`` (the one that
    # confirms the update) may still wait in its socket when the test calls ``redeliver``;
    # read after it, it must not confirm the update again (the restart would never get it).
    update = telegram.push(ALLOWED, "hang on")
    host, port = telegram.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=DEADLINE) as stale:  # made before the kill
        telegram.redeliver()
        body = json.dumps({"offset": update["update_id"] + 1, "timeout": 0}).encode()
        head = f"POST /bot{TOKEN}/getUpdates HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        stale.sendall(head.encode() + body)  # read by the server only now
        answer = http.client.HTTPResponse(stale)
        answer.begin()
        assert json.loads(answer.read()) == {"ok": True, "result": []}
    again = httpx.post(f"{telegram.base_url}/bot{TOKEN}/getUpdates", json={"offset": 0, "timeout": 0}, timeout=DEADLINE)
    assert [u["update_id"] for u in again.json()["result"]] == [update["update_id"]]


def test_an_adapter_crashed_after_start_turn_but_before_the_save_follows_the_turn_that_runs(
    tmp_path: Path, model: ModelServer, telegram: TelegramServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERMES_CHAOS_ROUTES", "1")
    home = _home(tmp_path, model, telegram)
    # The window needs the turn still running when the adapter crashes: if its answer came first,
    # that incarnation replied and saved, and the unlink below would undo that save (a second
    # answer, the test's doing). 1 s was too short on a loaded machine (failed once in 30 runs).
    model.script([TextReply(content="the slow answer", latency=5.0), TextReply(content="the next answer")])
    with launched(home) as (process, base):
        update = telegram.push(ALLOWED, "take your time")
        model.wait_for_request(lambda r: r.path == "/v1/chat/completions" and "take your time" in str(r.body.get("messages")), timeout=DEADLINE)
        telegram.wait_for(lambda: telegram.confirmed > update["update_id"], "the adapter's save (its next poll confirms the update)")
        (home / "gateway" / "telegram.json").unlink()  # back to before the message: as if the adapter crashed before its save
        telegram.redeliver()
        crashed = httpx.post(f"{base}/v1/chaos/crash", json={"path": "/platforms/telegram"}, headers={"authorization": f"Bearer {KEY}"}, timeout=DEADLINE)
        assert crashed.status_code == 202, crashed.text
        (reply,) = telegram.wait_delivered(ALLOWED, 1)
        telegram.push(ALLOWED, "and then")  # the barrier
        telegram.wait_delivered(ALLOWED, 2)
        _stop(process, crashed=True)
    assert reply.text == "the slow answer"  # the restarted adapter followed the running turn to its end
    assert _texts(telegram, ALLOWED) == ["the slow answer", "the next answer"]
    assert _runs_of(model, "take your time") == 1


def _a_running_chat(tmp_path: Path) -> tuple[PlatformMessage, Path, Durable]:
    """A chat whose turn t1 runs, as the state file holds it (version 1)."""
    message = PlatformMessage(platform="telegram", chat_type="dm", chat_id="7", user_id="7", message_id="1", text="hi")
    running = Durable(seen=SeenLog(ids=("7/1",)), chats=(Chat(running="t1", message=message),), version=1)
    return message, tmp_path / "telegram.json", running


def test_a_reply_confirmed_before_its_save_leaves_the_chat_ended_on_disk(tmp_path: Path) -> None:
    message, path, running = _a_running_chat(tmp_path)
    ended = Durable(seen=running.seen, outbox=(Outgoing(turn_id="t1", message=message, text="hello"),), version=2)

    async def main() -> None:
        file = StateFile(path)
        await file.save(running)
        await file.mark_sent("t1", ended)  # the reply went before the save of its chat's end
        after = StateFile(path).load()
        assert after.chats == () and after.outbox == ()
        await file.save(ended)  # that save, late: not written again (the reply stays out)
        again = StateFile(path).load()
        assert again.chats == () and again.outbox == () and again.seen.ids == ("7/1",)

    trio.run(main)


def test_settle_waits_for_the_send_in_flight_then_writes_the_last_state_without_the_sent_reply(tmp_path: Path) -> None:
    message, path, running = _a_running_chat(tmp_path)
    last = Durable(seen=running.seen, outbox=(Outgoing(turn_id="t1", message=message, text="hello"),), version=3)

    async def main() -> None:
        file = StateFile(path)
        await file.save(running)
        answered = trio.Event()

        async def send() -> None:
            async with file.sending():
                await answered.wait()  # the platform's answer to the reply's call
                await file.mark_sent("t1")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(file.settle, last)
            await trio.testing.wait_all_tasks_blocked()
            assert StateFile(path).load().chats == running.chats  # settle waits: the send may have been taken
            answered.set()
        after = StateFile(path).load()
        assert after.chats == () and after.outbox == () and after.seen.ids == ("7/1",)

    trio.run(main)


def test_a_turn_that_ended_before_a_crash_and_the_save_is_answered_from_the_store_not_run_again(
    tmp_path: Path, model: ModelServer, telegram: TelegramServer
) -> None:
    # The widest case: the turn ended and its reply went before any save of the message landed
    # (a slow disk), then the process died. The update comes again; the session knows the turn
    # id and publishes nothing for it, so the adapter reads its end from the store: the answer
    # is sent once more (the one-write window after a send), the turn is not run again.
    home = _home(tmp_path, model, telegram)
    with launched(home) as (process, _):
        telegram.push(ALLOWED, "quick one")
        telegram.wait_delivered(ALLOWED, 1)
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=DEADLINE)
    (home / "gateway" / "telegram.json").unlink(missing_ok=True)  # killed before any save landed: there is none
    telegram.redeliver()
    with launched(home) as (process, _):
        telegram.wait_delivered(ALLOWED, 2)
        telegram.push(ALLOWED, "and now?")  # the barrier
        telegram.wait_delivered(ALLOWED, 3)
        _stop(process)
    assert _texts(telegram, ALLOWED) == ["echo: quick one", "echo: quick one", "echo: and now?"]
    assert _runs_of(model, "quick one") == 1


def test_a_graceful_stop_while_a_reply_is_in_flight_marks_it_sent_and_a_restart_does_not_answer_again(
    tmp_path: Path, model: ModelServer, telegram: TelegramServer
) -> None:
    # Telegram took the reply but its answer is held until the adapter's stop has begun (its
    # long poll dropped): the stop must let that send end and mark it sent, then write the
    # adapter's last state, before the next incarnation can read the file.
    home = _home(tmp_path, model, telegram)
    telegram.held = threading.Event()
    with launched(home) as (process, _):
        telegram.push(ALLOWED, "only once")
        telegram.wait_delivered(ALLOWED, 1)  # taken; its answer waits
        dropped = telegram.polls_dropped
        process.send_signal(signal.SIGTERM)
        telegram.wait_for(lambda: telegram.polls_dropped > dropped, "the adapter's poll cancelled by its stop")
        telegram.held.set()
        _, stderr = process.communicate(timeout=DEADLINE)
        assert process.returncode == 0 and "Traceback" not in stderr, stderr
    saved = StateFile(home / "gateway" / "telegram.json").load()
    assert saved.outbox == () and saved.chats == () and f"{ALLOWED}/1" in saved.seen.ids
    telegram.held = None
    telegram.redeliver()
    with launched(home) as (process, _):
        telegram.push(ALLOWED, "after the restart")
        telegram.wait_delivered(ALLOWED, 2)  # updates are handled in order: a second answer to the first came before
        _stop(process)
    assert _texts(telegram, ALLOWED) == ["echo: only once", "echo: after the restart"]
    assert _runs_of(model, "only once") == 1
