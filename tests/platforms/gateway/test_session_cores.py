"""The gateway's session decisions, pure: the shared slash-command table, what a command does in
a chat, session generations and the reset policy (a controlled clock: plain numbers), bursts,
the ``pre_gateway_dispatch`` verdict, and the state file's new parts."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import msgspec
import trio

from actors.hooks._decide import Answer, dispatch_verdict
from actors.platforms._slash_commands import did_you_mean, help_lines, lookup, on, parse
from actors.platforms.gateway import _burst
from actors.platforms.gateway._chat_commands import AskSession, Builtin, NewSession, Notice, answer_text, decide_command
from actors.platforms.gateway._chats import Cancel, Chats, Reply, Start
from actors.platforms.gateway._resets import ChatSession, ResetPolicy, chat_key_of, day_boundary, session_id_of, stale_reason
from actors.platforms.gateway._state_file import Durable, StateFile, decode, encode
from actors.platforms.tui._commands import COMMANDS as TUI_COMMANDS
from actors.platforms.tui._commands import canonical
from protocols import ContextCompressed, ModelSwitched, PlatformMessage, SessionRecord, TurnCompleted, TurnFailed, TurnUndone

UTC = dt.UTC
KEY = "agent:main:telegram:dm:42"


def msg(text: str = "hi", *, mid: str = "1", chat: str = "42") -> PlatformMessage:
    return PlatformMessage(platform="telegram", chat_type="dm", chat_id=chat, user_id=chat, message_id=mid, text=text)


def at(hour: int, minute: int = 0, day: int = 10) -> float:
    return dt.datetime(2026, 3, day, hour, minute, tzinfo=UTC).timestamp()


# -- the shared table ---------------------------------------------------------------------------


def test_one_table_serves_both_surfaces_with_aliases() -> None:
    assert [c.name for c in TUI_COMMANDS] == [
        *("new", "resume", "sessions", "model", "tools", "cron", "stop", "retry", "undo", "compress", "usage", "tree", "reload", "help", "quit")
    ]
    gateway = [c.name for c in on("gateway")]
    assert gateway == ["new", "model", "stop", "retry", "undo", "compress", "usage", "approve", "deny", "help"]
    assert lookup("reset", "gateway") == lookup("new", "gateway") == lookup("RESET", "tui")
    assert lookup("approve", "tui") is None and lookup("tree", "gateway") is None
    assert canonical("q") == canonical("exit") == "quit" and canonical("reset") == "new" and canonical("nope") == "nope"
    assert any(line.startswith("/new, /reset") for line in help_lines("gateway"))


def test_parsing_strips_a_bot_suffix_and_leaves_double_slashes_as_text() -> None:
    assert parse("/stop@hermes_bot") == parse(" /STOP ")
    assert parse("/model  gpt-x ") is not None and parse("/model  gpt-x ").argument == "gpt-x"  # type: ignore[union-attr]
    assert parse("//not a command") is None and parse("hello") is None and parse("/") is None
    assert did_you_mean("nwe", "gateway") == "unknown command /nwe. Did you mean /new? /help lists the commands."
    assert did_you_mean("zzzz", "gateway") == "unknown command /zzzz. /help lists the commands."


def test_what_a_command_does_in_a_chat() -> None:
    def decide(text: str, running: bool = False) -> object:
        parsed = parse(text)
        assert parsed is not None
        return decide_command(parsed, running=running)

    assert decide("/reset") == NewSession() and decide("/new") == NewSession()
    assert decide("/reset", running=True) == Notice("A turn is running in this chat; /stop it first, then /reset.")
    assert decide("/stop", running=True) == Builtin("stop") and decide("/deny") == Builtin("deny")
    assert decide("/undo") == AskSession("undo") and isinstance(decide("/undo", running=True), Notice)
    assert decide("/model big") == AskSession("model", "big") and decide("/model", running=True) == AskSession("model")
    assert decide("/usage", running=True) == AskSession("usage")
    help_ = decide("/help")
    assert isinstance(help_, Notice) and "/approve" in help_.text and "/tree" not in help_.text
    assert decide("/foo") == Notice("unknown command /foo. /help lists the commands.")
    assert decide("/compress the plan") == AskSession("compress", "the plan") and isinstance(decide("/compress", running=True), Notice)
    assert decide("/tree") == Notice("/tree works in hermes chat, not in chats; /help lists what works here.")


def test_the_answers_to_a_sessions_question_are_worded() -> None:
    assert answer_text("undo", "", TurnUndone(session_id="s", removed=2, text="x"), "s") == "Took back the last exchange (2 messages)."
    assert answer_text("undo", "", TurnUndone(session_id="s", error="nothing to undo"), "s") == "Nothing to undo: nothing to undo"
    assert answer_text("model", "m2", ModelSwitched(session_id="s", model="m2"), "s") == "This chat's session calls m2 from its next turn on."
    assert answer_text("model", "", None, "s") == "Model: the server's default. /model <name> switches this chat's session."
    record = SessionRecord(id="s", source="api_server", message_count=4, input_tokens=120, output_tokens=30, cache_read_tokens=100, tool_call_count=1)
    assert answer_text("usage", "", record, "s") == "Session s: 4 messages, 120 tokens in (100 from the prompt cache), 30 out, 1 tool calls."
    assert answer_text("usage", "", None, "s") == "Session s: no turns yet."
    assert answer_text("model", "m2", "no session", "s") == "/model failed: no session"
    done = TurnCompleted(session_id="s", turn_id="t", text="")
    compressed = ContextCompressed(session_id="s", turn_id="t", tokens_before=900, tokens_after=300, summarised=6)
    assert answer_text("compress", "", (compressed, done), "s") == "Compressed the conversation: 6 messages summarised (about 900 tokens before, 300 after)."
    assert answer_text("compress", "", (None, TurnFailed(session_id="s", turn_id="t", error="model down")), "s").startswith(
        "The compression failed: model down"
    )
    assert answer_text("compress", "", (None, None), "s") == "The compression did not end in time; it goes on in the session."


# -- generations and the reset policy --------------------------------------------------------------


def test_session_ids_follow_the_generation() -> None:
    assert session_id_of(KEY, 1) == KEY and session_id_of(KEY, 3) == f"{KEY}#3"
    assert chat_key_of(f"{KEY}#3") == chat_key_of(KEY) == KEY


def test_idle_resets_after_the_minutes_without_a_message() -> None:
    policy = ResetPolicy(mode="idle", idle_minutes=60)
    start = at(12)
    assert stale_reason(policy, start, start + 59 * 60) is None
    assert stale_reason(policy, start, start + 60 * 60) == "idle for 60 minutes"
    assert stale_reason(policy, 0.0, start) is None  # no message yet: nothing to reset


def test_daily_resets_on_the_first_message_after_the_hour() -> None:
    policy = ResetPolicy(mode="daily", at_hour=4)
    assert day_boundary(at(3, 59), 4, UTC) == at(4, day=9)
    assert day_boundary(at(4, 0), 4, UTC) == at(4)
    assert stale_reason(policy, at(3, 50), at(4, 10), UTC) == "the daily reset at 04:00"
    assert stale_reason(policy, at(4, 5), at(23, 0), UTC) is None  # same day, after the hour
    assert stale_reason(policy, at(23, 0, day=9), at(3, 0), UTC) is None  # before the hour
    assert stale_reason(policy, at(12, 0, day=8), at(12, 0, day=10), UTC) is not None


def test_both_takes_either_reason_and_none_takes_neither() -> None:
    both = ResetPolicy()  # Hermes's defaults
    assert (both.mode, both.idle_minutes, both.at_hour) == ("both", 1440, 4)
    assert stale_reason(both, at(3), at(5), UTC) == "the daily reset at 04:00"
    assert stale_reason(both, at(5, day=8), at(6, day=9), UTC) == "idle for 1440 minutes"
    assert stale_reason(ResetPolicy(mode="none"), at(5, day=1), at(6, day=9), UTC) is None


# -- bursts -----------------------------------------------------------------------------------------


def test_a_burst_is_held_until_a_window_passes_without_a_message() -> None:
    bursts = _burst.add({}, KEY, msg("first", mid="1"), 100.0, 0.8)
    bursts = _burst.add(bursts, KEY, msg("second", mid="2"), 100.5, 0.8)
    assert _burst.next_due(bursts) == 101.3
    held, ready = _burst.take_due(bursts, 101.0)
    assert ready == [] and held == bursts
    held, ready = _burst.take_due(bursts, 101.3)
    assert held == {}
    ((key, joined),) = ready
    assert key == KEY and joined.text == "first\nsecond" and joined.message_id == "2"


def test_a_burst_that_never_pauses_is_sent_after_the_most_it_is_held() -> None:
    bursts: dict[str, _burst.Burst] = {}
    for n in range(20):
        bursts = _burst.add(bursts, KEY, msg(str(n), mid=str(n)), 100.0 + n * 0.5, 0.8)
    assert _burst.next_due(bursts) == 100.0 + 0.8 * _burst.MAX_HOLD
    left, taken = _burst.take(bursts, KEY)
    assert left == {} and taken is not None and taken.text.startswith("0\n1\n")
    assert _burst.take({}, KEY) == ({}, None)


# -- the busy policy in a chat's current session -------------------------------------------------------


def test_a_chats_turns_run_in_its_current_session() -> None:
    chats, actions = Chats().on_message(msg("a", mid="1"), f"{KEY}#2")
    assert actions == [Start(msg("a", mid="1"), "gw-telegram-42-1", interrupt=False, session_id=f"{KEY}#2")]
    chats, _ = chats.on_message(msg("b", mid="2"), f"{KEY}#2")
    chats, actions = chats.on_stop(msg("/stop", mid="3"))
    assert actions == [Cancel(f"{KEY}#2", "gw-telegram-42-1")]
    _, actions = chats.on_end(f"{KEY}#2", "gw-telegram-42-1", "", cancelled=True)
    assert actions == [Reply(msg("a", mid="1"), "Stopped.", turn_id="gw-telegram-42-1")]
    chats, _ = Chats().on_message(msg("a", mid="1"), f"{KEY}#2")
    chats, _ = chats.on_message(msg("b", mid="2"), f"{KEY}#2")
    _, actions = chats.on_end(f"{KEY}#2", "gw-telegram-42-1", "done")
    assert actions[1] == Start(msg("b", mid="2"), "gw-telegram-42-2", interrupt=False, session_id=f"{KEY}#2")


# -- pre_gateway_dispatch ------------------------------------------------------------------------------


def test_the_first_action_decides_a_dispatch() -> None:
    assert dispatch_verdict([]) == ("allow", "")
    assert dispatch_verdict([Answer("a", None), Answer("b", {"action": "skip", "reason": "ambient"})]) == ("skip", "ambient")
    assert dispatch_verdict([Answer("a", {"action": "rewrite", "text": "new"}), Answer("b", {"action": "skip"})]) == ("rewrite", "new")
    assert dispatch_verdict([Answer("a", {"action": "rewrite"}), Answer("b", {"action": "allow"}), Answer("c", {"action": "skip"})]) == ("allow", "")
    assert dispatch_verdict([Answer("a", "text"), Answer("b", {"decision": "block"})]) == ("allow", "")


# -- the state file ---------------------------------------------------------------------------------------


def test_generations_held_bursts_and_chat_sessions_survive_the_state_file(tmp_path: Path) -> None:
    chats, _ = Chats().on_message(msg("a"), f"{KEY}#2")
    state = Durable(chats=tuple(chats.chats.values()), sessions={KEY: ChatSession(generation=2, last_at=123.5)}, held=(msg("held", mid="9"),), version=1)
    back = decode(encode(state).decode())
    assert back.sessions == {KEY: ChatSession(generation=2, last_at=123.5)}
    assert back.held == (msg("held", mid="9"),) and back.chats[0].session() == f"{KEY}#2"
    old_style = {"offset": 0, "seen": [], "chats": [{"running": "t", "message": msgspec.to_builtins(msg("a")), "queue": []}], "outbox": []}
    older = decode(json.dumps(old_style))
    assert older.sessions == {} and older.chats[0].session() == KEY  # a file from before generations

    async def save() -> Durable:
        file = StateFile(tmp_path / "telegram.json")
        await file.save(state)
        return StateFile(tmp_path / "telegram.json").load()

    assert trio.run(save).sessions == state.sessions
