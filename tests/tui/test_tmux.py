"""Smoke tests in a real terminal: tmux runs ``hermes chat`` / ``hermes attach`` and the test types
into it and reads the screen, as a person would.

The commands run as ``python -m actors.cli chat`` once the ``hermes`` parser has the TUI's
subcommands, and as ``python -m actors.platforms.tui chat`` until then. Each test uses its
own tmux server (``-L``), so nothing else running tmux is touched. The barrier is the
screen: the pane is polled until the expected text is drawn, with a deadline.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from tests.conftest import DEADLINE
from tests.platforms.server_kit import KEY, ServerKit
from tests.tui.tui_kit import hermes_module

ROOT = Path(__file__).resolve().parents[2]
TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed: the terminal smoke tests need it")


class Tmux:
    """One command in a private tmux server, 120x32."""

    def __init__(self, workdir: Path) -> None:
        self.socket = f"hermes-test-{time.monotonic_ns()}"
        self.exit_file = workdir / "exit-status"

    def _run(self, *args: str) -> str:
        assert TMUX is not None
        return subprocess.run([TMUX, "-L", self.socket, *args], capture_output=True, text=True, timeout=DEADLINE).stdout

    def start(self, argv: list[str], env: dict[str, str]) -> None:
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        command = f"cd {shlex.quote(str(ROOT))} && env {exports} {shlex.join(argv)}; echo $? > {shlex.quote(str(self.exit_file))}"
        self._run("new-session", "-d", "-s", "main", "-x", "120", "-y", "32", command)

    def screen(self) -> str:
        return self._run("capture-pane", "-p", "-t", "main")

    def wait_for(self, text: str, timeout: float = DEADLINE) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} did not appear within {timeout} s; the screen:\n{screen}")
            time.sleep(0.02)  # polling the terminal: the screen is the only signal a person has

    def type(self, text: str) -> None:
        self._run("send-keys", "-t", "main", "-l", text)

    def keys(self, *keys: str) -> None:
        self._run("send-keys", "-t", "main", *keys)

    def wait_exit(self, timeout: float = DEADLINE) -> int:
        deadline = time.monotonic() + timeout
        while not self.exit_file.exists() or not self.exit_file.read_text().strip():
            if time.monotonic() > deadline:
                raise AssertionError(f"the command did not exit within {timeout} s; the screen:\n{self.screen()}")
            time.sleep(0.02)
        return int(self.exit_file.read_text())

    def close(self) -> None:
        self._run("kill-server")


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    terminal = Tmux(tmp_path)
    try:
        yield terminal
    finally:
        terminal.close()


def model_env(home: Path, server: ModelServer) -> dict[str, str]:
    return {"HERMES_HOME": str(home), "HERMES_MODEL": "test-model", "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key", "TERM": "xterm-256color"}


def test_hermes_chat_in_a_terminal_answers_a_question_cancels_a_long_tool_and_quits(tmux: Tmux, tmp_path: Path, model_server: ModelServer) -> None:
    model_server.script(
        [
            TextReply(content="The answer is **42**."),
            ToolCallsReply(content="Starting it.", calls=(ScriptedCall(name="terminal", arguments='{"command": "sleep 30"}'),)),
        ]
    )
    tmux.start([sys.executable, "-m", hermes_module(), "chat"], model_env(tmp_path / "home", model_server))
    tmux.wait_for("Ask anything")
    tmux.type("what is six times seven")
    tmux.keys("Enter")
    tmux.wait_for("The answer is 42.")
    tmux.type("now run something slow")
    tmux.keys("Enter")
    tmux.wait_for("sleep 30")
    tmux.keys("Escape")
    tmux.wait_for("■ cancelled:")
    tmux.wait_for("■ terminal  sleep 30")  # the tool's line ends cancelled too (it may be drawn a frame after the notice)
    tmux.wait_for(" idle ")
    tmux.keys("C-c")
    tmux.wait_for("Press Ctrl+C again to quit")
    tmux.keys("C-c")
    assert tmux.wait_exit() == 0


def test_hermes_attach_follows_a_turn_an_api_client_started_and_cancels_the_next(tmux: Tmux, api: ServerKit) -> None:
    api.model.script(
        [TextReply(content="Hello from the server."), ToolCallsReply(calls=(ScriptedCall(name="read_file", arguments='{"path": "huge.log", "seconds": 30}'),))],
        session="shared",
    )
    home = api.store_file.parent / "attach-home"
    tmux.start(
        [sys.executable, "-m", hermes_module(), "attach", "--url", api.base_url, "--key", KEY, "shared"], {"HERMES_HOME": str(home), "TERM": "xterm-256color"}
    )
    tmux.wait_for(" idle ")
    with api.http() as http:
        assert http.post("/v1/sessions/shared/turns", json={"text": "say hello"}).status_code == 202
        tmux.wait_for("Hello from the server.")
        assert "› say hello" in tmux.screen()
        assert http.post("/v1/sessions/shared/turns", json={"text": "read the huge log"}).status_code == 202
    tmux.wait_for("huge.log")
    tmux.keys("Escape")
    tmux.wait_for("■ cancelled:")
    tmux.keys("C-c", "C-c")
    assert tmux.wait_exit() == 0
