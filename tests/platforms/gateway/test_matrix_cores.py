"""The Matrix adapter's pure parts: Markdown -> Matrix HTML, ``/sync`` answers as messages (rooms
of two as DMs, mentions, replies, threads, reactions on prompts, invites), errors, txn ids and
the config. The sync answers are written from the client-server API's documented shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.agent import ConfigError, HubRegistry
from actors.config import HermesConfig
from actors.config._schema import PlatformEntry
from actors.platforms.gateway import AccessPolicy, decide_access, load_gateway
from actors.platforms.gateway._matrix import split_target
from actors.platforms.gateway._matrix_api import Invite, Prompt, message_content, parse_answer, parse_sync, should_join, txn_id
from actors.platforms.gateway._matrix_html import to_matrix_html
from actors.platforms.gateway._retry import CallFailed, retry_delay
from protocols import PlatformMessage

BOT = "@hermes:hermes.test"
ME = "@me:hermes.test"


def test_markdown_becomes_matrix_html_with_everything_else_escaped() -> None:
    text = "**Done**: see `a<b>` and *this* or _that_, [docs](https://x.test/?a=1&b=2) & <script>"
    assert to_matrix_html(text) == (
        '<strong>Done</strong>: see <code>a&lt;b&gt;</code> and <em>this</em> or <em>that</em>, <a href="https://x.test/?a=1&amp;b=2">docs</a> &amp; &lt;script&gt;'
    )


def test_fences_headings_quotes_and_lines_become_blocks_and_breaks() -> None:
    text = "# Title\nline one\nline two\n```python\nif a < b:\n    print('**x**')\n```\n> quoted *word*\nend"
    assert to_matrix_html(text) == (
        "<h1>Title</h1>line one<br>line two"
        "<pre><code class=\"language-python\">if a &lt; b:\n    print('**x**')\n</code></pre>"
        "<blockquote>quoted <em>word</em></blockquote>end"
    )


def test_a_link_with_a_script_scheme_stays_text_and_an_unclosed_fence_runs_to_the_end() -> None:
    assert to_matrix_html("[x](javascript:alert(1))") == "[x](javascript:alert(1))"
    assert to_matrix_html("```\nopen <") == "<pre><code>open &lt;\n</code></pre>"
    assert to_matrix_html("snake_case_name and 2*3*4") == "snake_case_name and 2*3*4"


def _sync(events: list[dict[str, Any]], *, members: int | None = 2, room: str = "!r:hermes.test", invites: dict[str, Any] | None = None) -> dict[str, Any]:
    joined: dict[str, Any] = {"timeline": {"events": events}}
    if members is not None:
        joined["summary"] = {"m.joined_member_count": members, "m.invited_member_count": 0}
    return {"next_batch": "s2", "rooms": {"join": {room: joined}, "invite": invites or {}}}


def _text(body: str, event_id: str = "$e1", sender: str = ME, **content: Any) -> dict[str, Any]:
    return {"type": "m.room.message", "event_id": event_id, "sender": sender, "content": {"msgtype": "m.text", "body": body, **content}}


def test_a_room_of_two_is_a_dm_and_the_bots_own_messages_edits_and_notices_are_skipped() -> None:
    events = [
        _text("hello"),
        _text("mine", "$e2", BOT),
        _text("* hello", "$e3", **{"m.new_content": {"body": "hello"}, "m.relates_to": {"rel_type": "m.replace", "event_id": "$e1"}}),
        {"type": "m.room.message", "event_id": "$e4", "sender": ME, "content": {"msgtype": "m.notice", "body": "a bot's notice"}},
    ]
    batch = parse_sync(_sync(events), bot=BOT, members={}, prompts={}, history=False)
    (message,) = batch.messages
    assert (message.chat_type, message.chat_id, message.message_id, message.text, message.user_name) == ("dm", "!r:hermes.test", "$e1", "hello", "me")
    assert batch.next_batch == "s2" and batch.members == {"!r:hermes.test": 2}


def test_in_a_group_only_a_mention_or_a_reply_to_the_bot_is_addressed() -> None:
    events = [
        _text("chatter", "$a"),
        _text(f"{BOT} what time is it", "$b"),
        _text("pill", "$c", formatted_body=f'<a href="https://matrix.to/#/{BOT}">Hermes</a> hi'),
        _text(f"> <{BOT}> earlier\n\nthanks", "$d", **{"m.relates_to": {"m.in_reply_to": {"event_id": "$x"}}}),
        _text("intentional", "$e", **{"m.mentions": {"user_ids": [BOT]}}),
    ]
    batch = parse_sync(_sync(events, members=5), bot=BOT, members={}, prompts={}, history=False)
    policy = AccessPolicy(allowed=frozenset({ME}))
    assert [(m.chat_type, decide_access(m, policy, ())) for m in batch.messages] == [("group", "ignore")] + [("group", "allow")] * 4
    assert batch.messages[1].text == "what time is it"


def test_a_thread_names_its_root_and_a_reaction_on_a_prompt_answers_its_request() -> None:
    events = [
        _text("in a thread", "$t2", **{"m.relates_to": {"rel_type": "m.thread", "event_id": "$root"}}),
        {"type": "m.reaction", "event_id": "$re", "sender": ME, "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$prompt", "key": "✅️"}}},
        {"type": "m.reaction", "event_id": "$rf", "sender": ME, "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$other", "key": "✅"}}},
        {"type": "m.reaction", "event_id": "$rg", "sender": ME, "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$prompt", "key": "❌"}}},
    ]
    prompts = {"$prompt": Prompt(request="req-tail", thread_id="$root")}
    batch = parse_sync(_sync(events, members=3), bot=BOT, members={}, prompts=prompts, history=False)
    assert [(m.thread_id, m.text, m.reply_to_bot) for m in batch.messages] == [
        ("$root", "in a thread", False),
        ("$root", "/approve #req-tail", True),
        ("$root", "/deny #req-tail", True),
    ]


def test_the_first_sync_skips_history_but_takes_invites_and_member_counts() -> None:
    invite = {
        "!new:hermes.test": {
            "invite_state": {"events": [{"type": "m.room.member", "state_key": BOT, "sender": ME, "content": {"membership": "invite", "is_direct": True}}]}
        }
    }
    batch = parse_sync(_sync([_text("old news")], invites=invite), bot=BOT, members={}, prompts={}, history=True)
    assert batch.messages == () and batch.members == {"!r:hermes.test": 2}
    (seen,) = batch.invites
    assert (seen.room_id, seen.inviter, seen.direct) == ("!new:hermes.test", ME, True)
    later = parse_sync(_sync([_text("new")], members=None), bot=BOT, members=batch.members, prompts={}, history=False)
    assert later.messages[0].chat_type == "dm"  # the count from an earlier sync


def _failure(status: int, body: bytes, headers: dict[str, str] | None = None) -> CallFailed:
    with pytest.raises(CallFailed) as raised:
        parse_answer(status, body, headers)
    return raised.value


def test_a_rate_limit_waits_retry_after_ms_and_other_errors_name_their_errcode() -> None:
    limited = _failure(429, b'{"errcode":"M_LIMIT_EXCEEDED","error":"Too many requests","retry_after_ms":1500}')
    assert (limited.status, limited.retry_after, retry_delay(limited, 1)) == (429, 1.5, 1.5)
    assert _failure(429, b'{"errcode":"M_LIMIT_EXCEEDED"}', {"retry-after": "2"}).retry_after == 2.0
    refused = _failure(401, b'{"errcode":"M_UNKNOWN_TOKEN","error":"Invalid access token"}')
    assert str(refused) == "HTTP 401: M_UNKNOWN_TOKEN: Invalid access token" and retry_delay(refused, 1) is None
    gateway = _failure(502, b"<html>bad gateway</html>")
    assert gateway.status == 502 and retry_delay(gateway, 1) is not None


def test_a_piece_sent_again_has_the_same_txn_id_and_a_group_reply_mentions_its_sender() -> None:
    message = PlatformMessage(platform="matrix", chat_type="group", chat_id="!r:x", user_id=ME, message_id="$m", text="hi")
    assert txn_id(message, 0, "answer") == txn_id(message, 0, "answer") != txn_id(message, 1, "answer")
    content = message_content(message, "**hi**", first=True)
    assert content["formatted_body"] == "<strong>hi</strong>" and content["format"] == "org.matrix.custom.html"
    assert content["m.relates_to"] == {"m.in_reply_to": {"event_id": "$m"}} and content["m.mentions"] == {"user_ids": [ME]}
    huge = message_content(message, "&" * 20_000, first=False)  # its HTML would pass Matrix's 64 KiB event limit
    assert "formatted_body" not in huge and "m.relates_to" not in huge


def _load(tmp_path: Path, extra: dict[str, Any], env: dict[str, str]) -> Any:
    config = HermesConfig(platforms={"matrix": PlatformEntry(enabled=True, extra=extra)})
    return load_gateway(config, env, home=tmp_path, hubs=HubRegistry())


def test_matrix_config_comes_from_env_with_clear_errors(tmp_path: Path) -> None:
    extra = {"chunk_limit": 2000}
    env = {"MATRIX_HOMESERVER": "http://127.0.0.1:8008", "MATRIX_ACCESS_TOKEN": "syt_x", "MATRIX_ALLOWED_USERS": f"{ME}, @you:x"}
    (spec,) = _load(tmp_path, extra, env).specs
    assert spec.id == "matrix" and spec.kwargs["chunk_limit"] == 2000 and spec.kwargs["policy"].allowed == {ME, "@you:x"}
    with pytest.raises(ConfigError, match="MATRIX_HOMESERVER"):
        _load(tmp_path, extra, {"MATRIX_ACCESS_TOKEN": "syt_x"})
    with pytest.raises(ConfigError, match="password login is not built"):
        _load(tmp_path, extra, {"MATRIX_HOMESERVER": "https://m.x", "MATRIX_PASSWORD": "pw"})
    with pytest.raises(ConfigError, match=r"platforms\.matrix\.extra\.chunk_limit"):
        _load(tmp_path, {"chunk_limit": 10}, env)
    with pytest.raises(ConfigError, match="no end-to-end encryption"):
        _load(tmp_path, {"encryption": True}, env)


def test_a_room_of_unknown_size_or_with_a_member_change_is_counted_before_its_messages_are_decided() -> None:
    unknown = parse_sync(_sync([_text("hi")], members=None), bot=BOT, members={}, prompts={}, history=False)
    assert unknown.uncounted == ("!r:hermes.test",) and unknown.messages == () and unknown.next_batch == ""
    joined = {"type": "m.room.member", "event_id": "$j", "sender": "@third:x", "state_key": "@third:x", "content": {"membership": "join"}}
    changed = parse_sync(_sync([joined, _text("hi")], members=None), bot=BOT, members={"!r:hermes.test": 2}, prompts={}, history=False)
    assert changed.uncounted == ("!r:hermes.test",)
    recounted = parse_sync(_sync([joined, _text("hi")], members=None), bot=BOT, members={"!r:hermes.test": 3}, prompts={}, history=False, counted=True)
    assert [m.chat_type for m in recounted.messages] == ["group"] and recounted.next_batch == "s2"


def test_a_scheduled_target_gets_its_room_id_and_thread_back_from_the_schedulers_split() -> None:
    assert split_target("!abc", "example.org") == ("!abc:example.org", "")
    assert split_target("!abc:example.org", "$root") == ("!abc:example.org", "$root")
    assert split_target("!abc:example.org:$root", "") == ("!abc:example.org", "$root")


def test_the_bot_joins_rooms_of_allowed_users_and_direct_chats_but_not_an_unknown_users_group() -> None:
    allowed = frozenset({ME})
    assert should_join(Invite(room_id="!a:x", inviter=ME, direct=False), allowed, False)
    assert should_join(Invite(room_id="!b:x", inviter="@who:x", direct=True), allowed, False)
    assert not should_join(Invite(room_id="!c:x", inviter="@who:x", direct=False), allowed, False)
    assert should_join(Invite(room_id="!c:x", inviter="@who:x", direct=False), allowed, True)
