"""MCP servers in a real runtime: real FastMCP servers (stdio subprocesses and streamable HTTP),
real sessions, the test model server calling their tools."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.chaos import ModelServer, TextReply
from actors.config import McpSampling, McpServer, McpToolFilter
from protocols import ToolFinished, ToolProgress, ToolStarted, TurnCancelled, TurnCompleted
from tests.conftest import DEADLINE
from tests.tools.mcp.kit import DEMO, McpKit, http_demo, start_mcp_kit, stdio_server, until_end


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpKit]:
    """One runtime and one demo server for the tests that leave it working (a server start costs ~1 s of CPU)."""
    model_server = ModelServer(seed=0).start()
    kit = start_mcp_kit(tmp_path_factory.mktemp("mcp"), model_server, {"demo": stdio_server(timeout=5.0)})
    try:
        kit.ready("demo")
        yield kit
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)
        model_server.stop()


def finished(events: list[object]) -> list[ToolFinished]:
    return [e for e in events if isinstance(e, ToolFinished)]


def test_a_stdio_servers_tool_is_offered_with_its_schema_and_called_by_the_model(kit: McpKit) -> None:
    status = kit.catalog.entry("demo").status()
    assert status["state"] == "ready" and "mcp_demo_add" in status["tools"] and status["server"].startswith("demo")
    events = kit.turn("s-add", [("mcp_demo_add", {"a": 2, "b": 40})], answer="It is 42.")
    [result] = finished(events)
    assert result.ok and result.preview == "42" and isinstance(events[-1], TurnCompleted) and events[-1].text == "It is 42."
    first, second = [r for r in kit.model.requests if r.session == "s-add"]
    offered = {t["function"]["name"]: t["function"] for t in first.body["tools"]}
    assert offered["mcp_demo_add"]["parameters"]["properties"].keys() == {"a", "b"}
    assert offered["mcp_demo_add"]["description"].startswith("[MCP server demo] Add two numbers")
    answer = second.body["messages"][-1]
    assert answer["role"] == "tool" and answer["content"] == "42" and answer["tool_call_id"] == second.body["messages"][-2]["tool_calls"][0]["id"]
    assert kit.catalog.tools()["mcp_demo_add"].traits.read_only and not kit.catalog.tools()["mcp_demo_count"].traits.read_only


def test_progress_notifications_become_tool_progress_events_in_order(kit: McpKit) -> None:
    events = kit.turn("s-count", [("mcp_demo_count", {"n": 3})])
    progress = [e for e in events if isinstance(e, ToolProgress)]
    assert [(p.progress, p.total, p.message, p.name) for p in progress] == [(i, 3.0, f"step {i}", "mcp_demo_count") for i in (1, 2, 3)]
    started = next(e for e in events if isinstance(e, ToolStarted))
    assert {p.call_id for p in progress} == {started.call_id}
    assert finished(events)[0].preview == "counted to 3"


def test_cancelling_the_turn_ends_the_call_at_once_and_tells_the_server(kit: McpKit) -> None:
    probe = kit.start("s-cancel", [("mcp_demo_wait_cancel", {})])
    probe.get_matching(lambda e: isinstance(e, ToolProgress))  # the server is running the call
    kit.cancel("s-cancel")
    events = until_end(probe)
    assert isinstance(events[-1], TurnCancelled)
    # The server saw notifications/cancelled: its cancelled tool answers once the call was cancelled.
    events = kit.turn("s-after", [("mcp_demo_cancelled", {})])
    assert finished(events)[0].preview == "it was cancelled"


def test_a_tools_list_changed_notification_offers_the_new_tool_to_the_next_model_call(kit: McpKit) -> None:
    assert "mcp_demo_extra" not in kit.catalog.tools()
    events = kit.turn("s-grow", [("mcp_demo_grow", {})])
    assert finished(events)[0].preview == "grown"
    assert kit.catalog.wait_for(lambda c: "mcp_demo_extra" in c.tools(), DEADLINE)
    events = kit.turn("s-extra", [("mcp_demo_extra", {})])
    assert finished(events)[0].preview == "extra ran"
    request = next(r for r in kit.model.requests if r.session == "s-extra")
    assert "mcp_demo_extra" in {t["function"]["name"] for t in request.body["tools"]}


def test_resources_and_prompts_are_offered_as_read_only_tools(kit: McpKit) -> None:
    calls = [
        ("mcp_demo_list_resources", {}),
        ("mcp_demo_read_resource", {"uri": "demo://greeting"}),
        ("mcp_demo_list_prompts", {}),
        ("mcp_demo_get_prompt", {"name": "review", "arguments": {"code": "x = 1"}}),
    ]
    results = [f.preview for f in finished(kit.turn("s-resources", calls))]
    assert sorted(results) == sorted(
        [
            "demo://greeting — greeting: A friendly greeting.",
            "hello from a resource",
            "review(code): Ask for a review of some code.",
            "user: Please review: x = 1",
        ]
    )
    assert all(kit.catalog.tools()[name].traits.read_only for name, _ in calls)


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def test_a_server_killed_mid_call_answers_restarting_and_comes_back(kit: McpKit) -> None:
    events = kit.turn("s-die", [("mcp_demo_die", {})])
    [result] = finished(events)
    assert not result.ok and result.preview.startswith("[error] MCP server demo is restarting (the server exited with status -9")
    kit.ready("demo", restarts=1)
    assert finished(kit.turn("s-back", [("mcp_demo_add", {"a": 1, "b": 1})]))[0].preview == "2"


def test_a_result_is_checked_against_the_tools_output_schema_in_bounded_time(kit: McpKit) -> None:
    """The SDK's own check (``session.call_tool``) runs the schema's patterns in ``re``, holding
    the GIL: a server's ``(a|aa)+$`` against 60 a's and a '!' would freeze the whole runtime."""
    assert kit.catalog.entry("demo").state.tools and any(t.output_schema for t in kit.catalog.entry("demo").state.tools if t.name == "echo_a")
    events = kit.turn(
        "s-echo", [("mcp_demo_echo_a", {"n": 3, "bang": False}), ("mcp_demo_echo_a", {"n": 3, "bang": True}), ("mcp_demo_echo_a", {"n": 30, "bang": True})]
    )
    kept, refused, slow = finished(events)
    assert kept.ok and kept.preview == "aaa"
    assert not refused.ok and "the MCP tool echo_a returned structured content its own outputSchema refuses: 'aaa!' does not match" in refused.preview
    assert not slow.ok and "checking the pattern '(a|aa)+$' of the outputSchema of the MCP tool echo_a took longer than 0.25 s" in slow.preview
    assert isinstance(events[-1], TurnCompleted)


def test_a_hung_stdio_server_is_killed_with_its_group_and_restarted(tmp_path: Path, model_server: ModelServer) -> None:
    kit = start_mcp_kit(tmp_path, model_server, {"demo": stdio_server(timeout=0.5)})
    try:
        kit.ready("demo")
        events = kit.turn("s-hang", [("mcp_demo_pid", {}), ("mcp_demo_hang", {})])
        pid_result, hang_result = finished(events)
        assert not hang_result.ok and "mcp_demo_hang did not answer within 0.5 s" in hang_result.preview and "restarted" in hang_result.preview
        kit.ready("demo", restarts=1)
        assert not _pid_alive(int(pid_result.preview))  # the hung process was killed, not left behind
        pid = int(finished(kit.turn("s-alive", [("mcp_demo_pid", {})]))[0].preview)
        assert _pid_alive(pid) and os.getpgid(pid) == pid  # the new server, in its own process group
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)
    assert not _pid_alive(pid)  # stopping the runtime stopped it


def test_while_a_server_is_down_its_tools_answer_at_once_that_it_is_restarting(tmp_path: Path, model_server: ModelServer) -> None:
    blocker = tmp_path / "no-more-starts"
    kit = start_mcp_kit(tmp_path, model_server, {"demo": stdio_server(env={"DEMO_FAIL_IF_EXISTS": str(blocker)})})
    try:
        kit.ready("demo")
        blocker.write_text("")  # every restart now fails
        finished(kit.turn("s-die", [("mcp_demo_die", {})]))
        assert kit.catalog.wait_for(lambda c: c.entry("demo").state.restarts >= 1 and "DEMO_TOKEN" in c.entry("demo").state.error, DEADLINE)
        status = kit.catalog.entry("demo").status()
        assert status["state"] == "restarting" and "mcp_demo_add" in status["tools"]
        [result] = finished(kit.turn("s-down", [("mcp_demo_add", {"a": 1, "b": 2})]))
        assert not result.ok and result.preview.startswith("[error] MCP server demo is restarting")
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_a_server_that_never_starts_says_why_and_the_others_work(tmp_path: Path, model_server: ModelServer) -> None:
    servers = {
        "broken": McpServer(command=sys.executable, args=[DEMO, "fail"]),
        "missing": McpServer(command=str(tmp_path / "no-such-server")),
        "both": McpServer(command="x", url="http://127.0.0.1:1/mcp"),
        "silent": McpServer(command="sleep", args=["3600"], connect_timeout=0.5),
        "demo": stdio_server(),
    }
    kit = start_mcp_kit(tmp_path, model_server, servers)
    try:
        kit.ready("demo")
        broken, missing, both = kit.settled("broken"), kit.settled("missing"), kit.settled("both")
        assert broken["state"] == "failed" and "status 3" in broken["error"] and "DEMO_TOKEN is not set" in broken["error"] and broken["tools"] == []
        assert missing["state"] == "failed" and "not found" in missing["error"]
        assert both["state"] == "invalid" and "not both" in both["error"]
        silent = kit.settled("silent")
        assert silent["state"] == "failed" and silent["error"] == "no answer to initialize and tools/list within connect_timeout (0.5 s)"
        assert not any(name.startswith(("mcp_broken_", "mcp_missing_")) for name in kit.catalog.tools())
        assert finished(kit.turn("s-ok", [("mcp_demo_add", {"a": 5, "b": 5})]))[0].preview == "10"
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_sampling_is_answered_by_the_model_only_for_a_server_whose_config_allows_it(kit: McpKit, tmp_path: Path, model_server: ModelServer) -> None:
    [refused] = finished(kit.turn("s-refused", [("mcp_demo_ask", {"question": "Capital of Spain?"})]))  # demo: sampling not enabled
    assert refused.preview.startswith("sampling refused")
    asking = start_mcp_kit(tmp_path, model_server, {"asks": stdio_server(sampling=McpSampling(enabled=True, model="sampler", max_tokens_cap=100))})
    try:
        asking.ready("asks")
        model_server.script([TextReply(content="Paris.")], model="sampler")
        [allowed] = finished(asking.turn("s-sample", [("mcp_asks_ask", {"question": "Capital of France?"})]))
        assert allowed.preview == "the model (sampler) said: Paris."
        [request] = [r for r in model_server.requests if r.body and r.body.get("model") == "sampler"]
        assert request.body["max_tokens"] == 100 and request.body["stream"] is False
        assert request.body["messages"] == [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Capital of France?"}]
    finally:
        assert asking.runtime.stop(timeout=DEADLINE)


def test_a_streamable_http_server_serves_calls_and_progress(tmp_path: Path, model_server: ModelServer) -> None:
    with http_demo() as url:
        kit = start_mcp_kit(tmp_path, model_server, {"web": McpServer(url=url, tools=McpToolFilter(exclude=["hang", "die"]))})
        try:
            status = kit.ready("web")
            assert status["transport"] == "http" and "mcp_web_add" in status["tools"] and "mcp_web_hang" not in status["tools"]
            events = kit.turn("s-web", [("mcp_web_add", {"a": 20, "b": 22}), ("mcp_web_count", {"n": 2})])
            assert [f.preview for f in finished(events)] == ["42", "counted to 2"]
            assert [p.progress for p in events if isinstance(p, ToolProgress)] == [1, 2]
        finally:
            assert kit.runtime.stop(timeout=DEADLINE)
