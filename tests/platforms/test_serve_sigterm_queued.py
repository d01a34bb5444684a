"""SIGTERM of ``hermes serve`` while a turn runs a tool past the drain deadline and another waits
behind it in the same session: both end (neither hangs the stop, neither starts later), the tool's process group is
gone, every tool call has exactly one result, and a restarted server shows both runs ended."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import httpx

from actors.chaos import ModelServer, ScriptedCall, ToolCallsReply
from tests.conftest import DEADLINE
from tests.platforms.serve_process import launched, serving
from tests.platforms.server_kit import SSE
from tests.processes import live_processes_with, open_fifo, wait_for_line

KEY = "hk-sigterm-test-key-0123456789"
HEADERS = {"Authorization": f"Bearer {KEY}"}
ENDED = ("completed", "failed", "cancelled")


def test_sigterm_with_a_turn_queued_behind_a_running_tool_ends_both_and_reaps_the_tool(tmp_path: Path, model_server: ModelServer) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(f"model:\n  default: test-model\n  base_url: {model_server.base_url}\n  api_key: upstream\n")
    (home / ".env").write_text(f"API_SERVER_KEY={KEY}\n")
    marker = f"80.{os.getpid()}3"
    started = open_fifo(str(tmp_path / "started"))
    command = f"echo up > {tmp_path / 'started'} && sleep {marker}"
    model_server.script([ToolCallsReply(calls=(ScriptedCall(name="terminal", arguments=json.dumps({"command": command})),))], session="busy")
    try:
        with launched(home, "--drain-timeout", "1") as (process, url), httpx.Client(base_url=url, headers=HEADERS, timeout=DEADLINE) as http:
            first = http.post("/v1/runs", json={"input": "run the slow thing", "session_id": "busy"})
            assert first.status_code == 202, first.text
            first_id = first.json()["run_id"]
            with http.stream("GET", f"/v1/runs/{first_id}/events") as response:
                stream = SSE(response)
                while stream.next().get("event") != "tool.started":
                    pass
            wait_for_line(started, DEADLINE)  # the tool's command runs
            second = http.post("/v1/runs", json={"input": "and then this", "session_id": "busy"})
            assert second.status_code == 202, second.text
            second_id = second.json()["run_id"]
            assert http.get(f"/v1/runs/{second_id}").json()["status"] == "queued"
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=DEADLINE)
            assert process.returncode == 0 and "Traceback" not in stderr, stderr
        assert live_processes_with(f"sleep {marker}") == [], "the running tool's process outlived the stopped server"
    finally:
        os.close(started)
        for pid in live_processes_with(f"sleep {marker}"):  # only if the reaping failed
            os.kill(pid, signal.SIGKILL)
    with serving(home) as url, httpx.Client(base_url=url, headers=HEADERS, timeout=DEADLINE) as http:
        runs = {run_id: http.get(f"/v1/runs/{run_id}").json() for run_id in (first_id, second_id)}
        messages = http.get("/v1/sessions/busy/messages").json()["data"]
    for run_id, run in runs.items():
        assert run["status"] in ENDED and run["status"] != "completed", (run_id, run)
    calls = [c["id"] for m in messages for c in m.get("tool_calls") or ()]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert calls and sorted(calls) == sorted(results), messages  # every call, exactly one result
    assert [m["content"] for m in messages if m["role"] == "user"] == ["run the slow thing"], messages  # the queued turn never started


def test_sigterm_while_a_run_waits_for_an_approval_never_runs_the_command_and_the_late_answer_is_refused(tmp_path: Path, model_server: ModelServer) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(f"model:\n  default: test-model\n  base_url: {model_server.base_url}\n  api_key: upstream\n")
    (home / ".env").write_text(f"API_SERVER_KEY={KEY}\n")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("precious")
    model_server.script([ToolCallsReply(calls=(ScriptedCall(name="terminal", arguments=json.dumps({"command": f"rm -rf {victim}"})),))], session="asking")
    with launched(home, "--drain-timeout", "1") as (process, url), httpx.Client(base_url=url, headers=HEADERS, timeout=DEADLINE) as http:
        run_id = http.post("/v1/runs", json={"input": "clean up", "session_id": "asking"}).json()["run_id"]
        with http.stream("GET", f"/v1/runs/{run_id}/events") as response:
            stream = SSE(response)
            while stream.next().get("event") != "approval.request":
                pass
        assert http.get(f"/v1/runs/{run_id}").json()["status"] == "waiting_for_approval"
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=DEADLINE)
        assert process.returncode == 0 and "Traceback" not in stderr, stderr
    with serving(home) as url, httpx.Client(base_url=url, headers=HEADERS, timeout=DEADLINE) as http:
        run = http.get(f"/v1/runs/{run_id}").json()
        late = http.post(f"/v1/runs/{run_id}/approval", json={"choice": "once"})
        messages = http.get("/v1/sessions/asking/messages").json()["data"]
    assert run["status"] in ENDED and run["status"] != "completed", run
    assert late.status_code in (404, 409) and late.json()["error"]["message"], late.text  # a late answer never runs anything
    calls = [c["id"] for m in messages for c in m.get("tool_calls") or ()]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert calls and sorted(calls) == sorted(results), messages
    assert (victim / "keep").read_text() == "precious"  # never run: not approved
