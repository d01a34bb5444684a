"""Matrix streaming by ``m.replace`` edits and files, through a real ``hermes serve``, a real
Synapse (the session's, ``conftest.py``) and the test model server."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from actors.chaos import ModelServer, TextReply
from actors.platforms.gateway._matrix import matrix_sender
from tests.conftest import DEADLINE
from tests.platforms.gateway.synapse_server import MatrixUser, Synapse
from tests.platforms.gateway.test_serve_matrix import _dm_with, _stop
from tests.platforms.serve_process import launched

KEY = "sk-hermes-matrix-media-test"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def _setup(tmp_path: Path, model: ModelServer, synapse: Synapse, *, extra: str = "", vision: bool = False) -> tuple[Path, MatrixUser, MatrixUser]:
    tag = uuid.uuid4().hex[:8]
    bot, human = synapse.register(f"bot{tag}"), synapse.register(f"human{tag}")
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.yaml").write_text(
        f'model:\n  default: test-model\n  base_url: "{model.base_url}"\n  api_key: unused\n  vision: {str(vision).lower()}\n'
        f'terminal:\n  cwd: "{work}"\n'
        f"platforms:\n  matrix:\n    enabled: true\n    extra:\n      sync_timeout: 5\n      batch_delay: 0\n{extra}"
    )
    (home / ".env").write_text(
        f"API_SERVER_KEY={KEY}\nMATRIX_HOMESERVER={synapse.base_url}\nMATRIX_ACCESS_TOKEN={bot.token}\nMATRIX_USER_ID={bot.user_id}\nMATRIX_ALLOWED_USERS={human.user_id}\n"
    )
    return home, bot, human


def _wait_until(user: MatrixUser, check: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + DEADLINE * 3
    while not check():
        assert time.monotonic() < end, f"no {what}: {[e['content'] for e in user.events if e['type'] == 'm.room.message']}"
        user.sync_once()


def _replaces(event: dict[str, Any]) -> str:
    relation = event["content"].get("m.relates_to") or {}
    return str(relation.get("event_id", "")) if relation.get("rel_type") == "m.replace" else ""


def test_a_streamed_answer_is_one_event_then_replace_edits_ending_in_one_html_final_even_when_the_adapter_crashes_mid_stream(
    tmp_path: Path, model: ModelServer, synapse: Synapse, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERMES_CHAOS_ROUTES", "1")
    answer = "The **answer** is 42, and this sentence makes the reply long enough to come in several chunks."
    model.script([TextReply(content=answer, stall_after_chunks=2, stall_seconds=2.0), TextReply(content="and again")])
    home, bot, human = _setup(tmp_path, model, synapse, extra="      streaming: true\n      edit_interval: 0.1\n")
    with launched(home) as (process, base):
        room = _dm_with(human, bot)
        human.send(room, "what is it")
        (first,) = human.wait_messages(room, bot.user_id, 1)  # the stream's first message, while the model stalls
        crashed = httpx.post(f"{base}/v1/chaos/crash", json={"path": "/platforms/matrix"}, headers={"authorization": f"Bearer {KEY}"}, timeout=DEADLINE)
        assert crashed.status_code == 202, crashed.text
        edits = lambda: [e for e in human.from_user(room, bot.user_id) if _replaces(e) == first["event_id"]]  # noqa: E731
        _wait_until(human, lambda: any(e["content"]["m.new_content"]["body"] == answer for e in edits()), "final edit")
        human.send(room, "and then")  # its answer is the barrier: nothing more comes for the first
        _wait_until(human, lambda: any(e["content"].get("m.new_content", {}).get("body") == "and again" for e in human.from_user(room, bot.user_id)), "second")
        _stop(process)
    events = human.from_user(room, bot.user_id)
    assert first["content"]["body"].endswith(" ▌") and "format" not in first["content"]  # plain text while streaming
    assert answer.startswith(first["content"]["body"].removesuffix(" ▌")) and first["content"]["body"].removesuffix(" ▌") != answer
    assert len([e for e in events if not _replaces(e)]) == 2  # one message a turn: the rest are edits
    ours = [e for e in events if _replaces(e) == first["event_id"]]
    finals = [e for e in ours if e["content"]["m.new_content"]["body"] == answer]
    assert len(finals) == 1 and finals[0] is ours[-1]  # exactly one final, and it is the latest edit
    final = finals[0]["content"]
    assert final["body"] == f"* {answer}"  # the fallback for clients without edits
    assert (
        final["m.new_content"]["formatted_body"]
        == "The <strong>answer</strong> is 42, and this sentence makes the reply long enough to come in several chunks."
    )
    assert all(e["content"]["m.new_content"]["body"].endswith(" ▌") for e in ours[:-1])


def test_a_media_answer_is_an_m_image_with_the_files_bytes_a_refused_path_a_note_and_an_inbound_image_and_file_reach_the_turn(
    tmp_path: Path, model: ModelServer, synapse: Synapse
) -> None:
    home, bot, human = _setup(tmp_path, model, synapse, vision=True)
    (tmp_path / "work" / "chart.png").write_bytes(PNG)
    with launched(home) as (process, _):
        room = _dm_with(human, bot)
        human.send_file(room, "photo.png", PNG, "image/png", image=True, caption="what is this")
        human.wait_messages(room, bot.user_id, 1)
        event_id = human.send_file(room, "../my notes.txt", b"remember the milk\n", "text/plain", image=False)
        human.wait_messages(room, bot.user_id, 2)
        model.script([TextReply(content="Here is the chart.\nMEDIA:chart.png\nMEDIA:/etc/passwd")])  # after the echoed turns
        human.send(room, "chart please")
        _, saved_reply, text, image, note = human.wait_messages(room, bot.user_id, 5)
        _stop(process)
    assert text["content"]["body"] == "Here is the chart."
    content = image["content"]
    assert (content["msgtype"], content["body"], content["info"]) == ("m.image", "chart.png", {"mimetype": "image/png", "size": len(PNG)})
    assert human.download(content["url"]) == PNG  # back through Synapse's media repository
    assert note["content"]["body"] == "passwd was not attached: only files in the workspace or the Hermes cache can be sent"
    (request,) = [r for r in model.requests if r.path == "/v1/chat/completions" and "what is this" in str(r.body["messages"][-1])]
    parts = request.body["messages"][-1]["content"]
    assert isinstance(parts, list), parts
    assert [p["text"] for p in parts if p.get("type") == "text"] == ["what is this"]
    (url,) = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
    assert url.startswith("data:image/png;base64,") and base64.b64decode(url.partition(",")[2]) == PNG
    (saved,) = (tmp_path / "work" / "downloads").iterdir()
    assert saved.read_bytes() == b"remember the milk\n" and saved.name.endswith("my_notes.txt") and event_id.strip("$")[:8] in saved.name
    assert saved_reply["content"]["body"] == f"echo: [the user sent a file; it is saved at {saved} (18 bytes)]"


async def test_a_scheduled_answers_media_file_is_uploaded_and_sent_once_even_when_delivered_twice(tmp_path: Path, synapse: Synapse) -> None:
    tag = uuid.uuid4().hex[:8]
    bot, human = synapse.register(f"bot{tag}"), synapse.register(f"human{tag}")
    room = human.create_room([bot.user_id], direct=True)
    bot.join(room)
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    report = work / "report.csv"
    report.write_bytes(b"day,total\nmon,3\n")
    (home / ".env").write_text("MATRIX_ACCESS_TOKEN=secret\n")
    send = matrix_sender(synapse.base_url, bot.token, workspace=work, home=home)
    for _ in range(2):  # the scheduler retrying a delivery whose first outcome was lost
        await send(room, "", "The report", (str(report), str(home / ".env")))
    human.send(room, "barrier")
    human.wait_messages(room, human.user_id, 1)
    text, file, refused = human.from_user(room, bot.user_id)
    assert text["content"]["body"] == "The report"
    assert refused["content"]["body"] == ".env was not attached: only files in the workspace or the Hermes cache can be sent"
    assert (file["content"]["msgtype"], file["content"]["filename"]) == ("m.file", "report.csv")
    assert human.download(file["content"]["url"]) == b"day,total\nmon,3\n"
