"""Streaming by edits and files, through a real ``hermes serve``, the test Bot API server and
the test model server."""

from __future__ import annotations

import base64
import signal
import subprocess
from pathlib import Path

from actors.chaos import ModelServer, TextReply
from tests.conftest import DEADLINE
from tests.platforms.gateway.telegram_server import TOKEN, TelegramServer
from tests.platforms.serve_process import launched

USER = 111
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def _home(tmp_path: Path, model: ModelServer, telegram: TelegramServer, *, extra: str = "", vision: bool = False) -> Path:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.yaml").write_text(
        f'model:\n  default: test-model\n  base_url: "{model.base_url}"\n  api_key: unused\n  vision: {str(vision).lower()}\n'
        f'terminal:\n  cwd: "{work}"\n'
        f'platforms:\n  telegram:\n    enabled: true\n    extra:\n      base_url: "{telegram.base_url}"\n      poll_timeout: 5\n{extra}'
    )
    (home / ".env").write_text(f"API_SERVER_KEY=sk-media-test-0123456789\nTELEGRAM_BOT_TOKEN={TOKEN}\nTELEGRAM_ALLOWED_USERS={USER}\n")
    return home


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=DEADLINE)
    assert process.returncode == 0 and "Traceback" not in stderr, stderr


def test_a_streamed_answer_is_one_message_then_edits_and_its_last_edit_is_the_formatted_final_reply(
    tmp_path: Path, model: ModelServer, telegram: TelegramServer
) -> None:
    answer = "The **answer** is 42, and this sentence makes the reply long enough to come in several chunks."
    model.script([TextReply(content=answer, stall_after_chunks=2, stall_seconds=2.0), TextReply(content="echo: and again")])
    home = _home(tmp_path, model, telegram, extra="      streaming: true\n      edit_interval: 0.1\n")
    final = "The answer is 42, and this sentence makes the reply long enough to come in several chunks."
    with launched(home) as (process, _):
        telegram.push(USER, "what is it")
        (first,) = telegram.wait_delivered(USER, 1)  # the stream's first message, while the model stalls
        telegram.wait_for(lambda: any(e.status == 200 and e.text == final for e in telegram.edits), "the final edit")
        telegram.push(USER, "and again")  # its reply is the barrier: nothing more comes for the first
        seen = lambda: [s.text for s in (*telegram.edits, *telegram.sent) if s.status == 200]  # noqa: E731
        telegram.wait_for(lambda: "echo: and again" in seen() or "echo: and again ▌" in seen(), "the second answer")
        telegram.wait_for(lambda: "echo: and again" in seen(), "the second answer's final")
        _stop(process)
    streamed_id = 10_000 + 2  # the server's first message id
    assert first.payload.get("parse_mode") is None and first.raw.endswith(" ▌")  # plain text while streaming
    assert answer.startswith(first.raw.removesuffix(" ▌")) and first.raw.removesuffix(" ▌") != answer  # a part, before the answer was complete
    first_edits = [e for e in telegram.edits if e.payload["message_id"] == streamed_id and e.status == 200]
    assert first_edits[-1].payload["parse_mode"] == "MarkdownV2" and first_edits[-1].entities == ["bold"]
    assert [e.text for e in first_edits].count(final) == 1  # exactly one final
    assert telegram.texts[streamed_id][1] == "MarkdownV2"
    assert len(telegram.delivered(USER)) == 2  # one message a turn: the rest were edits
    assert seen().count("echo: and again") == 1


def test_media_lines_become_a_photo_and_a_document_and_a_path_outside_the_roots_is_refused(
    tmp_path: Path, model: ModelServer, telegram: TelegramServer
) -> None:
    home = _home(tmp_path, model, telegram)
    work = tmp_path / "work"
    (work / "chart.png").write_bytes(PNG)
    (work / "data.csv").write_bytes(b"a,b\n1,2\n")
    (work / "sneaky.txt").symlink_to(home / ".env")
    answer = f"Here is the chart.\nMEDIA:{work / 'chart.png'}\nMEDIA:data.csv\nMEDIA:/etc/passwd\nMEDIA:{work / 'sneaky.txt'}"
    model.script([TextReply(content=answer)])
    with launched(home) as (process, _):
        telegram.push(USER, "chart please")
        replies = telegram.wait_delivered(USER, 3)  # the text, then a note for each refused file
        telegram.wait_for(lambda: len(telegram.uploads) == 2, "two uploads")
        _stop(process)
    assert replies[0].text == "Here is the chart."
    assert [r.text for r in replies[1:]] == [
        "passwd was not attached: only files in the workspace or the Hermes cache can be sent",
        ".env was not attached: only files in the workspace or the Hermes cache can be sent",
    ]
    photo, document = telegram.uploads
    assert (photo.method, photo.name, photo.data, photo.chat_id) == ("sendPhoto", "chart.png", PNG, USER)
    assert (document.method, document.name, document.data) == ("sendDocument", "data.csv", b"a,b\n1,2\n")
    assert not any(b"TELEGRAM_BOT_TOKEN" in u.data for u in telegram.uploads)


def test_an_inbound_photo_reaches_a_vision_model_as_an_image_part(tmp_path: Path, model: ModelServer, telegram: TelegramServer) -> None:
    home = _home(tmp_path, model, telegram, vision=True)
    with launched(home) as (process, _):
        telegram.push_file(USER, photo=PNG, caption="what is this")
        telegram.wait_delivered(USER, 1)
        _stop(process)
    (request,) = [r for r in model.requests if r.path == "/v1/chat/completions"]
    content = request.body["messages"][-1]["content"]
    assert isinstance(content, list), content
    texts = [p["text"] for p in content if p.get("type") == "text"]
    urls = [p["image_url"]["url"] for p in content if p.get("type") == "image_url"]
    assert texts == ["what is this"]
    (url,) = urls
    assert url.startswith("data:image/jpeg;base64,") and base64.b64decode(url.partition(",")[2]) == PNG  # the largest size


def test_an_inbound_photo_is_a_note_for_a_blind_model_and_a_document_lands_in_the_workspace(
    tmp_path: Path, model: ModelServer, telegram: TelegramServer
) -> None:
    home = _home(tmp_path, model, telegram, vision=False)
    with launched(home) as (process, _):
        telegram.push_file(USER, photo=PNG)
        telegram.wait_delivered(USER, 1)
        update = telegram.push_file(USER, document=("../my notes.txt", b"remember the milk\n"), caption="keep this")
        replies = telegram.wait_delivered(USER, 2)
        _stop(process)
    saved = tmp_path / "work" / "downloads" / f"{update['message']['message_id']}-my_notes.txt"
    assert saved.read_bytes() == b"remember the milk\n"
    assert replies[0].text == "echo: [image received; this model cannot see images]"
    assert replies[1].text == f"echo: keep this\n[the user sent a file; it is saved at {saved} (18 bytes)]"


async def test_a_scheduled_answers_media_is_held_to_the_same_roots_as_a_chat_answer(tmp_path: Path, telegram: TelegramServer) -> None:
    from actors.platforms.gateway._scheduled import telegram_sender

    home, work = tmp_path / "home", tmp_path / "work"
    (home / "cache").mkdir(parents=True)
    work.mkdir()
    (home / ".env").write_text("TELEGRAM_BOT_TOKEN=secret\n")
    (work / "report.csv").write_bytes(b"day,total\nmon,3\n")
    (home / "cache" / "chart.png").write_bytes(PNG)
    send = telegram_sender(TOKEN, telegram.base_url, workspace=work, home=home)
    # A job's answer is model output: a prompt-injected job must not mail out the home's secrets.
    await send(str(USER), "", "The report", ("report.csv", str(home / "cache" / "chart.png"), str(home / ".env"), "/etc/passwd"))
    texts = [s.text for s in telegram.wait_delivered(USER, 3)]
    assert texts == [
        "The report",
        ".env was not attached: only files in the workspace or the Hermes cache can be sent",
        "passwd was not attached: only files in the workspace or the Hermes cache can be sent",
    ]
    assert [(u.method, u.name, u.data) for u in telegram.uploads] == [("sendDocument", "report.csv", b"day,total\nmon,3\n"), ("sendDocument", "chart.png", PNG)]
    assert not any(b"secret" in u.data for u in telegram.uploads)
