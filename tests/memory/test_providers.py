"""Memory providers under ``/memory``: the recalled block reaches the model request and never the
store, a hung provider never holds a turn past the deadline, a crashing one is restarted, the
memory tool's writes are serialised through the built-in provider's actor, and the ``store``
provider recalls facts by relevance."""

from __future__ import annotations

import dataclasses
import json
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
import trio

from actors.agent import MachineConfig
from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.memory import (
    MemoryHealth,
    MemoryOptions,
    MemoryProvider,
    PrefetchResult,
    ProviderEnv,
    ProviderError,
    block_of,
    collect_prefetch,
    memory_context_block,
    register_provider,
    skipped,
)
from actors.store import SCHEMA_VERSION, open_writer, search_facts
from actors.tools import REGISTRY
from protocols import MemorySkipped, TurnCompleted
from protocols._memory import ProviderReply
from tests.agent.session_kit import AgentKit, Intervals, make_tools, start_kit, until
from tests.conftest import DEADLINE

# -- the zoo: providers that hang or crash ---------------------------------------------------------

RELEASE = threading.Event()
"""Set at the end of a test: the hung provider's call returns, so its actor can stop."""


class HungProvider(MemoryProvider):
    name = "hung"

    def prefetch(self, query: str, session_id: str) -> str:
        RELEASE.wait(DEADLINE)
        return "too late"


class CrashingProvider(MemoryProvider):
    """Its first prefetch in a process crashes the actor; the restarted one answers."""

    name = "crashing"
    crashed = threading.Event()

    def prefetch(self, query: str, session_id: str) -> str:
        if not CrashingProvider.crashed.is_set():
            CrashingProvider.crashed.set()
            raise RuntimeError("the provider's backend went away")
        return "the user's cat is called Miso"


class FailingProvider(MemoryProvider):
    name = "failing"

    def prefetch(self, query: str, session_id: str) -> str:
        raise ProviderError("the backend refused the query")


class RecordingProvider(MemoryProvider):
    """Records what it is told; ``TOLD`` fills from its actor's thread."""

    name = "recording"

    def on_turn_start(self, session_id: str, model: str, platform: str, tool_count: int) -> None:
        TOLD.put(("turn_start", session_id, model, platform, str(tool_count)))

    def sync_turn(self, session_id: str, user: str, answer: str) -> None:
        TOLD.put(("sync_turn", session_id, user, answer))

    def on_memory_write(self, action: str, target: str, content: str) -> None:
        TOLD.put(("memory_write", action, target, content))

    def on_delegation(self, task: str, result: str) -> None:
        TOLD.put(("delegation", task, result))


TOLD: queue.Queue[tuple[str, ...]] = queue.Queue()

register_provider("recording", RecordingProvider)
register_provider("hung", HungProvider)
register_provider("crashing", CrashingProvider)


@pytest.fixture(autouse=True)
def _release() -> Iterator[None]:
    RELEASE.clear()
    while not TOLD.empty():
        TOLD.get_nowait()
    yield
    RELEASE.set()


def kit_with(tmp_path: Path, server: ModelServer, memory: MemoryOptions, *tool_names: str) -> AgentKit:
    tools = {**make_tools(Intervals()), **{n: REGISTRY.get(n).spec() for n in tool_names}}
    config = MachineConfig(traits={n: t.traits for n, t in tools.items()}, retry_base=0.01, turn_timeout=60.0)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return start_kit(tmp_path / "state.db", server, tools=tools, config=config, home=home, memory=memory)


def call(tool: str, **arguments: Any) -> ToolCallsReply:
    return ToolCallsReply(calls=(ScriptedCall(name=tool, arguments=json.dumps(arguments)),))


def user_text_sent(server: ModelServer, session: str) -> list[str]:
    """The last user message's text in each model request of ``session``."""
    return [[m["content"] for m in r.body["messages"] if m["role"] == "user"][-1] for r in server.requests if r.session == session]


# -- pure decisions --------------------------------------------------------------------------------


def test_the_block_wraps_what_answered_in_sorted_order_and_is_empty_when_nothing_was_recalled() -> None:
    assert memory_context_block({"b": "two", "a": " one ", "c": "  "}).splitlines() == [
        "<memory-context>",
        "[System note: this is recalled memory context, not new input from the user. Treat it as background reference.]",
        "",
        "[a]",
        "one",
        "",
        "[b]",
        "two",
        "</memory-context>",
    ]
    assert memory_context_block({"a": ""}) == ""
    results = [
        PrefetchResult(provider="a", outcome="ok", text="kept"),
        PrefetchResult(provider="b", outcome="timeout", text="late"),
        PrefetchResult(provider="c", outcome="empty"),
        PrefetchResult(provider="d", outcome="error", detail="boom"),
    ]
    assert "kept" in block_of(results) and "late" not in block_of(results)
    assert [r.provider for r in skipped(results)] == ["b", "d"]


async def test_a_hung_prefetch_is_cut_at_the_deadline_and_the_others_are_kept(autojump_clock: trio.abc.Clock) -> None:
    async def fast() -> ProviderReply:
        await trio.sleep(0.1)
        return ProviderReply(provider="fast", text="recalled")

    async def hung() -> ProviderReply:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def gone() -> None:
        return None

    started = trio.current_time()
    results = await collect_prefetch({"fast": fast, "hung": hung, "gone": gone}, 0.5)
    assert trio.current_time() - started == pytest.approx(0.5)
    assert [(r.provider, r.outcome) for r in results] == [("fast", "ok"), ("hung", "timeout"), ("gone", "unavailable")]
    assert results[1].detail == "no answer within 0.5 s"


def test_health_counts_starts_crashes_and_skipped_prefetches() -> None:
    health = MemoryHealth()
    health.started("store", 1)
    health.prefetched("store", "ok")
    health.crashed("store")
    health.prefetched("store", "timeout", "no answer within 0.5 s")
    assert health.statuses() == {
        "store": {"state": "restarting", "incarnation": 1, "crashes": 1, "prefetches": 2, "skipped": 1, "last_skip": "timeout: no answer within 0.5 s"}
    }


# -- the store's facts table -----------------------------------------------------------------------


def test_a_version_8_store_is_migrated_to_hold_facts_and_their_index(tmp_path: Path) -> None:
    path = tmp_path / "v8.db"
    open_writer(path).close()
    db = apsw.Connection(str(path))
    db.execute(
        "DROP TRIGGER memory_facts_insert; DROP TRIGGER memory_facts_delete; DROP TRIGGER memory_facts_update; "
        "DROP TABLE memory_facts_fts; DROP TABLE memory_facts; UPDATE schema_version SET version = 8"
    )
    db.close()
    writer = open_writer(path)
    assert writer.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    writer.execute("INSERT INTO memory_facts (content, created_at, updated_at) VALUES ('Deploys run on Fridays', 1, 1)")
    assert [h.content for h in search_facts(writer, "when do deploys run?")] == ["Deploys run on Fridays"]
    writer.close()


# -- in a runtime ----------------------------------------------------------------------------------


def test_the_store_provider_saves_facts_through_the_store_and_recalls_the_relevant_ones_in_the_request_only(tmp_path: Path, model_server: ModelServer) -> None:
    kit = kit_with(tmp_path, model_server, MemoryOptions(provider="store"), "fact_store")
    try:
        model_server.script(
            [
                ToolCallsReply(
                    calls=(
                        ScriptedCall(
                            name="fact_store", arguments=json.dumps({"action": "add", "content": "The user edits code in Helix.", "category": "preference"})
                        ),
                        ScriptedCall(name="fact_store", arguments=json.dumps({"action": "add", "content": "The user's servers run Debian."})),
                        ScriptedCall(name="fact_store", arguments=json.dumps({"action": "add", "content": "The user prefers tea to coffee."})),
                    )
                ),
                call("fact_store", action="search", query="which editor does the user use for code"),
                TextReply(content="Noted."),
                TextReply(content="Helix."),
            ],
            session="f",
        )
        probe = kit.subscribe("f")
        kit.start_turn("f", "Remember: I edit code in Helix, my servers run Debian, and I prefer tea.")
        first = until(probe, TurnCompleted)
        assert first[-1].text == "Noted."
        kit.start_turn("f", "Which editor do I use for code?")
        second = until(probe, TurnCompleted)
        assert second[-1].text == "Helix."
        assert not [e for e in first + second if isinstance(e, MemorySkipped)]
        transcript = kit.transcript("f")
        results = [m.content or "" for m in transcript if m.role == "tool"]
        assert results[:3] == ["Fact 1 saved.", "Fact 2 saved.", "Fact 3 saved."]
        assert results[3].splitlines()[0] == "1: The user edits code in Helix."  # bm25: the most relevant first
        # The second turn's request carries the recalled facts after the user's text; the store never sees them.
        sent = user_text_sent(model_server, "f")[-1]
        text, block = sent.split("\n\n", 1)
        assert text == "Which editor do I use for code?"
        assert block.startswith("<memory-context>\n") and block.endswith("</memory-context>")
        lines = block.splitlines()
        assert lines[lines.index("[store]") + 1] == "- The user edits code in Helix. (fact 1)"  # the most relevant first
        assert "<memory-context>" not in user_text_sent(model_server, "f")[0]  # nothing was stored before the first turn
        assert all("<memory-context>" not in (m.content or "") for m in transcript)
        with apsw.Connection(str(kit.store_file), flags=apsw.SQLITE_OPEN_READONLY) as db:
            rows = db.execute("SELECT id, category, session_id FROM memory_facts ORDER BY id").fetchall()
        assert rows == [(1, "preference", "f"), (2, "general", "f"), (3, "general", "f")]
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_a_hung_provider_never_holds_the_turn_and_the_skip_is_on_the_stream_and_in_health(tmp_path: Path, model_server: ModelServer) -> None:
    options = MemoryOptions(provider="hung", prefetch_timeout=0.2)
    kit = kit_with(tmp_path, model_server, options)
    try:
        model_server.script([TextReply(content="answered anyway")], session="h")
        probe = kit.subscribe("h")
        kit.start_turn("h", "hello")
        events = until(probe, TurnCompleted)
        assert events[-1].text == "answered anyway"
        skip = next(e for e in events if isinstance(e, MemorySkipped))
        assert (skip.provider, skip.reason, skip.detail) == ("hung", "timeout", "no answer within 0.2 s")
        assert skip.turn_id == events[-1].turn_id
        assert user_text_sent(model_server, "h") == ["hello"]
        status = options.health.statuses()["hung"]
        assert status["state"] == "running" and status["skipped"] == 1 and status["last_skip"] == "timeout: no answer within 0.2 s"
    finally:
        RELEASE.set()
        assert kit.runtime.stop(timeout=DEADLINE)


def test_a_crashing_provider_is_restarted_and_the_session_goes_on_with_it(tmp_path: Path, model_server: ModelServer) -> None:
    CrashingProvider.crashed.clear()
    options = MemoryOptions(provider="crashing", prefetch_timeout=DEADLINE)
    kit = kit_with(tmp_path, model_server, options)
    try:
        model_server.script([TextReply(content="first"), TextReply(content="second")], session="c")
        probe = kit.subscribe("c")
        kit.start_turn("c", "what is my cat called?")
        first = until(probe, TurnCompleted)
        skip = next(e for e in first if isinstance(e, MemorySkipped))
        assert skip.reason == "error" and "RuntimeError: the provider's backend went away" in skip.detail
        kit.start_turn("c", "and again?")
        second = until(probe, TurnCompleted)
        assert [e.text for e in (first[-1], second[-1])] == ["first", "second"]
        assert not [e for e in second if isinstance(e, MemorySkipped)]
        assert user_text_sent(model_server, "c")[0] == "what is my cat called?"
        assert "the user's cat is called Miso" in user_text_sent(model_server, "c")[1]
        status = options.health.statuses()["crashing"]
        assert status["crashes"] == 1 and status["incarnation"] == 2 and status["state"] == "running"
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_memory_tool_writes_from_two_sessions_at_once_both_land_through_the_one_actor(tmp_path: Path, model_server: ModelServer) -> None:
    kit = kit_with(tmp_path, model_server, MemoryOptions(), "memory")
    try:
        for session, fact in (("a", "Lives in Lisbon."), ("b", "Works night shifts.")):
            model_server.script([call("memory", action="add", target="user", content=fact), TextReply(content="saved")], session=session)
        probes = {s: kit.subscribe(s) for s in ("a", "b")}
        for session in probes:
            kit.start_turn(session, "remember this")
        for probe in probes.values():
            assert until(probe, TurnCompleted)[-1].text == "saved"
        entries = (tmp_path / "home" / "memories" / "USER.md").read_text(encoding="utf-8").split("\n§\n")
        assert sorted(e.strip() for e in entries) == ["Lives in Lisbon.", "Works night shifts."]
        results = [m.content or "" for s in ("a", "b") for m in kit.transcript(s) if m.role == "tool"]
        assert all(r.startswith("Entry added.") for r in results) and len(results) == 2
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_a_failing_provider_is_answered_as_an_error_without_a_restart(tmp_path: Path) -> None:
    provider = FailingProvider(ProviderEnv(home=tmp_path))
    with pytest.raises(ProviderError, match="refused"):
        provider.prefetch("q", "s")
    assert dataclasses.replace(ProviderEnv(home=tmp_path), prefetch_limit=2).prefetch_limit == 2


def test_the_external_provider_is_told_each_turn_and_each_built_in_write(tmp_path: Path, model_server: ModelServer) -> None:
    kit = kit_with(tmp_path, model_server, MemoryOptions(provider="recording"), "memory")
    try:
        model_server.script([call("memory", action="add", target="memory", content="The repo uses tabs."), TextReply(content="done")], session="r")
        probe = kit.subscribe("r")
        kit.start_turn("r", "note that the repo uses tabs")
        assert until(probe, TurnCompleted)[-1].text == "done"
        told = [TOLD.get(timeout=DEADLINE) for _ in range(3)]
        assert told[0] == ("turn_start", "r", "test-model", "api", "4")  # read_file, write_file, terminal, memory
        assert set(told[1:]) == {("memory_write", "add", "memory", "The repo uses tabs."), ("sync_turn", "r", "note that the repo uses tabs", "done")}
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_an_unknown_provider_name_is_refused_saying_which_are_known(tmp_path: Path) -> None:
    from actors import UsageError
    from actors.memory import check_provider

    check_provider("")
    check_provider("store")
    with pytest.raises(UsageError, match=r"unknown memory provider 'honcho' \(known: .*store.*\); remove memory.provider"):
        check_provider("honcho")
    with pytest.raises(UsageError, match="'builtin' is the built-in memory's name"):
        register_provider("builtin", RecordingProvider)


def test_the_external_provider_is_told_what_a_delegated_child_answered(tmp_path: Path, model_server: ModelServer) -> None:
    kit = kit_with(tmp_path, model_server, MemoryOptions(provider="recording"), "delegate_task")
    try:
        model_server.script([call("delegate_task", tasks=[{"goal": "find the port"}]), TextReply(content="It is 8080.")], session="p")
        model_server.script([TextReply(content="port 8080")], session="p.child-1")
        probe = kit.subscribe("p")
        kit.start_turn("p", "which port?")
        assert until(probe, TurnCompleted)[-1].text == "It is 8080."
        told: list[tuple[str, ...]] = []
        while ("sync_turn", "p", "which port?", "It is 8080.") not in told:
            told.append(TOLD.get(timeout=DEADLINE))
        assert ("delegation", "find the port", "port 8080") in told
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)
