"""Reloading config.yaml while running (issue 16: "SIGHUP (and /reload) re-reads it where that is
safe"): the plan of what applies, and a real ``hermes serve`` taking SIGHUP between two turns."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
from pathlib import Path

import httpx

from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.config import HermesConfig, parse_config
from actors.config._reload import reload_plan
from tests.conftest import DEADLINE
from tests.platforms.serve_process import launched

KEY = "sk-hermes-test-key"


def config(text: str) -> HermesConfig:
    return parse_config(text, file=Path("config.yaml"), dotenv=Path(".env"), env={}, dotenv_values={}).config


def test_the_plan_applies_what_sessions_read_and_names_what_needs_a_restart() -> None:
    old = config("model: {default: a}\napprovals: {timeout: 30}\napi_server: {port: 8000}\n")
    assert reload_plan(old, old).lines("config.yaml") == ["config.yaml reloaded: nothing changed"]
    new = config("model: {default: b}\napprovals: {timeout: 60, deny: ['rm *']}\nagent: {max_turns: 5}\napi_server: {port: 9000}\n")
    plan = reload_plan(old, new)
    assert plan.applied == ("approvals", "agent")
    assert plan.restart == ("model", "api_server")
    assert plan.lines("config.yaml") == [
        "config.yaml reloaded: approvals, agent apply to every session from its next turn (one running commands in the background: once it ends)",
        "config.yaml: model, api_server changed, and take effect only after a restart (not applied)",
    ]


def test_the_memory_provider_is_held_by_an_actor_and_waits_for_a_restart_while_the_memory_limits_apply() -> None:
    old = config("memory: {memory_char_limit: 2000}\n")
    only_provider = reload_plan(old, config("memory: {memory_char_limit: 2000, provider: store}\n"))
    assert (only_provider.applied, only_provider.restart) == ((), ("memory.provider",))
    both = reload_plan(old, config("memory: {memory_char_limit: 3000, provider: store, prefetch_timeout: 2}\n"))
    assert (both.applied, both.restart) == (("memory",), ("memory.provider", "memory.prefetch_timeout"))
    limits = reload_plan(old, config("memory: {memory_char_limit: 3000}\n"))
    assert (limits.applied, limits.restart) == (("memory",), ())


class Lines:
    """A process's stdout, line by line, each wait with a deadline."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        assert process.stdout is not None
        stream = process.stdout
        threading.Thread(target=lambda: [self.lines.put(line) for line in stream], daemon=True).start()

    def next_with(self, text: str) -> str:
        while True:
            line = self.lines.get(timeout=DEADLINE)
            if text in line:
                return line


def base_config(url: str, toolsets: str) -> str:
    return f'model:\n  default: test-model\n  base_url: "{url}"\n  api_key: sk-test\nplatform_toolsets:\n  api_server: [{toolsets}]\napi_server:\n  port: 0\n'


def test_sighup_gives_sessions_the_new_toolsets_keeps_the_rest_and_a_bad_file_changes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    todo = ScriptedCall(name="todo", arguments=json.dumps({"todos": []}), id="call_1")
    with ModelServer(seed=4) as server:
        server.script([TextReply(content="one"), ToolCallsReply(calls=(todo,)), TextReply(content="two"), TextReply(content="three")], session="s")
        (home / "config.yaml").write_text(base_config(server.base_url, "todo"))
        (home / ".env").write_text(f"API_SERVER_KEY={KEY}\n")
        with launched(home) as (process, base), httpx.Client(base_url=base, headers={"authorization": f"Bearer {KEY}"}, timeout=DEADLINE) as http:
            out = Lines(process)

            def turn(text: str) -> str:
                ask = {"messages": [{"role": "user", "content": text}]}
                reply = http.post("/v1/chat/completions", json=ask, headers={"x-hermes-session-id": "s"})
                assert reply.status_code == 200, reply.text
                return str(reply.json()["choices"][0]["message"]["content"])

            assert turn("first") == "one"
            (home / "config.yaml").write_text(base_config(server.base_url, "todo, terminal") + "timezone: Europe/Paris\n")
            process.send_signal(signal.SIGHUP)
            assert "platform_toolsets apply to every session" in out.next_with("reloaded")
            assert "timezone changed, and take effect only after a restart" in out.next_with("restart")
            assert turn("second") == "two"  # the same session, started again with the new tools
            (home / "config.yaml").write_text("model: [not, a, mapping\n")
            process.send_signal(signal.SIGHUP)
            assert "the running settings stay" in out.next_with("not reloaded")
            assert turn("third") == "three"
            process.send_signal(signal.SIGTERM)
            assert process.wait(DEADLINE) == 0
        calls = [r.body for r in server.requests if r.path == "/v1/chat/completions"]
    offered = [sorted(t["function"]["name"] for t in body.get("tools") or ()) for body in calls]
    assert offered == [["todo"], ["process", "terminal", "todo"], ["process", "terminal", "todo"], ["process", "terminal", "todo"]]
    second = calls[1]["messages"]
    assert [m["content"] for m in second if m["role"] == "user"] == ["first", "second"]  # the transcript came back from the store


def test_a_reload_keeps_the_mcp_servers_tools_over_the_new_built_in_ones(tmp_path: Path) -> None:
    from actors.agent import HubRegistry, ModelClients, ModelSettings, SessionDeps, reader_opener
    from actors.platforms._reload import merged
    from actors.tools import REGISTRY
    from actors.tools.mcp import McpCatalog
    from actors.tools.mcp._catalog import LiveTools

    catalog = McpCatalog([])
    old_tools = LiveTools(REGISTRY.specs(["todo"]), catalog)
    model = ModelSettings(model="m", base_url="http://127.0.0.1:9/v1", api_key="k")
    old = SessionDeps(hubs=HubRegistry(), open_reader=reader_opener(tmp_path / "s.db"), model=model, clients=ModelClients(), tools=old_tools)
    fresh = SessionDeps(hubs=HubRegistry(), open_reader=old.open_reader, model=model, clients=ModelClients(), tools=REGISTRY.specs(["todo", "read_file"]))
    new = merged(old, fresh)
    assert isinstance(new.tools, LiveTools) and new.tools.version == catalog.version  # the same servers, read live
    assert sorted(new.tools) == ["read_file", "todo"] and sorted(new.config.traits) == ["read_file", "todo"]
    assert new.hubs is old.hubs and new.clients is old.clients
