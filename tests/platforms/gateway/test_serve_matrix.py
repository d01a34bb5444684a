"""The Matrix adapter through a real ``hermes serve``, against a real Synapse homeserver
(started once for this module's tests) and the test model server (echo mode: the answer to
``x`` is ``echo: x``)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import uuid
from pathlib import Path

import httpx

from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.platforms.gateway._matrix import matrix_sender
from actors.platforms.gateway._matrix_api import call, message_content, room_path, txn_id
from actors.scheduler._delivery import parse_target
from protocols import PlatformMessage
from tests.conftest import DEADLINE
from tests.platforms.gateway.health import adapter_health_when
from tests.platforms.gateway.synapse_server import MatrixUser, Synapse
from tests.platforms.serve_process import CLEARED, HERMES, launched

KEY = "sk-hermes-matrix-test"


def _users(synapse: Synapse) -> tuple[MatrixUser, MatrixUser]:
    tag = uuid.uuid4().hex[:8]
    return synapse.register(f"bot{tag}"), synapse.register(f"human{tag}")


def _home(tmp_path: Path, model: ModelServer, synapse: Synapse, bot: MatrixUser, allowed: MatrixUser, *, chunk_limit: int = 16000) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.yaml").write_text(
        f'model:\n  default: test-model\n  base_url: "{model.base_url}"\n  api_key: unused\n'
        f"platforms:\n  matrix:\n    enabled: true\n    extra:\n      sync_timeout: 5\n      chunk_limit: {chunk_limit}\n"
    )
    (home / ".env").write_text(
        f"API_SERVER_KEY={KEY}\nMATRIX_HOMESERVER={synapse.base_url}\nMATRIX_ACCESS_TOKEN={bot.token}\nMATRIX_USER_ID={bot.user_id}\nMATRIX_ALLOWED_USERS={allowed.user_id}\n"
    )
    return home


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=DEADLINE)
    assert process.returncode == 0 and "Traceback" not in stderr, stderr


def _dm_with(human: MatrixUser, bot: MatrixUser) -> str:
    """A direct room the bot joins by itself (the invite comes from ``human``)."""
    room = human.create_room([bot.user_id], direct=True)
    human.wait_joined(room, bot.user_id)
    return room


def _bodies(events: list[dict[str, object]]) -> list[str]:
    return [str(e["content"]["body"]) for e in events]  # type: ignore[index]


def test_a_dm_turn_with_an_approval_answered_by_a_reaction_gets_exactly_one_html_reply_and_a_thread_is_answered_in_it(
    tmp_path: Path, model: ModelServer, synapse: Synapse
) -> None:
    bot, human = _users(synapse)
    home = _home(tmp_path, model, synapse, bot, human)
    (home / "work").mkdir()
    rm = ScriptedCall(name="terminal", arguments=json.dumps({"command": f"rm -rf {home / 'work'}"}))
    model.script([ToolCallsReply(calls=(rm,)), TextReply(content="**Cleaned** the `work` folder."), TextReply(content="pong"), TextReply(content="threaded")])
    with launched(home) as (process, base):
        room = _dm_with(human, bot)
        human.send(room, "clean the work folder")
        (ask,) = human.wait_messages(room, bot.user_id, 1)
        assert ask["content"]["body"].startswith("Approval needed: rm -rf") and "✅" in ask["content"]["body"]
        assert (home / "work").exists()  # nothing ran before the answer
        human.react(room, ask["event_id"], "✅")
        human.send(room, "ping")  # its answer is the barrier: a second answer would come before it
        replies = human.wait_messages(room, bot.user_id, 3)
        root = replies[2]["event_id"]
        human.send(
            room, "about that", **{"m.relates_to": {"rel_type": "m.thread", "event_id": root, "is_falling_back": True, "m.in_reply_to": {"event_id": root}}}
        )
        threaded = human.wait_messages(room, bot.user_id, 4)[3]
        adapter = adapter_health_when(base, KEY, lambda a: a["answered"] >= 3, "the three answers counted as sent")
        _stop(process)
    assert _bodies(replies)[1:] == ["**Cleaned** the `work` folder.", "pong"]
    final = replies[1]["content"]
    assert final["format"] == "org.matrix.custom.html" and final["formatted_body"] == "<strong>Cleaned</strong> the <code>work</code> folder."
    assert not (home / "work").exists()  # it ran, after the reaction
    assert threaded["content"]["body"] == "threaded" and threaded["content"]["m.relates_to"]["rel_type"] == "m.thread"
    assert threaded["content"]["m.relates_to"]["event_id"] == root  # answered in the thread, its own session
    bot_reactions = {e["content"]["m.relates_to"]["key"] for e in human.from_user(room, bot.user_id, "m.reaction")}
    assert bot_reactions == {"✅", "❌"}  # the two answers offered on the prompt
    assert (adapter["platform"], adapter["state"], adapter["detail"]) == ("matrix", "running", bot.user_id)
    assert adapter["answered"] >= 3 and adapter["chats"] >= 0


def test_a_long_answer_is_chunked_through_429s_and_a_message_synced_again_after_a_restart_is_answered_once(
    tmp_path: Path, model: ModelServer, synapse: Synapse
) -> None:
    bot, human = _users(synapse)
    synapse.limit_messages(bot, per_second=2, burst=1)  # the second piece meets a 429 with retry_after_ms
    home = _home(tmp_path, model, synapse, bot, human, chunk_limit=600)
    code = "\n".join(f"    print({i})  # line {i}" for i in range(40))
    long = "Here is the script:\n\n```python\n" + code + "\n```\n\nThat is all, **done**."
    model.script([TextReply(content=long), TextReply(content="back again")])
    with launched(home) as (process, base):
        room = _dm_with(human, bot)
        before = human.sync_once(0)  # a position before the message: the restarted bot syncs from it
        human.send(room, "the long one")
        (first,) = human.wait_messages(room, bot.user_id, 1)
        total = int(re.search(r"\(1/(\d+)\)$", first["content"]["body"]).group(1))  # type: ignore[union-attr]
        pieces = human.wait_messages(room, bot.user_id, total)
        counted = adapter_health_when(base, KEY, lambda a: a["answered"] >= 1, "the long answer counted as sent")
        _stop(process)
    assert counted["send_retries"] >= 1
    assert total > 1
    for i, piece in enumerate(pieces, 1):
        body = piece["content"]["body"]
        assert body.endswith(f"({i}/{total})") and len(body.encode()) <= 600
        assert body.count("```") % 2 == 0  # a fence cut is closed and opened again
        assert "<pre><code" in piece["content"]["formatted_body"] or "```" not in body
    (home / "gateway" / "matrix.since").write_text(before)  # the homeserver hands "the long one" out again
    with launched(home) as (process, base):
        human.send(room, "after the restart")
        replies = human.wait_messages(room, bot.user_id, total + 1)
        health = httpx.get(f"{base}/health/detailed", headers={"authorization": f"Bearer {KEY}"}, timeout=DEADLINE).json()
        _stop(process)
    assert _bodies(replies)[total:] == ["back again"]
    assert health["platforms"][0]["duplicates"] >= 1  # "the long one" came again and was dropped
    asked = [r for r in model.requests if r.path == "/v1/chat/completions" and "the long one" in str(r.body["messages"][-1])]
    assert len(asked) == 1


def test_an_unknown_user_gets_only_a_pairing_code_until_approved_and_a_stale_sync_position_is_dropped(
    tmp_path: Path, model: ModelServer, synapse: Synapse
) -> None:
    bot, owner = _users(synapse)
    stranger = synapse.register(f"stranger{uuid.uuid4().hex[:8]}")
    home = _home(tmp_path, model, synapse, bot, owner)
    (home / "gateway").mkdir()
    (home / "gateway" / "matrix.since").write_text("s999_from_another_database")  # refused: the adapter syncs from now
    env = {k: v for k, v in os.environ.items() if k not in CLEARED} | {"HERMES_HOME": str(home)}
    with launched(home) as (process, _):
        room = _dm_with(stranger, bot)  # a direct invite is joined from anyone: the pairing code needs the room
        stranger.send(room, "let me in")
        (notice,) = stranger.wait_messages(room, bot.user_id, 1)
        found = re.search(r"hermes pairing approve matrix ([A-Z0-9]{8})", notice["content"]["body"])
        assert found, notice
        assert not any("let me in" in str(r.body.get("messages")) for r in model.requests if r.path == "/v1/chat/completions")
        approved = subprocess.run([*HERMES, "pairing", "approve", "matrix", found.group(1)], env=env, capture_output=True, text=True, timeout=DEADLINE)
        assert approved.returncode == 0, approved.stderr
        stranger.send(room, "thanks")
        replies = stranger.wait_messages(room, bot.user_id, 2)
        _stop(process)
    assert _bodies(replies)[1] == "echo: thanks"


async def test_a_piece_sent_again_with_its_txn_id_is_one_event_on_the_homeserver(synapse: Synapse) -> None:
    bot, human = _users(synapse)
    room = human.create_room([bot.user_id], direct=True)
    bot.join(room)
    message = PlatformMessage(platform="matrix", chat_type="dm", chat_id=room, user_id=human.user_id, message_id="$asked", text="hi")
    path = room_path(room, "send", "m.room.message", txn_id(message, 0, "the answer"))
    async with httpx.AsyncClient() as client:  # the adapter's own call, twice: a resend after a crash before mark_sent
        first = await call(client, synapse.base_url, bot.token, "PUT", path, body=message_content(message, "the answer", first=True), timeout=DEADLINE)
        again = await call(client, synapse.base_url, bot.token, "PUT", path, body=message_content(message, "the answer", first=True), timeout=DEADLINE)
    assert first["event_id"] == again["event_id"]
    human.send(room, "barrier")  # after the sends: once it is seen, both sends were
    human.wait_messages(room, human.user_id, 1)
    assert _bodies(human.from_user(room, bot.user_id)) == ["the answer"]


async def test_a_scheduled_answer_for_a_matrix_room_target_arrives_once_even_when_delivered_twice(synapse: Synapse, tmp_path: Path) -> None:
    bot, human = _users(synapse)
    room = human.create_room([bot.user_id], direct=True)
    bot.join(room)
    target = parse_target(f"matrix:{room}")  # the room id's own ':' is split off by the target syntax
    send = matrix_sender(synapse.base_url, bot.token, workspace=tmp_path, home=tmp_path)
    for _ in range(2):  # the scheduler retrying an answer whose first delivery's outcome was lost
        await send(target.chat_id, target.thread_id, "Daily **report**", ())
    human.send(room, "barrier")
    human.wait_messages(room, human.user_id, 1)
    (answer,) = human.from_user(room, bot.user_id)
    assert answer["content"]["formatted_body"] == "Daily <strong>report</strong>"
