"""Crash recovery of the real server: kill -9 `hermes serve` mid-turn, start it again."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from tests.conftest import DEADLINE
from tests.platforms.server_kit import SSE
from tests.processes import live_processes_with, open_fifo, wait_for_line

HERMES = [sys.executable, "-m", "actors.cli", "serve", "--port", "0"]


def start(home: Path) -> tuple[subprocess.Popen[str], str, list[str]]:
    """Start ``hermes serve``; return it, its URL, and what it printed before it listened."""
    env = {k: v for k, v in os.environ.items() if k not in ("API_SERVER_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "HERMES_MODEL")}
    env["HERMES_HOME"] = str(home)
    process = subprocess.Popen(HERMES, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    assert process.stdout is not None
    before: list[str] = []
    for line in process.stdout:
        found = re.search(r"listening on (http://\S+)/v1", line)
        if found:
            return process, found.group(1), before
        before.append(line)
    raise AssertionError(f"hermes serve did not start: {before}")


def test_kill_9_mid_turn_then_restart_loses_nothing_acknowledged_and_settles_the_turn(tmp_path: Path, model_server: ModelServer) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(f"model:\n  default: test-model\n  base_url: {model_server.base_url}\n  api_key: upstream\n")
    (home / ".env").write_text("API_SERVER_KEY=hk-crash-test-key-0123456789\n")
    headers = {"Authorization": "Bearer hk-crash-test-key-0123456789"}
    marker = f"70.{os.getpid()}1"
    started = open_fifo(str(tmp_path / "started"))
    # The command says it runs only once its group is on record ($$ leads its own group): the
    # server writes the record just after the spawn, and a loaded machine can run the command
    # first (a SIGKILL in that window leaves an orphan no successor knows of; ARCHITECTURE.md).
    ledger = home / "run" / "groups"
    command = f"until [ -e {ledger}/$$ ]; do :; done; echo up > {tmp_path / 'started'} && sleep {marker}"
    model_server.script([ToolCallsReply(calls=(ScriptedCall(name="terminal", arguments=json.dumps({"command": command})),))], session="crashy")
    first, url, _ = start(home)
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=DEADLINE) as http:
            run = http.post("/v1/runs", json={"input": "run the slow thing", "session_id": "crashy"})
            assert run.status_code == 202
            run_id = run.json()["run_id"]
            with http.stream("GET", f"/v1/runs/{run_id}/events") as response:
                stream = SSE(response)
                while stream.next().get("event") != "tool.started":
                    pass
        wait_for_line(started, DEADLINE)  # the command runs, and its group is on record
    finally:
        os.close(started)
        os.killpg(first.pid, signal.SIGKILL)  # no cleanup at all
        first.communicate(timeout=DEADLINE)
    # The tool's process group is its own session: it outlives the killed server...
    orphans = live_processes_with(f"sleep {marker}")
    assert orphans
    exits = [os.pidfd_open(pid) for pid in orphans]
    second, url, printed = start(home)
    try:
        # ...and the next server, finding its record in HERMES_HOME/run/groups, kills it first.
        for fd in exits:
            assert select.select([fd], [], [], DEADLINE)[0], "the restarted server did not reap the orphaned command"
            os.close(fd)
        exits = []
        with httpx.Client(base_url=url, headers=headers, timeout=DEADLINE) as http:
            # Settled before the server admitted any request: the first reads after /health
            # already show it (no waiting, no session needed to run first).
            assert http.get("/health").status_code == 200
            settled = http.get("/v1/sessions/crashy/messages").json()["data"]
            status = http.get(f"/v1/runs/{run_id}").json()
            with http.stream("GET", "/v1/sessions/crashy/events", params={"after": 0}) as response:
                stream = SSE(response)
                seen = [stream.next() for _ in range(2)]
        assert [m["role"] for m in settled] == ["user", "assistant", "tool"]
        calls = [c["id"] for m in settled for c in m.get("tool_calls") or ()]
        results = [m["tool_call_id"] for m in settled if m["role"] == "tool"]
        assert sorted(calls) == sorted(results) and len(set(results)) == len(results)  # every call, exactly one result
        assert "outcome is unknown" in settled[2]["content"]
        assert status["status"] == "failed" and "interrupted" in (status["error"] or ""), status
        assert [e.get("event") for e in seen] == ["SessionRecovered", "TurnFailed"], seen
        assert json.loads(seen[1]["data"])["kind"] == "interrupted"
        model_server.script([TextReply(content="back again")], session="crashy")
        with httpx.Client(base_url=url, headers=headers, timeout=DEADLINE) as http:
            chat = http.post(
                "/v1/chat/completions", json={"messages": [{"role": "user", "content": "are you there?"}]}, headers={"X-Hermes-Session-Id": "crashy"}
            )
            assert chat.status_code == 200 and chat.json()["choices"][0]["message"]["content"] == "back again"
            messages = http.get("/v1/sessions/crashy/messages").json()["data"]
        roles = [m["role"] for m in messages]
        assert roles == ["user", "assistant", "tool", "user", "assistant"], roles
        assert messages[0]["content"] == "run the slow thing"  # acknowledged, so kept
        assert messages[2]["content"] == settled[2]["content"]  # settled once, never re-run
        assert messages[1]["tool_calls"][0]["id"] == messages[2]["tool_call_id"]
    finally:
        second.send_signal(signal.SIGTERM)
        second.communicate(timeout=DEADLINE)
        for fd in exits:
            os.close(fd)
        for pid in live_processes_with(f"sleep {marker}"):  # only if the reaping failed
            os.kill(pid, signal.SIGKILL)
    assert second.returncode == 0
    assert len(printed) == 1 and "stopped 1 command(s) a killed hermes had left running: bash -c" in printed[0] and marker in printed[0]
    assert not list((home / "run" / "groups").iterdir())  # the records went with the groups
