"""Every hardline command of the corpus, sent by a model through a real ``hermes serve``, never runs.

Once with approvals on and every approval request answered ``once``, once with approvals off
(``--yolo``). The server's ``bash`` is a stand-in that records each script it is handed in a
sentinel file instead of running it, so a command that got past the checker would show up
there (and nothing destructive can happen on this machine if one did). One ordinary command
is sent along as a control: it must reach the sentinel, which proves the sentinel works.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from tests.conftest import DEADLINE
from tests.platforms.server_kit import SSE
from tests.tools.danger_corpus import CWD, HARDLINE, HOME

KEY = "hk-hardline-0123456789abcdef"
CONTROL = "echo control-ran"
RECORD = "\n--- end of script ---\n"


def stand_in_bash(bin_dir: Path, sentinel: Path) -> None:
    bin_dir.mkdir()
    script = bin_dir / "bash"
    script.write_text(f"#!/bin/sh\n# records the script it was given; runs nothing\nprintf '%s\\n--- end of script ---\\n' \"$2\" >> '{sentinel}'\n")
    script.chmod(0o755)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Path]]:
    home = tmp_path / "u"
    (home / "project").mkdir(parents=True)
    hermes = home / ".hermes"
    hermes.mkdir()
    sentinel = tmp_path / "sentinel"
    stand_in_bash(tmp_path / "bin", sentinel)
    yield {"home": home, "cwd": home / "project", "hermes": hermes, "sentinel": sentinel, "bin": tmp_path / "bin"}


def localise(command: str, home: Path) -> str:
    """The corpus's command with its example home replaced by this test's real one."""
    return command.replace(HOME, str(home))


def serve(world: dict[str, Path], model: ModelServer, *extra: str) -> tuple[subprocess.Popen[str], str, str]:
    """(the process, its base URL, what it printed at start)."""
    (world["hermes"] / "config.yaml").write_text(f"model:\n  default: test-model\n  base_url: {model.base_url}\n  api_key: upstream\n")
    (world["hermes"] / ".env").write_text(f"API_SERVER_KEY={KEY}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HERMES_MODEL", "HERMES_YOLO_MODE")}
    env.update(HOME=str(world["home"]), HERMES_HOME=str(world["hermes"]), PATH=f"{world['bin']}{os.pathsep}{env.get('PATH', '')}")
    process = subprocess.Popen(
        [sys.executable, "-m", "actors.cli", "serve", "--port", "0", *extra],
        cwd=world["cwd"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    banner = [process.stdout.readline()]
    found = re.search(r"listening on (http://\S+)/v1", banner[0])
    assert found, banner[0] + (process.stderr.read() if process.poll() is not None and process.stderr else "")
    while not banner[-1].startswith("Try:"):  # the start-up lines end with the curl hint
        banner.append(process.stdout.readline())
    return process, found.group(1), "".join(banner)


def stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(DEADLINE)


def run_every_hardline_command(world: dict[str, Path], model: ModelServer, base_url: str, session: str) -> tuple[list[str], int]:
    """(tool results in call order, approval requests answered) of one run calling every case."""
    commands = [localise(c, world["home"]) for c, _ in HARDLINE] + [CONTROL]
    calls = tuple(ScriptedCall(name="terminal", arguments=json.dumps({"command": c}), id=f"call_{i}") for i, c in enumerate(commands))
    model.script([ToolCallsReply(calls=calls), TextReply(content="done")], session=session)
    answered = 0
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {KEY}"}, timeout=DEADLINE) as http:
        run_id = http.post("/v1/runs", json={"input": "clean up", "session_id": session}).json()["run_id"]
        with http.stream("GET", f"/v1/runs/{run_id}/events") as response:
            stream = SSE(response)
            while True:
                event = stream.next()
                if event.get("event") == "approval.request":
                    assert http.post(f"/v1/runs/{run_id}/approval", json={"choice": "once"}).status_code == 200
                    answered += 1
                if event.get("event") in ("run.completed", "run.failed", "run.cancelled"):
                    assert event["event"] == "run.completed", event
                    break
        stored = http.get(f"/v1/sessions/{session}/messages").json()["data"]
    results = {m["tool_call_id"]: m["content"] for m in stored if m["role"] == "tool"}
    return [results[f"call_{i}"] for i in range(len(commands))], answered


@pytest.mark.parametrize("mode", ["approvals answered once", "approvals off"])
def test_no_hardline_command_runs_through_hermes_serve(world: dict[str, Path], model_server: ModelServer, mode: str) -> None:
    assert str(world["cwd"]).endswith(CWD.removeprefix(HOME))
    process, base_url, banner = serve(world, model_server, *(["--yolo"] if mode == "approvals off" else []))
    try:
        results, answered = run_every_hardline_command(world, model_server, base_url, session=f"hardline-{mode.split()[1]}")
    finally:
        stop(process)
    assert ("approvals are off (--yolo)" in banner) is (mode == "approvals off")
    assert answered == 0, "a hardline command must be refused outright, never put to a person"
    refused = [(c, r) for (c, _), r in zip(HARDLINE, results, strict=False) if not r.startswith("[blocked]")]
    assert refused == [], f"{len(refused)} hardline commands were not blocked: {refused[:5]}"
    records = world["sentinel"].read_text().split(RECORD)[:-1] if world["sentinel"].exists() else []
    assert len(records) == 1 and records[0].endswith(CONTROL), records  # only the control ever reached a shell
    assert not results[-1].startswith(("[blocked]", "[denied]")), results[-1]
