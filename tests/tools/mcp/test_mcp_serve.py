"""MCP servers through ``hermes serve`` (a real process): a stdio server, a streamable HTTP one and one
that never starts, a chat completion whose model calls their tools, /health/detailed, ``hermes mcp``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from tests.conftest import DEADLINE
from tests.platforms.serve_process import HERMES, launched
from tests.tools.mcp.kit import DEMO, http_demo

KEY = "hk-mcp-test-0123456789abcdef"
PREFIX = ": hermes.tool.progress "


def _home(tmp_path: Path, model: ModelServer, web_url: str) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text(f"API_SERVER_KEY={KEY}\n")
    (home / "config.yaml").write_text(
        f"""model:
  default: test-model
  base_url: {model.base_url}
  api_key: upstream-key
mcp_servers:
  demo:
    command: {sys.executable}
    args: [{DEMO}, stdio]
    tools:
      exclude: [die, hang]
  web:
    url: {web_url}
    headers:
      X-Demo: "yes"
  broken:
    command: {sys.executable}
    args: [{DEMO}, fail]
  unused:
    command: /nonexistent
    enabled: false
"""
    )
    return home


def test_serve_offers_mcp_tools_runs_them_in_a_chat_completion_and_reports_the_servers(tmp_path: Path, model_server: ModelServer) -> None:
    with http_demo() as web_url:
        home = _home(tmp_path, model_server, web_url)
        with launched(home) as (process, url):
            assert process.stdout is not None
            lines = [process.stdout.readline() for _ in range(3)]
            said = "".join(lines)
            assert "MCP server demo: 12 tools" in said and "mcp_demo_add" in said and "mcp_demo_die" not in said
            assert "MCP server web: 14 tools" in said
            assert "MCP server broken: failed: the server exited with status 3; its stderr: demo: cannot start: DEMO_TOKEN is not set; retrying" in said
            calls = (ScriptedCall(name="mcp_demo_add", arguments='{"a": 40, "b": 2}'), ScriptedCall(name="mcp_web_add", arguments='{"a": 3, "b": 4}'))
            model_server.script([ToolCallsReply(calls=calls), TextReply(content="42 and 7")], session="mcp-serve")
            headers = {"Authorization": f"Bearer {KEY}", "X-Hermes-Session-Id": "mcp-serve"}
            body = {"model": "hermes-agent", "messages": [{"role": "user", "content": "add"}]}
            with httpx.Client(base_url=url, headers=headers, timeout=DEADLINE) as http:
                reply = http.post("/v1/chat/completions", json=body).json()
                assert reply["choices"][0]["message"]["content"] == "42 and 7"
                health = http.get("/health/detailed").json()
                count = (ScriptedCall(name="mcp_demo_count", arguments='{"n": 2}'),)
                model_server.script([ToolCallsReply(calls=count), TextReply(content="counted")], session="mcp-progress")
                streamed = {**body, "stream": True}
                progress_headers = {"X-Hermes-Session-Id": "mcp-progress", "X-Hermes-Tool-Progress": "true"}
                with http.stream("POST", "/v1/chat/completions", json=streamed, headers=progress_headers) as response:
                    comments = [json.loads(line.removeprefix(PREFIX)) for line in response.iter_lines() if line.startswith(PREFIX)]
            assert [(c["status"], c.get("progress"), c.get("message")) for c in comments] == [
                ("started", None, None),
                ("progress", 1, "step 1"),
                ("progress", 2, "step 2"),
                ("completed", None, None),
            ]
            second = [r for r in model_server.requests if r.session == "mcp-serve"][1]
            assert [m["content"] for m in second.body["messages"] if m["role"] == "tool"] == ["42", "7"]
            offered = {t["function"]["name"] for t in second.body["tools"]}
            assert {"mcp_demo_add", "mcp_web_count", "read_file"} <= offered and "mcp_demo_hang" not in offered
            servers = {s["name"]: s for s in health["mcp"]}
            assert servers.keys() == {"demo", "web", "broken"}
            assert servers["demo"]["state"] == "ready" and servers["web"]["transport"] == "http" and servers["broken"]["state"] == "failed"
            assert "DEMO_TOKEN" in servers["broken"]["error"] and servers["broken"]["tools"] == []
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=DEADLINE)
            assert process.returncode == 0 and "Traceback" not in stderr, stderr
        listed = subprocess.run([*HERMES, "mcp", "list", "--home", str(home)], capture_output=True, text=True, timeout=DEADLINE)
        assert listed.returncode == 0 and "web" in listed.stdout and "unused               stdio disabled /nonexistent" in listed.stdout
        tested = subprocess.run([*HERMES, "mcp", "test", "web", "--home", str(home)], capture_output=True, text=True, timeout=DEADLINE)
        assert tested.returncode == 0 and "MCP server web is up (demo" in tested.stdout and "mcp_web_add" in tested.stdout and "read-only" in tested.stdout
    failed = subprocess.run([*HERMES, "mcp", "test", "broken", "--home", str(home)], capture_output=True, text=True, timeout=DEADLINE)
    assert failed.returncode == 1 and "MCP server broken failed: the server exited with status 3" in failed.stdout and "Traceback" not in failed.stderr


def test_hermes_chat_starts_the_mcp_servers_and_its_model_calls_their_tools(tmp_path: Path, model_server: ModelServer) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(
        f"model:\n  default: test-model\n  base_url: {model_server.base_url}\n  api_key: k\n"
        f"mcp_servers:\n  demo:\n    command: {sys.executable}\n    args: [{DEMO}, stdio]\n"
    )
    model_server.script([ToolCallsReply(calls=(ScriptedCall(name="mcp_demo_add", arguments='{"a": 1, "b": 2}'),)), TextReply(content="three")])
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL")} | {"HERMES_HOME": str(home)}
    out = subprocess.run([*HERMES, "chat", "-q", "add"], env=env, capture_output=True, text=True, timeout=DEADLINE * 3, stdin=subprocess.DEVNULL)
    assert out.returncode == 0 and out.stdout == "three\n", out.stderr
    [_, second] = model_server.requests
    assert second.body["messages"][-1]["content"] == "3"
