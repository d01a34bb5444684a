"""The gateway's pure decisions: session keys, access, pairing, dedup, the busy policy,
chunking, retries, webhook signatures and Telegram updates."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

import msgspec
import pytest
import trio

from actors.agent import HubRegistry
from actors.platforms.gateway import TelegramAdapter
from actors.platforms.gateway._access import AccessPolicy, decide_access
from actors.platforms.gateway._answer_plan import AnswerDesk, answer_text
from actors.platforms.gateway._chats import Cancel, Chats, Reply, Start
from actors.platforms.gateway._chunks import chunk_text, utf16_units
from actors.platforms.gateway._dedup import KEEP, SeenLog
from actors.platforms.gateway._inbound_lane import Lane, instructions_for, laned
from actors.platforms.gateway._pairing import CODE_TTL, PairingBook, PairingError, approve, request_code, revoke
from actors.platforms.gateway._resets import ChatSession, ResetPolicy
from actors.platforms.gateway._retry import CallFailed, retry_delay
from actors.platforms.gateway._session_key import key_of, session_key
from actors.platforms.gateway._telegram_api import parse_answer, to_message
from actors.platforms.gateway._webhook_auth import render_prompt, signature_problem
from protocols import PlatformFile, PlatformMessage, TurnCompleted


def msg(text: str = "hi", *, user: str = "1", chat: str = "1", chat_type: str = "dm", mid: str = "1", **kw: object) -> PlatformMessage:
    return PlatformMessage(platform="telegram", chat_type=chat_type, chat_id=chat, user_id=user, message_id=mid, text=text, **kw)  # type: ignore[arg-type]


def test_session_keys_name_platform_chat_type_chat_and_thread() -> None:
    assert session_key("telegram", "dm", "42") == "agent:main:telegram:dm:42"
    assert session_key("telegram", "group", "-100", "7") == "agent:main:telegram:group:-100:7"
    assert key_of(msg(chat="5", chat_type="group")) == "agent:main:telegram:group:5"


def test_access_allowlist_pairing_and_the_group_mention_rule() -> None:
    policy = AccessPolicy(allowed=frozenset({"1"}))
    assert decide_access(msg(user="1"), policy, ()) == "allow"
    assert decide_access(msg(user="2"), policy, ()) == "pair"
    assert decide_access(msg(user="2"), policy, {"2"}) == "allow"
    assert decide_access(msg(user="1", chat_type="group"), policy, ()) == "ignore"  # not addressed
    assert decide_access(msg(user="1", chat_type="group", mentioned=True), policy, ()) == "allow"
    assert decide_access(msg(user="1", chat_type="group", reply_to_bot=True), policy, ()) == "allow"
    assert decide_access(msg(user="2", chat_type="group", mentioned=True), policy, ()) == "ignore"  # no codes in groups
    assert decide_access(msg(user="9"), AccessPolicy(allow_all=True), ()) == "allow"


def test_a_pairing_code_is_issued_once_approved_once_and_revocable() -> None:
    book, code = request_code(PairingBook(), platform="telegram", user_id="2", user_name="Bo", chat_id="2", now=100.0, code="ABCDEFGH")
    assert code == "ABCDEFGH"
    again, second = request_code(book, platform="telegram", user_id="2", user_name="Bo", chat_id="2", now=200.0, code="ZZZZZZZZ")
    assert second is None and again is book  # one live code a user: not sent on every message
    book, approved = approve(book, platform="telegram", code="abcdefgh", now=300.0)
    assert approved.user_id == "2" and book.paired("telegram") == {"2"} and not book.pending
    with pytest.raises(PairingError, match="no pending telegram pairing code"):
        approve(book, platform="telegram", code="ABCDEFGH", now=301.0)
    book = revoke(book, platform="telegram", user_id="2")
    assert book.paired("telegram") == frozenset()
    with pytest.raises(PairingError, match="not paired"):
        revoke(book, platform="telegram", user_id="2")


def test_an_expired_code_is_refused_and_replaced() -> None:
    book, _ = request_code(PairingBook(), platform="telegram", user_id="2", user_name="", chat_id="2", now=0.0, code="AAAAAAAA")
    with pytest.raises(PairingError, match="expired"):
        approve(book, platform="telegram", code="AAAAAAAA", now=CODE_TTL + 1)
    book, code = request_code(book, platform="telegram", user_id="2", user_name="", chat_id="2", now=CODE_TTL + 1, code="BBBBBBBB")
    assert code == "BBBBBBBB" and list(book.pending) == ["BBBBBBBB"]


def test_the_seen_log_drops_repeats_keeps_the_offset_and_forgets_the_oldest() -> None:
    log = SeenLog().add(["a", "b"], offset=3)
    assert log.fresh(["b", "c", "c"]) == ["c"]
    assert log.offset == 3 and log.version == 1
    assert log.add(["a"]) is log  # nothing new: no write
    big = SeenLog().add(str(i) for i in range(KEEP + 5))
    assert len(big.ids) == KEEP and not big.seen("0") and big.seen(str(KEEP + 4))


def test_queue_policy_answers_each_turn_once_in_order() -> None:
    chats = Chats(mode="queue")
    chats, actions = chats.on_message(msg("one", mid="1"))
    assert [type(a) for a in actions] == [Start]
    first = actions[0]
    assert isinstance(first, Start)
    chats, actions = chats.on_message(msg("two", mid="2"))
    assert actions == []  # waits behind the running turn
    key = key_of(msg())
    chats, actions = chats.on_end(key, first.turn_id, "answer one")
    assert isinstance(actions[0], Reply) and actions[0].text == "answer one"
    assert isinstance(actions[1], Start) and actions[1].message.text == "two"
    again, repeat = chats.on_end(key, first.turn_id, "answer one")
    assert repeat == [] and again is chats  # a second end of the same turn: no second reply


def test_the_queue_is_bounded_and_interrupt_answers_only_the_newest() -> None:
    chats, _ = Chats(mode="queue", limit=1).on_message(msg(mid="1"))
    chats, _ = chats.on_message(msg(mid="2"))
    chats, actions = chats.on_message(msg(mid="3"))
    assert isinstance(actions[0], Reply) and not actions[0].final and "not taken" in actions[0].text
    chats, actions = Chats(mode="interrupt").on_message(msg(mid="1"))
    old = actions[0]
    chats, actions = chats.on_message(msg(mid="2"))
    assert isinstance(actions[0], Start) and actions[0].interrupt
    assert isinstance(old, Start)
    chats, ended = chats.on_end(key_of(msg()), old.turn_id, "", cancelled=True)
    assert ended == []  # the interrupted turn is not answered


def test_steer_sends_what_waited_as_one_message_and_stop_cancels() -> None:
    chats, actions = Chats(mode="steer").on_message(msg("first", mid="1"))
    first = actions[0]
    assert isinstance(first, Start)
    chats, _ = chats.on_message(msg("also this", mid="2"))
    chats, _ = chats.on_message(msg("and this", mid="3"))
    chats, actions = chats.on_end(key_of(msg()), first.turn_id, "done")
    assert isinstance(actions[1], Start) and actions[1].message.text == "also this\n\nand this"
    chats, actions = chats.on_stop(msg("/stop", mid="4"))
    assert isinstance(actions[0], Cancel)
    running = chats.chats[key_of(msg())].running
    _, actions = chats.on_end(key_of(msg()), running, "", cancelled=True)
    assert isinstance(actions[0], Reply) and actions[0].text == "Stopped."


def test_the_answer_planned_when_a_turn_starts_is_the_one_its_completed_end_gets() -> None:
    key = key_of(msg())
    for mode in ("queue", "steer"):
        chats, actions = Chats(mode=mode).on_message(msg("one", mid="1"))
        first = actions[0]
        assert isinstance(first, Start)
        planned = chats.answer_to(key, first.turn_id)
        assert planned == msg("one", mid="1")
        chats, _ = chats.on_message(msg("two", mid="2"))  # queued: the plan holds
        chats, _ = chats.on_stop(msg("/stop", mid="3"))  # so does a /stop racing the completion
        assert chats.answer_to(key, first.turn_id) == planned
        _, ended = chats.on_end(key, first.turn_id, answer_text("done"))
        assert ended[0] == Reply(planned, "done", turn_id=first.turn_id)
    assert chats.answer_to(key, "another turn") is None and Chats().answer_to(key, first.turn_id) is None
    chats, actions = Chats(mode="interrupt").on_message(msg(mid="1"))
    assert isinstance(actions[0], Start) and chats.answer_to(key, actions[0].turn_id) is None  # a new message supersedes it
    assert answer_text("") == "(no answer)"


def test_the_answer_desk_fires_until_closed_and_hands_each_fired_reply_its_decision() -> None:
    first, late = (TurnCompleted(session_id=key_of(msg()), turn_id=t, text="done") for t in ("t1", "t2"))

    async def main() -> None:
        desk = AnswerDesk()
        fired = desk.fire("t1", first)
        assert fired is not None and fired.end is first
        assert desk.close() == [first]  # the stop: fired but not decided yet, the actor decides it now
        assert desk.fire("t2", late) is None  # closed: nothing goes up front any more
        desk.decide("t1", "state-7")
        assert await desk.decision("t1", fired) == "state-7"
        desk.done("t1")
        assert desk.close() == []

    trio.run(main)


def test_the_inbound_lane_starts_only_what_the_adapter_would_start_at_once() -> None:
    key, other = key_of(msg()), key_of(msg(chat="2"))
    seen = SeenLog().add(["3/9"])
    lane = Lane(
        seen,
        frozenset({other}),
        {key: ChatSession(generation=3, last_at=1000.0)},
        AccessPolicy(allowed=frozenset({"1"})),
        ResetPolicy(mode="idle", idle_minutes=1),
        None,
        "telegram",
        "",
    )
    batch = [msg("hello", mid="1"), msg("more", mid="2"), msg("busy chat", chat="2", mid="3"), msg("seen", chat="3", mid="9")]
    batch += [
        msg("/new", chat="4", mid="4"),
        msg("who?", user="7", chat="5", mid="5"),
        msg("a photo", chat="6", mid="6", files=(PlatformFile(kind="image", file_id="f"),)),
    ]
    batch.append(msg("hi again", chat="9", chat_type="group", mid="7"))  # a group message not addressed to the bot
    decided = laned(lane, batch, [f"{m.chat_id}/{m.message_id}" for m in batch], now=1030.0)
    assert list(decided) == ["gw-telegram-1-1"]  # the first of its chat only; a chat's second message waits for the adapter
    first = decided["gw-telegram-1-1"]
    assert first.session_id == f"{key}#3" and first.generation == 3 and first.start.policy == "queue"
    assert first.start.text == "hello" and first.start.instructions == instructions_for(batch[0], "telegram", "")
    assert laned(lane, batch[:1], ["1/1"], now=1000.0 + 61) == {}  # its session is due for a reset: the adapter decides that


def test_an_adapter_s_lane_holds_back_chats_that_run_hold_or_retry_and_is_off_with_a_burst_window(tmp_path: Path) -> None:
    def adapter(**extra: object) -> TelegramAdapter:
        return TelegramAdapter(
            token="t",
            base_url="http://127.0.0.1:9",
            poll_timeout=1.0,
            home=tmp_path,
            hubs=HubRegistry(),
            policy=AccessPolicy(allow_all=True),
            chats=Chats(),
            **extra,
        )

    plain = adapter()
    plain.chats, _ = plain.chats.on_message(msg(chat="1"))
    plain.retrying.add(key_of(msg(chat="2")))  # a /retry asked: its answer starts a turn outside a batch
    lane = plain.lane()
    assert lane is not None and lane.busy == {key_of(msg(chat="1")), key_of(msg(chat="2"))} and lane.seen is plain.seen
    assert adapter(burst_window=1.0).lane() is None


def test_chunks_fit_the_limit_in_utf16_units_are_numbered_and_keep_code_fences_closed() -> None:
    assert chunk_text("short", 4096, utf16_units) == ["short"]
    text = "intro\n\n```python\n" + "\n".join(f"print({i}) # 😀" for i in range(400)) + "\n```\nend"
    pieces = chunk_text(text, 1000, utf16_units)
    assert len(pieces) > 1
    for i, piece in enumerate(pieces, 1):
        assert utf16_units(piece) <= 1000
        assert piece.endswith(f"({i}/{len(pieces)})")
        body = piece.rsplit(" (", 1)[0]
        assert body.count("```") % 2 == 0, body[-80:]  # every piece's fences are balanced
    joined = "".join(p.rsplit(" (", 1)[0] for p in pieces)
    assert all(f"print({i})" in joined for i in range(400))


def test_retries_follow_retry_after_back_off_on_5xx_and_give_up_on_4xx() -> None:
    assert retry_delay(CallFailed(429, "slow down", 7), 1) == 7
    assert 0 < retry_delay(CallFailed(502, "bad gateway"), 1) <= 0.5  # type: ignore[operator]
    assert retry_delay(CallFailed(0, "connection refused"), 20) <= 30  # type: ignore[operator]
    assert retry_delay(CallFailed(400, "bad request"), 1) is None
    assert retry_delay(CallFailed(403, "bot was blocked by the user"), 1) is None


def test_bot_api_answers_and_updates_are_read_as_documented() -> None:
    assert parse_answer(200, b'{"ok": true, "result": [1]}') == [1]
    with pytest.raises(CallFailed) as caught:
        parse_answer(429, b'{"ok": false, "error_code": 429, "description": "Too Many Requests", "parameters": {"retry_after": 3}}')
    assert caught.value.status == 429 and caught.value.retry_after == 3
    with pytest.raises(CallFailed):
        parse_answer(502, b"<html>bad gateway</html>")
    update = {
        "update_id": 5,
        "message": {
            "message_id": 9,
            "chat": {"id": -100, "type": "supergroup"},
            "from": {"id": 1, "first_name": "Ada"},
            "text": "@hermes_bot what time is it",
            "message_thread_id": 3,
            "is_topic_message": True,
        },
    }
    message = to_message(update, "hermes_bot", "999")
    assert message is not None
    assert (message.chat_type, message.chat_id, message.thread_id, message.mentioned, message.text) == ("group", "-100", "3", True, "what time is it")
    assert to_message({"update_id": 6, "edited_message": {}}, "hermes_bot", "999") is None


def test_webhook_signatures_github_generic_gitlab_and_the_replay_window() -> None:
    body = b'{"a": 1}'
    digest = hmac.new(b"s", body, hashlib.sha256).hexdigest()
    assert signature_problem("s", {"x-hub-signature-256": f"sha256={digest}"}, body, 0) is None
    assert signature_problem("s", {"x-webhook-signature": digest}, body, 0) is None
    assert signature_problem("s", {"x-gitlab-token": "s"}, body, 0) is None
    assert signature_problem("s", {"x-webhook-signature": digest}, body + b" ", 0) == "the signature does not match the route's secret"
    assert signature_problem("s", {}, body, 0) is not None
    assert "window" in (signature_problem("s", {"x-webhook-signature": digest, "x-webhook-timestamp": "0"}, body, 1000) or "")
    assert signature_problem("INSECURE_NO_AUTH", {}, body, 0) is None
    assert (
        render_prompt(
            "PR {pull_request.title} by {pull_request.user.login}", {"pull_request": {"title": "Fix", "user": {"login": "ada"}}}, route="r", event="e"
        )
        == "PR Fix by ada"
    )
    assert "```json" in render_prompt("", {"x": 1}, route="r", event="push")


def test_platform_messages_are_typed_records() -> None:
    message = msg()
    assert msgspec.json.decode(msgspec.json.encode(message), type=PlatformMessage) == message


# -- MarkdownV2 ------------------------------------------------------------------------------

MODEL_MARKDOWN = [
    "**Done.** The file `a_b.py` has 3 lines (see [docs](https://example.com/a_(b))).",
    "# Result\n\n- item one!\n- item #2 = 1+1\n\n> quoted *note*\n\n~~old~~ new_value {x} | y.",
    "Code:\n```python\nprint('a*b_c`d\\\\e')\n```\nand `x * y` done.",
    "unclosed *star and _under and ``` never closed\nstill code",
    "snake_case_name and 2*3*4 and a_b*c",
    "",
]


@pytest.mark.parametrize("text", MODEL_MARKDOWN)
def test_markdown_v2_conversion_always_parses_and_keeps_the_visible_text(text: str) -> None:
    from actors.platforms.gateway._markdown_v2 import to_markdown_v2
    from tests.platforms.gateway.telegram_markdown import parse_markdown_v2

    visible, _ = parse_markdown_v2(to_markdown_v2(text))  # raises CantParse (Telegram's 400) if not
    for word in ("Done", "a_b.py", "item one!", "print('a*b_c`d", "snake_case_name", "2*3*4"):
        if word in text:
            assert word in visible, (word, visible)


def test_markdown_v2_turns_bold_code_links_and_headings_into_entities() -> None:
    from actors.platforms.gateway._markdown_v2 import to_markdown_v2
    from tests.platforms.gateway.telegram_markdown import parse_markdown_v2

    visible, entities = parse_markdown_v2(to_markdown_v2(MODEL_MARKDOWN[0] + "\n# Title\n```sh\nls -la\n```"))
    assert entities == ["bold", "code", "text_link", "bold", "pre"]
    assert visible.startswith("Done. The file a_b.py has 3 lines (see docs).")
    assert "**" not in visible and "#" not in visible


# -- the state file -----------------------------------------------------------------------------


async def test_a_reply_marked_sent_never_comes_back_in_a_later_save(tmp_path: Path) -> None:
    from actors.platforms.gateway._chats import Chat
    from actors.platforms.gateway._state_file import Durable, Outgoing, StateFile
    from protocols import PlatformMessage

    message = PlatformMessage(platform="telegram", chat_type="dm", chat_id="1", user_id="1", message_id="7", text="hi")
    owed = Outgoing(turn_id="t7", message=message, text="answer")
    chat = Chat(running="t8", message=message)
    file = StateFile(tmp_path / "telegram.json")
    await file.save(Durable(seen=SeenLog(ids=("1/7",), offset=8), outbox=(owed,), version=1))
    assert [o.turn_id for o in StateFile(file.path).load().outbox] == ["t7"]
    await file.mark_sent("t7")
    assert StateFile(file.path).load().outbox == ()
    await file.save(Durable(seen=SeenLog(ids=("1/7", "1/8"), offset=9), chats=(chat,), outbox=(owed,), version=2))  # the actor had not heard yet
    reloaded = StateFile(file.path).load()
    assert reloaded.outbox == () and reloaded.chats == (chat,) and reloaded.seen.ids == ("1/7", "1/8") and reloaded.seen.offset == 9
    await file.save(Durable(version=1))  # an older version never replaces a newer one
    assert StateFile(file.path).load().seen.offset == 9


def test_an_unreadable_state_file_is_a_clear_error(tmp_path: Path) -> None:
    from actors.platforms.gateway._state_file import StateFile

    (tmp_path / "telegram.json").write_text('{"seen": [], "chats": [{"running": 1}]}')
    with pytest.raises(RuntimeError, match="cannot be read .* move it away"):
        StateFile(tmp_path / "telegram.json").load()
