"""The gateway's pure decisions for streaming by edits (a controlled clock) and for files:
``MEDIA:`` lines, the allowed roots, limits, safe names, Telegram's photo and document updates."""

from __future__ import annotations

from pathlib import Path

from actors.platforms.gateway._chunks import utf16_units
from actors.platforms.gateway._media import DOCUMENT_LIMIT, PHOTO_LIMIT, as_kind, refusal, roots, saved_name, split_media
from actors.platforms.gateway._stream_plan import CURSOR, StreamPlan, StreamStep, add_text, add_tool, failed, next_step, render, succeeded, wake_at
from actors.platforms.gateway._telegram_api import to_message


def test_the_first_text_is_sent_at_once_and_later_text_edits_at_most_once_an_interval() -> None:
    plan = StreamPlan(interval=1.0)
    assert next_step(plan, 0.0) == (plan, None)  # nothing to show yet
    plan = add_text(plan, "Hel")
    plan, step = next_step(plan, 0.0)
    assert step == StreamStep("send", "Hel" + CURSOR) and plan.in_flight
    plan = add_text(plan, "lo")
    assert next_step(plan, 0.1)[1] is None  # one call at a time
    plan = succeeded(plan, step, 0.2, message_id="77")
    assert plan.message_id == "77" and plan.next_at == 1.2
    assert next_step(plan, 1.1)[1] is None and wake_at(plan) == 1.2  # not before the interval
    plan, step = next_step(plan, 1.2)
    assert step == StreamStep("edit", "Hello" + CURSOR)
    plan = succeeded(plan, step, 1.3)
    assert next_step(plan, 5.0)[1] is None and wake_at(plan) is None  # nothing new: no edit


def test_a_429_skips_edits_until_retry_after_and_a_refusal_stops_the_stream() -> None:
    plan = succeeded(StreamPlan(interval=1.0), StreamStep("send", "a"), 0.0, message_id="5")
    plan, step = next_step(add_text(plan, "ab"), 1.0)
    plan = failed(plan, 1.0, retry_after=7.0, final=False)
    assert next_step(plan, 7.9)[1] is None
    plan, step = next_step(plan, 8.0)
    assert step is not None and step.kind == "edit"
    plan = failed(plan, 8.1, retry_after=None, final=True)  # 400: the message is gone
    assert plan.stopped and next_step(add_text(plan, "c"), 100.0)[1] is None


def test_tool_progress_lines_show_above_the_answer_and_text_before_a_tool_call_is_dropped() -> None:
    plan = add_text(StreamPlan(tool_progress=True), "Let me look.")
    plan = add_tool(plan, "terminal", '{"command": "ls   -la"}')
    plan = add_text(plan, "Two files.")
    assert render(plan) == "🔧 terminal: ls -la\nTwo files." + CURSOR
    quiet = add_text(add_tool(add_text(StreamPlan(), "Let me look."), "terminal", "{}"), "Two files.")
    assert render(quiet) == "Two files." + CURSOR


def test_a_streamed_text_past_the_limit_is_cut_and_a_media_line_never_shows() -> None:
    plan = add_text(StreamPlan(limit=50, measure=utf16_units), "😀" * 40)
    shown = render(plan)
    assert utf16_units(shown) <= 50 and shown.endswith("…")
    assert render(add_text(StreamPlan(), "Here it is.\nMEDIA:/tmp/chart.png")) == "Here it is." + CURSOR


def test_media_lines_are_taken_out_of_the_text_in_order() -> None:
    text, paths = split_media("Here:\nMEDIA: /w/chart.png\n\nand\n  MEDIA:`/w/report.pdf`\nbye")
    assert paths == ("/w/chart.png", "/w/report.pdf")
    assert text == "Here:\n\nand\nbye"
    assert split_media("MEDIA is a word here") == ("MEDIA is a word here", ())


def test_only_files_under_the_workspace_or_the_cache_may_be_sent(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    allowed = roots(work, home)
    assert refusal(work / "out" / "chart.png", allowed, 10) == ""
    assert refusal(home / "cache" / "img.webp", allowed, 10) == ""
    for outside in (Path("/etc/passwd"), home / ".env", work.parent / "work2" / "x.txt"):
        assert "only files in the workspace or the Hermes cache" in refusal(outside, allowed, 10), outside
    assert "does not exist" in refusal(work / "gone.pdf", allowed, None)
    assert "50 MB" in refusal(work / "big.zip", allowed, DOCUMENT_LIMIT + 1)
    assert as_kind(work / "a.PNG", 5) == "photo" and as_kind(work / "a.png", PHOTO_LIMIT + 1) == "document" and as_kind(work / "a.pdf", 5) == "document"


def test_saved_names_are_safe_and_start_with_the_message_id() -> None:
    assert saved_name("42", "../../etc/passwd") == "42-passwd"
    assert saved_name("42", "my report (final).pdf") == "42-my_report_final_.pdf"
    assert saved_name("7", ".bashrc") == "7-bashrc"
    assert saved_name("7", "") == "7-file"
    assert "/" not in saved_name("1/2", "a\\b/c.txt")


def test_a_photo_update_takes_the_largest_size_and_a_document_its_name() -> None:
    photo = {
        "update_id": 1,
        "message": {
            "message_id": 3,
            "chat": {"id": 5, "type": "private"},
            "from": {"id": 5},
            "photo": [{"file_id": "s", "width": 90, "height": 60, "file_size": 10}, {"file_id": "l", "width": 1280, "height": 853, "file_size": 900}],
        },
    }
    message = to_message(photo, "bot", "1")
    assert message is not None and message.text == "" and [(f.kind, f.file_id) for f in message.files] == [("image", "l")]
    document = {
        "update_id": 2,
        "message": {
            "message_id": 4,
            "chat": {"id": 5, "type": "private"},
            "from": {"id": 5},
            "caption": "read this",
            "document": {"file_id": "d", "file_name": "notes.txt", "file_size": 12, "mime_type": "text/plain"},
        },
    }
    message = to_message(document, "bot", "1")
    assert message is not None and message.text == "read this" and [(f.kind, f.name, f.size) for f in message.files] == [("file", "notes.txt", 12)]
    assert to_message({"update_id": 3, "message": {"message_id": 5, "chat": {"id": 5}, "sticker": {}}}, "bot", "1") is None
