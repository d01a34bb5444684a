"""The pure parts of Matrix streaming and files: ``m.replace`` edit contents (the ``* `` fallback,
the size cuts), streamed txn ids, inbound ``m.image`` / ``m.file`` events as messages with
files, ``m.image`` / ``m.file`` answers, ``mxc://`` URLs and the streaming config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.agent import HubRegistry
from actors.config import HermesConfig
from actors.config._schema import PlatformEntry
from actors.platforms.gateway import load_gateway
from actors.platforms.gateway._edit_stream import FinalExtras, StreamSettings, final_pieces
from actors.platforms.gateway._matrix_api import MAX_EVENT_BYTES, edit_content, parse_sync, stream_txn, txn_id
from actors.platforms.gateway._matrix_media import image_suffixed, media_content, split_mxc
from actors.platforms.gateway._retry import CallFailed
from protocols import PlatformFile, PlatformMessage

BOT = "@hermes:hermes.test"
ME = "@me:hermes.test"
ASKED = PlatformMessage(platform="matrix", chat_type="group", chat_id="!r:x", user_id=ME, message_id="$asked", text="hi", thread_id="$root")


def test_an_edit_replaces_the_event_with_new_content_and_a_starred_fallback_and_drops_html_past_the_event_size() -> None:
    edit = edit_content(ASKED, "$streamed", "**done**", html=True)
    assert edit["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$streamed"}
    assert edit["body"] == "* **done**" and edit["formatted_body"] == "* <strong>done</strong>"
    assert edit["m.new_content"] == {"msgtype": "m.text", "body": "**done**", "format": "org.matrix.custom.html", "formatted_body": "<strong>done</strong>"}
    assert edit_content(ASKED, "$streamed", "partial ▌", html=False)["m.new_content"] == {"msgtype": "m.text", "body": "partial ▌"}
    big = edit_content(ASKED, "$streamed", "*x* " * 7000, html=True)  # 28 KB of text: its HTML and two bodies pass 64 KiB
    assert len(json.dumps(big).encode()) < MAX_EVENT_BYTES and big["m.new_content"]["body"] == "*x* " * 7000


def test_a_streams_first_message_has_one_txn_id_per_turn_and_each_edit_one_per_text() -> None:
    assert stream_txn(ASKED, "turn-1") == stream_txn(ASKED, "turn-1") != stream_txn(ASKED, "turn-2")
    assert stream_txn(ASKED, "turn-1", "a ▌") != stream_txn(ASKED, "turn-1", "ab ▌") != txn_id(ASKED, 0, "ab ▌")


def test_a_final_reply_edits_its_stream_and_carries_its_media_else_it_is_plain() -> None:
    assert final_pieces("plain", "", 100, len) is None
    assert final_pieces("all of it", "$s", 100, len) == (["all of it"], FinalExtras(edit="$s"))
    assert final_pieces("MEDIA:/w/a.png", "$s", 100, len) == (["📎"], FinalExtras(edit="$s", media=("/w/a.png",)))
    assert final_pieces("see\nMEDIA:a.csv", "", 100, len) == (["see"], FinalExtras(media=("a.csv",)))


def test_an_inbound_image_and_file_become_messages_with_their_mxc_files_and_captions() -> None:
    image = {"msgtype": "m.image", "body": "what is this", "filename": "chart.png", "url": "mxc://x/abc", "info": {"mimetype": "image/png", "size": 9}}
    file = {"msgtype": "m.file", "body": "notes.txt", "url": "mxc://x/def", "info": {"size": 4}}
    encrypted = {"msgtype": "m.file", "body": "secret", "file": {"url": "mxc://x/enc"}}
    events = [{"type": "m.room.message", "event_id": f"$e{i}", "sender": ME, "content": c} for i, c in enumerate((image, file, encrypted))]
    data = {"next_batch": "s2", "rooms": {"join": {"!r:x": {"summary": {"m.joined_member_count": 2}, "timeline": {"events": events}}}}}
    first, second = parse_sync(data, bot=BOT, members={}, prompts={}, history=False).messages  # the encrypted one is not ours to read
    assert first.text == "what is this" and first.files == (PlatformFile(kind="image", file_id="mxc://x/abc", name="chart.png", size=9, mime="image/png"),)
    assert second.text == "" and second.files == (PlatformFile(kind="file", file_id="mxc://x/def", name="notes.txt", size=4),)


def test_a_media_answer_is_an_m_image_or_m_file_in_the_thread_and_mxc_urls_are_checked() -> None:
    image = media_content(ASKED, "photo", "chart.png", "mxc://x/abc", 12)
    assert (image["msgtype"], image["body"], image["url"], image["info"]) == ("m.image", "chart.png", "mxc://x/abc", {"mimetype": "image/png", "size": 12})
    assert image["m.relates_to"]["rel_type"] == "m.thread" and "formatted_body" not in image
    document = media_content(ASKED, "document", "data.csv", "mxc://x/def", 3)
    assert (document["msgtype"], document["filename"], document["info"]["mimetype"]) == ("m.file", "data.csv", "text/csv")
    assert split_mxc("mxc://hermes.test/AbC") == ("hermes.test", "AbC")
    for bad in ("https://x/y", "mxc://x", "mxc://x/a/b"):
        with pytest.raises(CallFailed, match="not a Matrix media URL"):
            split_mxc(bad)
    assert image_suffixed("photo", "image/png") == "photo.png" and image_suffixed("a.JPG", "") == "a.JPG" and image_suffixed("", "") == "image.jpg"


def test_matrix_streaming_is_off_by_default_and_typed_in_extra(tmp_path: Path) -> None:
    env = {"MATRIX_HOMESERVER": "http://127.0.0.1:8008", "MATRIX_ACCESS_TOKEN": "syt_x"}
    config = HermesConfig(platforms={"matrix": PlatformEntry(enabled=True, extra={})})
    (spec,) = load_gateway(config, env, home=tmp_path, hubs=HubRegistry()).specs
    assert spec.kwargs["stream"] == StreamSettings() and spec.kwargs["vision"] is False and spec.kwargs["workspace"] is not None
    config = HermesConfig(platforms={"matrix": PlatformEntry(enabled=True, extra={"streaming": True, "edit_interval": 0.5, "tool_progress": True})})
    (spec,) = load_gateway(config, env, home=tmp_path, hubs=HubRegistry()).specs
    assert spec.kwargs["stream"] == StreamSettings(enabled=True, interval=0.5, tool_progress=True)
