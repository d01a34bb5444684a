"""Slash commands, the prompt (history, completion, new lines), and starting up."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from textual.pilot import Pilot

from actors.agent import Price
from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.platforms.tui import ChatApp, LocalSession, RequestRefused, SetupFailed
from actors.platforms.tui._commands import complete, did_you_mean, parse
from actors.platforms.tui._modals import SessionsScreen
from actors.platforms.tui._prompt import History, PromptArea
from actors.platforms.tui._widgets import AssistantBlock, ToolLine
from protocols import TurnCompleted
from tests.conftest import DEADLINE
from tests.tui.tui_kit import drive, kind, make_app, texts, type_text


async def run_command(pilot: Pilot[int], app: ChatApp, text: str) -> None:
    """Send a slash command and wait until its worker is done."""
    await type_text(pilot, text)
    await app.workers.wait_for_complete()
    await pilot.pause()


def test_resume_restores_a_session_by_id_and_by_title_with_its_transcript(local: LocalSession, model_server: ModelServer) -> None:
    model_server.script(
        [
            ToolCallsReply(calls=(ScriptedCall(name="read_file", arguments='{"path": "a.txt", "seconds": 0}'),)),
            TextReply(content="It says **a**."),
        ]
    )

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        first = app.session_id
        await type_text(pilot, "Summarise the file a.txt")
        await app.wait_for_event(kind(TurnCompleted))
        await run_command(pilot, app, "/new")
        assert app.session_id != first
        assert not app.query(AssistantBlock) and not app.query(".user")
        await run_command(pilot, app, f"/resume {first}")
        assert app.session_id == first
        assert texts(app, ".user") == ["Summarise the file a.txt"]
        assert [b.text for b in app.query(AssistantBlock)] == ["It says **a**."]
        assert [(t.tool_name, t.state, t.output) for t in app.query(ToolLine)] == [("read_file", "ok", "contents of a.txt")]
        await run_command(pilot, app, "/new")
        await run_command(pilot, app, "/resume summarise the file")  # a title, any case
        assert app.session_id == first
        model_server.script([TextReply(content="still here")])
        mark = len(app.seen)
        await type_text(pilot, "and now?")
        done = await app.wait_for_event(kind(TurnCompleted), start=mark)
        assert done.text == "still here"  # type: ignore[union-attr]

    drive(make_app(local), scenario)
    sent = model_server.requests[-1].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["Summarise the file a.txt", "and now?"]


def test_sessions_lists_sessions_filters_them_and_enter_resumes_one(local: LocalSession, model_server: ModelServer) -> None:
    model_server.script([TextReply(content="one"), TextReply(content="two")])

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await type_text(pilot, "alpha question")
        await app.wait_for_event(kind(TurnCompleted))
        alpha = app.session_id
        await run_command(pilot, app, "/new")
        await type_text(pilot, "beta question")
        await app.wait_for_event(kind(TurnCompleted))
        await run_command(pilot, app, "/sessions")
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        assert len(screen.shown) == 2
        await pilot.press(*"alpha")
        assert screen.shown == [alpha]
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.session_id == alpha
        assert texts(app, ".user") == ["alpha question"]

    drive(make_app(local), scenario)


def test_unknown_commands_get_a_did_you_mean(local: LocalSession) -> None:
    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await run_command(pilot, app, "/sesions")
        assert "unknown command /sesions. Did you mean /sessions? /help lists the commands." in texts(app, ".notice")

    drive(make_app(local), scenario)


def test_undo_takes_back_the_last_exchange_and_model_switches_the_session(local: LocalSession, model_server: ModelServer) -> None:
    model_server.script([TextReply(content="one"), TextReply(content="two"), TextReply(content="three")])

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await run_command(pilot, app, "/undo")
        assert "nothing to undo" in texts(app, ".notice")[-1]
        for question in ("first", "second"):
            mark = len(app.seen)
            await type_text(pilot, question)
            await app.wait_for_event(kind(TurnCompleted), start=mark)
        await run_command(pilot, app, "/undo")
        assert texts(app, ".user") == ["first"]  # re-shown from the store
        assert [b.text for b in app.query(AssistantBlock)] == ["one"]
        assert app.query_one(PromptArea).text == "second"  # back in the prompt, to edit
        assert "took back the last exchange (2 messages)" in texts(app, ".notice")[-1]
        app.query_one(PromptArea).put("")
        await run_command(pilot, app, "/model bigger-model")
        assert app.model_name == "bigger-model"
        mark = len(app.seen)
        await type_text(pilot, "third")
        await app.wait_for_event(kind(TurnCompleted), start=mark)

    drive(make_app(local), scenario)
    body = model_server.requests[-1].body
    assert body["model"] == "bigger-model"
    assert [m["content"] for m in body["messages"] if m["role"] != "system"] == ["first", "one", "third"]


def test_tree_tools_model_usage_and_help_answer_in_the_transcript(local: LocalSession, model_server: ModelServer) -> None:
    model_server.script([TextReply(content="hi")])

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await type_text(pilot, "hello")
        await app.wait_for_event(kind(TurnCompleted))
        for command in ("/tree", "/tools", "/model", "/usage", "/help"):
            await run_command(pilot, app, command)
        tree, tools, model, usage, help_text = texts(app, ".notice")[-5:]
        assert "sessions" in tree and "store" in tree and "reactor: lag" in tree
        assert tools.startswith("tools: ") and "read_file" in tools and "clarify" in tools
        assert model == "model: test-model (sessions run at local); /model <name> switches this session"
        assert usage.startswith("last turn: ") and "the session in the store" in usage
        assert "/resume <id|title>" in help_text

    drive(make_app(local), scenario)


def test_retry_sends_the_last_message_again(local: LocalSession, model_server: ModelServer) -> None:
    model_server.script([TextReply(content="first"), TextReply(content="second")])

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await type_text(pilot, "tell me a number")
        await app.wait_for_event(kind(TurnCompleted))
        mark = len(app.seen)
        await run_command(pilot, app, "/retry")
        await app.wait_for_event(kind(TurnCompleted), start=mark)
        assert texts(app, ".user") == ["tell me a number", "tell me a number"]

    drive(make_app(local), scenario)


def test_the_prompt_keeps_history_completes_commands_and_takes_new_lines(local: LocalSession, model_server: ModelServer) -> None:
    model_server.script([TextReply(content="a"), TextReply(content="b")])

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        prompt = app.query_one(PromptArea)
        await type_text(pilot, "first line\\", as_keys=True)  # a trailing backslash: Enter makes a new line
        await pilot.press("s", "e", "c", "o", "n", "d", "enter")
        await app.wait_for_event(kind(TurnCompleted))
        assert texts(app, ".user") == ["first line\nsecond"]
        await pilot.press("x", "ctrl+j", "y")
        assert prompt.text == "x\ny"
        prompt.load_text("")
        await pilot.press("up")
        assert prompt.text == "first line\nsecond"
        await pilot.press("down")
        assert prompt.text == ""
        await pilot.press("slash", "r", "e", "s")
        assert "/resume" in str(app.query_one("#hint").render())
        await pilot.press("tab")
        assert prompt.text == "/resume "

    drive(make_app(local), scenario)


def test_messages_typed_before_the_runtime_is_up_are_sent_when_it_is(local: LocalSession, model_server: ModelServer) -> None:
    model_server.script([TextReply(content="you were early")])
    release = threading.Event()

    def slow_connect() -> LocalSession:
        assert release.wait(DEADLINE)
        return local

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        assert app.state == "starting..."
        await type_text(pilot, "am I early?")
        assert texts(app, ".user") == ["am I early?"]
        release.set()
        done = await app.wait_for_event(kind(TurnCompleted))
        assert done.text == "you were early"  # type: ignore[union-attr]

    async def started(pilot: Pilot[int], app: ChatApp) -> None:
        await pilot.pause()
        await scenario(pilot, app)

    app = ChatApp(slow_connect, history=History())

    async def main() -> None:
        async with app.run_test(size=(100, 40)) as pilot:
            await started(pilot, app)

    asyncio.run(main())


def test_a_configuration_error_is_shown_and_sets_exit_status_2() -> None:
    def broken() -> LocalSession:
        raise SetupFailed("no model is configured: add model.default to config.yaml")

    async def scenario(pilot: Pilot[int], app: ChatApp) -> int:
        assert app.state == "not connected"
        assert "no model is configured: add model.default to config.yaml" in texts(app, ".notice")
        await type_text(pilot, "hello?")
        assert any(t.startswith("not sent") for t in texts(app, ".notice"))
        await pilot.press("ctrl+c", "ctrl+c")
        return app.return_value or 0

    assert drive(ChatApp(broken, history=History()), scenario, connected=False) == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [("/res", "/resume "), ("/s", None), ("/r", "/re"), ("/se", "/sessions "), ("/x", None), ("hello", None), ("/resume a", None)],
)
def test_tab_completion_finishes_a_command_or_its_common_prefix(text: str, expected: str | None) -> None:
    assert complete(text) == expected


def test_parsing_tells_commands_from_messages() -> None:
    assert parse("/resume My Title ") is not None and parse("/resume My Title ").argument == "My Title"  # type: ignore[union-attr]
    assert parse("//not a command") is None
    assert parse("hello /new") is None
    assert did_you_mean("qiut") == "unknown command /qiut. Did you mean /quit? /help lists the commands."
    assert did_you_mean("zzzz") == "unknown command /zzzz. /help lists the commands."


def test_quitting_before_the_runtime_is_up_still_hands_it_over_to_be_stopped(local: LocalSession) -> None:
    release = threading.Event()

    def slow_connect() -> LocalSession:
        assert release.wait(DEADLINE)
        return local

    app = ChatApp(slow_connect, history=History())

    async def main() -> None:
        async with app.run_test() as pilot:
            await pilot.pause()
            await pilot.press("ctrl+c", "ctrl+c")

    asyncio.run(main())
    assert app.handle is None
    release.set()
    assert app.finish_connecting(DEADLINE) is local


def test_a_transcript_that_cannot_be_read_still_lets_the_app_follow_the_session(local: LocalSession, model_server: ModelServer) -> None:
    model_server.script([TextReply(content="live anyway")])

    async def unreadable(session_id: str) -> list[object]:
        raise RequestRefused("the store is busy")

    local.transcript = unreadable  # type: ignore[assignment, method-assign]

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        assert any("the stored transcript could not be read (the store is busy)" in t for t in texts(app, ".notice"))
        await type_text(pilot, "hello")
        done = await app.wait_for_event(kind(TurnCompleted))
        assert done.text == "live anyway"  # type: ignore[union-attr]

    drive(make_app(local, session_id="sess_unreadable", resume=True), scenario)


def test_a_priced_model_shows_each_turns_cost_in_the_status_bar_and_usage(tmp_path: Path, model_server: ModelServer) -> None:
    from actors.agent import ModelSettings
    from tests.tui.tui_kit import local_session

    # The test model counts words as tokens: "one two three" in, "four five" out.
    prices = {"test-model": Price(input=2_000.0, output=10_000.0)}  # USD per million tokens, large enough to read
    handle = local_session(tmp_path, model_server, model=ModelSettings(model="test-model", base_url=model_server.base_url, api_key="k", prices=prices))
    model_server.script([TextReply(content="four five"), TextReply(content="six")])

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        done = []
        for question in ("one two three", "again"):
            mark = len(app.seen)
            await type_text(pilot, question)
            done.append(await app.wait_for_event(kind(TurnCompleted), start=mark))
        costs = [d.cost_usd for d in done]  # type: ignore[union-attr]
        usage = [(d.input_tokens, d.output_tokens) for d in done]  # type: ignore[union-attr]
        assert costs == [pytest.approx((i * 2_000 + o * 10_000) / 1e6) for i, o in usage] and all(costs)
        await pilot.pause()
        status = str(app.query_one("#status").render())
        assert f"${sum(costs):.2f}" in status  # type: ignore[arg-type]
        await run_command(pilot, app, "/usage")
        assert f"(${costs[-1]:.2f})" in texts(app, ".notice")[-1]

    try:
        drive(make_app(handle), scenario)
    finally:
        assert handle.close()


def test_a_claude_turn_that_read_the_prompt_cache_shows_the_cached_tokens_in_the_status_bar_and_usage(tmp_path: Path, model_server: ModelServer) -> None:
    from actors.agent import ModelSettings
    from tests.tui.tui_kit import local_session

    handle = local_session(tmp_path, model_server, model=ModelSettings(model="anthropic/claude-sonnet-4", base_url=model_server.base_url, api_key="k"))
    model_server.script([TextReply(content="four five"), TextReply(content="six")])

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        done = []
        for question in ("one two three", "again"):
            mark = len(app.seen)
            await type_text(pilot, question)
            done.append(await app.wait_for_event(kind(TurnCompleted), start=mark))
        cached = [d.cache_read_tokens for d in done]  # type: ignore[union-attr]
        assert cached[0] == 0 < cached[1]  # the second turn read what the first one's marks cached
        await pilot.pause()
        assert f"({cached[1]} cached)" in str(app.query_one("#status").render())
        await run_command(pilot, app, "/usage")
        notice = texts(app, ".notice")[-1]
        assert f"({cached[1]} from the prompt cache)" in notice
        assert notice.count("from the prompt cache") == 2, notice  # the last turn, and the store's session totals

    try:
        drive(make_app(handle), scenario)
    finally:
        assert handle.close()


def test_a_model_chosen_before_the_first_message_keeps_the_automatic_title(local: LocalSession, model_server: ModelServer) -> None:
    model_server.script([TextReply(content="hi")])

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await run_command(pilot, app, "/model bigger-model")  # creates the session, untitled
        await type_text(pilot, "plan the week")
        await app.wait_for_event(kind(TurnCompleted))
        record = await local.get_session(app.session_id)
        assert record is not None and (record.title, record.model) == ("plan the week", "bigger-model")

    drive(make_app(local), scenario)
    assert model_server.requests[-1].body["model"] == "bigger-model"


def test_compress_summarises_the_conversation_with_a_topic_and_the_status_line_counts_it(local: LocalSession, model_server: ModelServer) -> None:
    model_server.script([TextReply(content=f"noted {i}") for i in range(6)] + [TextReply(content="The user logged tides for six days.")])

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await run_command(pilot, app, "/compress")
        assert "nothing to compress yet" in texts(app, ".notice")[-1]
        for i in range(6):  # about 7,500 tokens each: past the tail a 128K window keeps
            mark = len(app.seen)
            await type_text(pilot, f"day {i}: " + "high water at six, low water at noon. " * 800)
            await app.wait_for_event(kind(TurnCompleted), start=mark)
        mark = len(app.seen)
        await run_command(pilot, app, "/compress tides")
        done = await app.wait_for_event(kind(TurnCompleted), start=mark)
        assert done.text.startswith("Compressed the conversation:")  # type: ignore[union-attr]
        await pilot.pause()
        assert texts(app, ".user")[-1] == "/compress tides", "shown once, as sent"
        assert any(t.startswith("context compressed:") for t in texts(app, ".notice"))
        assert app.compressions == 1 and "compressed ×1" in str(app.query_one("#status").render())

    drive(make_app(local), scenario)
    summary_request = model_server.requests[-1].body
    assert "tools" not in summary_request and "tides" in summary_request["messages"][0]["content"]


def test_reload_reads_config_yaml_again_and_the_next_turn_has_the_new_tools(tmp_path: Path, model_server: ModelServer) -> None:
    from actors.platforms.tui._local import open_local_session

    home = tmp_path / "home"
    home.mkdir()
    model = f'model:\n  default: test-model\n  base_url: "{model_server.base_url}"\n  api_key: sk-test\n'
    (home / "config.yaml").write_text(model + "toolsets: [todo]\n")
    handle = open_local_session(home, env={})
    model_server.script([TextReply(content="one"), TextReply(content="two")])

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await type_text(pilot, "first")
        await app.wait_for_event(kind(TurnCompleted))
        (home / "config.yaml").write_text(model + "toolsets: [todo, file]\n")
        await run_command(pilot, app, "/reload")
        assert "toolsets apply to every session from its next turn" in texts(app, ".notice")[-1]
        await run_command(pilot, app, "/tools")
        assert texts(app, ".notice")[-1] == "tools: patch, read_file, search_files, todo, write_file"
        mark = len(app.seen)
        await type_text(pilot, "second")
        assert (await app.wait_for_event(kind(TurnCompleted), start=mark)).text == "two"  # type: ignore[union-attr]
        (home / "config.yaml").write_text("toolsets: nonsense: [\n")
        await run_command(pilot, app, "/reload")
        assert "not reloaded, the running settings stay" in texts(app, ".notice")[-1]

    try:
        drive(make_app(handle), scenario)
    finally:
        assert handle.close()
    offered = [sorted(t["function"]["name"] for t in r.body.get("tools") or ()) for r in model_server.requests if r.path == "/v1/chat/completions"]
    assert offered[-2:] == [["todo"], ["patch", "read_file", "search_files", "todo", "write_file"]]
