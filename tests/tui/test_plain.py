"""Plain mode: ``hermes chat -q`` prints the answer and exits with a status that says how the turn ended."""

from __future__ import annotations

import asyncio
import io
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from actors.chaos import HttpError, ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.platforms.tui import LocalSession, run_plain
from tests.conftest import DEADLINE
from tests.tui.tui_kit import hermes_module

ROOT = Path(__file__).resolve().parents[2]
CHAT = [sys.executable, "-m", hermes_module(), "chat"]


def hermes_env(home: Path, server: ModelServer | None) -> dict[str, str]:
    """A clean environment: HERMES_HOME in the test's directory and, with a server, a model on it."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "SYSTEMROOT")}
    env["HERMES_HOME"] = str(home)
    if server is not None:
        env |= {"HERMES_MODEL": "test-model", "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key"}
    return env


def chat(args: list[str], env: dict[str, str], **options: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CHAT, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=DEADLINE * 3, stdin=subprocess.DEVNULL, **options)  # type: ignore[call-overload, no-any-return]


def test_chat_q_prints_the_answer_and_exits_0(tmp_path: Path, model_server: ModelServer) -> None:
    model_server.script([TextReply(content="The answer is 42.")])
    out = chat(["-q", "what is six times seven?"], hermes_env(tmp_path, model_server))
    assert out.returncode == 0, out.stderr
    assert out.stdout == "The answer is 42.\n"
    assert "Traceback" not in out.stderr


def test_chat_q_exits_1_when_the_turn_fails(tmp_path: Path, model_server: ModelServer) -> None:
    model_server.script([HttpError(status=401, message="invalid api key")])
    out = chat(["-q", "hello"], hermes_env(tmp_path, model_server))
    assert out.returncode == 1
    assert "the turn failed" in out.stderr
    assert out.stdout == ""


def test_chat_q_exits_2_with_advice_when_no_model_is_configured(tmp_path: Path) -> None:
    out = chat(["-q", "hello"], hermes_env(tmp_path, None))
    assert out.returncode == 2
    assert "no model is configured" in out.stderr
    assert "Traceback" not in out.stderr


def test_plain_mode_reads_one_question_per_line_of_stdin(tmp_path: Path, model_server: ModelServer) -> None:
    model_server.script([TextReply(content="one"), TextReply(content="two")])
    out = subprocess.run(
        [*CHAT, "--plain"], env=hermes_env(tmp_path, model_server), cwd=ROOT, input="first\nsecond\n", capture_output=True, text=True, timeout=DEADLINE * 3
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "one\ntwo\n"


def test_ctrl_c_during_a_long_tool_cancels_the_turn_and_exits_130(tmp_path: Path, model_server: ModelServer) -> None:
    model_server.script([ToolCallsReply(calls=(ScriptedCall(name="terminal", arguments='{"command": "sleep 30"}'),))])
    process = subprocess.Popen(
        [*CHAT, "-q", "wait a while"],
        env=hermes_env(tmp_path, model_server),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + DEADLINE * 3
        seen = ""
        while "[terminal] sleep 30" not in seen:  # the barrier: the tool runs
            ready, _, _ = select.select([process.stderr], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"the tool did not start; stderr so far: {seen!r}"
            line = process.stderr.readline()
            assert line, f"hermes chat ended early; stderr: {seen!r}"
            seen += line
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        _stdout, stderr = process.communicate(timeout=DEADLINE)
        took = time.monotonic() - started
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(DEADLINE)
    assert process.returncode == 130, seen + stderr
    assert "the turn was cancelled" in stderr
    assert took < 25, "the cancel waited for the tool instead of stopping it"


def test_plain_mode_denies_approvals_when_nobody_can_answer(local: LocalSession, model_server: ModelServer, tmp_path: Path) -> None:
    model_server.script([ToolCallsReply(calls=(ScriptedCall(name="guarded", arguments="{}"),)), TextReply(content="I was not allowed.")])
    out, err = io.StringIO(), io.StringIO()
    status = asyncio.run(run_plain(local, "sess_plain", ["do the dangerous thing"], out=out, err=err, ask=None))
    assert status == 0
    assert out.getvalue() == "I was not allowed.\n"
    assert "denied 'touch marker' (test danger): nobody can approve it here" in err.getvalue()
    assert not (tmp_path / "marker").exists()


def test_plain_mode_asks_for_approval_on_the_terminal_when_there_is_one(local: LocalSession, model_server: ModelServer, tmp_path: Path) -> None:
    model_server.script([ToolCallsReply(calls=(ScriptedCall(name="guarded", arguments="{}"),)), TextReply(content="Done.")])
    out, err = io.StringIO(), io.StringIO()

    def answer() -> asyncio.Future[str]:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        future.set_result("o\n")
        return future

    status = asyncio.run(run_plain(local, "sess_plain", ["do the dangerous thing"], out=out, err=err, ask=answer))
    assert status == 0
    assert "The agent asks to run: touch marker" in err.getvalue()
    assert (tmp_path / "marker").read_text() == "ran"
