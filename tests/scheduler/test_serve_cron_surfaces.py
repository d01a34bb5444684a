"""The job surfaces of a real ``hermes serve``: the ``cronjob`` tool called by the model in a
session (create, list; the job remembers the session as its origin), ``hermes cron
list|add|pause|resume|remove`` as a subprocess against the running server, and the list the
TUI's ``/cron`` shows when attached to it."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.cli import main as cli_main
from actors.platforms.tui._remote import RemoteSession
from tests.conftest import DEADLINE
from tests.platforms.serve_process import CLEARED, HERMES, launched
from tests.platforms.server_kit import SSE

KEY = "hk-cron-surfaces-key-0123456789"
HEADERS = {"Authorization": f"Bearer {KEY}"}


def _run(http: httpx.Client, session: str, text: str) -> dict[str, Any]:
    run_id = http.post("/v1/runs", json={"input": text, "session_id": session}).json()["run_id"]
    with http.stream("GET", f"/v1/runs/{run_id}/events") as response:
        stream = SSE(response)
        while True:
            event = stream.next()
            if event.get("event") in ("run.completed", "run.failed"):
                data: dict[str, Any] = json.loads(event["data"])
                return data


async def _tui_jobs(url: str) -> list[str] | None:
    """What the TUI's ``/cron`` lists, attached to the server."""
    handle = RemoteSession(url, KEY)
    try:
        return await handle.jobs()
    finally:
        await handle.aclose()


def _cron(home: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``hermes cron`` as its own process (the first call: the real command line)."""
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env["HERMES_HOME"] = str(home)
    return subprocess.run([*HERMES, "cron", "--url", url, *args], capture_output=True, text=True, env=env, timeout=DEADLINE, check=False)


def _cli(home: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``hermes cron`` through the same entry point in this process (no interpreter start per call)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(["cron", "--home", str(home), "--url", url, *args])
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def test_the_cronjob_tool_and_hermes_cron_manage_the_jobs_of_a_running_server(
    tmp_path: Path, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("API_SERVER_KEY", raising=False)  # the in-process command reads the key from --home's .env
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(f"model:\n  default: test-model\n  base_url: {model_server.base_url}\n  api_key: upstream\n")
    (home / ".env").write_text(f"API_SERVER_KEY={KEY}\n")
    create = {
        "action": "create",
        "name": "plants",
        "prompt": "remind me to water the plants",
        "schedule": "0 8 * * *",
        "timezone": "Europe/Paris",
        "script": "weather.py",
    }
    model_server.script(
        [
            ToolCallsReply(calls=(ScriptedCall(name="cronjob", arguments=json.dumps(create)),)),
            TextReply(content="Scheduled."),
            ToolCallsReply(calls=(ScriptedCall(name="cronjob", arguments=json.dumps({"action": "list"})),)),
            TextReply(content="One job."),
            ToolCallsReply(calls=(ScriptedCall(name="cronjob", arguments=json.dumps({"action": "pause"})),)),
            TextReply(content="Which one?"),
        ],
        session="planner",
    )
    with launched(home) as (process, url), httpx.Client(base_url=url, headers=HEADERS, timeout=DEADLINE) as http:
        assert _run(http, "planner", "water the plants every morning at 8")["output"] == "Scheduled."
        jobs = http.get("/api/jobs").json()["jobs"]
        assert _run(http, "planner", "what is scheduled?")["output"] == "One job."
        assert _run(http, "planner", "pause it")["output"] == "Which one?"
        # hermes cron against the running server
        added = _cron(home, url, "add", "every 2h", "back up the notes", "--name", "backup", "--skills", "notes-backup,rsync", "--script", "du.sh")
        assert added.returncode == 0, added.stderr
        job_id = added.stdout.split()[0]
        as_added = http.get(f"/api/jobs/{job_id}").json()["job"]
        listed = _cli(home, url, "list")
        tui_lines = asyncio.run(_tui_jobs(url))
        paused = _cli(home, url, "pause", job_id)
        after_pause = http.get(f"/api/jobs/{job_id}").json()["job"]
        resumed = _cli(home, url, "resume", job_id)
        after_resume = http.get(f"/api/jobs/{job_id}").json()["job"]
        removed = _cli(home, url, "remove", job_id)
        gone = http.get(f"/api/jobs/{job_id}")
        missing = _cli(home, url, "pause", "nope")
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=DEADLINE)
    assert process.returncode == 0 and "Traceback" not in stderr, stderr
    down = _cli(home, url, "list")
    # the tool: the job is made with this session as its origin and delivers back to it
    assert len(jobs) == 1
    made = jobs[0]
    assert (made["name"], made["schedule"], made["timezone"], made["deliver"], made["origin"]) == ("plants", "0 8 * * *", "Europe/Paris", "origin", "planner")
    assert made["script"] == "weather.py" and as_added["script"] == "du.sh" and as_added["skills"] == ["notes-backup", "rsync"]
    assert made["state"] == "scheduled" and made["next_run_at"].endswith(("06:00:00+00:00", "07:00:00+00:00"))  # 08:00 in Paris
    results = [m for r in model_server.requests if r.session == "planner" for m in r.body.get("messages", []) if m.get("role") == "tool"]
    contents = [str(m["content"]) for m in results]
    assert any(c.startswith("Job created: ") and made["id"] in c for c in contents)
    assert any(made["id"] in c and "'plants'" in c and "scheduled" in c and not c.startswith("Job created") for c in contents)
    assert any("pause needs 'job_id'" in c for c in contents)
    # the command line
    assert job_id in listed.stdout and "backup" in listed.stdout and "plants" in listed.stdout
    assert tui_lines is not None and len(tui_lines) == 2 and any(line.startswith(f"{job_id}  backup  every 2h  scheduled") for line in tui_lines)
    assert paused.returncode == 0 and "paused" in paused.stdout and after_pause["state"] == "paused" and not after_pause["enabled"]
    assert resumed.returncode == 0 and after_resume["state"] == "scheduled" and after_resume["next_run_at"]
    assert removed.returncode == 0 and removed.stdout.strip() == f"removed {job_id}" and gone.status_code == 404
    assert missing.returncode == 1 and "no job 'nope'" in missing.stderr and "Traceback" not in missing.stderr
    assert down.returncode == 1 and "no server answered" in down.stderr
