"""``hermes setup`` as a new user meets it: driven through a pseudo-terminal, the test model server
posing as a local server on a port setup probes; the config it writes starts ``hermes serve``
and a chat completion answers (issue 16)."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import yaml

from actors.agent._config import read_dotenv
from actors.chaos import HttpError, ModelServer
from actors.platforms._setup import LOCAL_SERVERS
from tests.conftest import DEADLINE
from tests.platforms.serve_process import CLEARED, serving


def free_probed_port() -> int:
    """A port setup probes that nothing on this machine listens on."""
    for _, port in reversed(LOCAL_SERVERS):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("every port hermes setup probes (11434, 8080, 8000, 1234) is taken on this machine")


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env["HERMES_HOME"] = str(home)
    return env


class Terminal:
    """A child process on a pseudo-terminal: read until a text appears, type a line."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
        os.close(slave)
        self.seen = ""

    def expect(self, text: str) -> str:
        deadline = time.monotonic() + DEADLINE
        while text not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"{text!r} never appeared; the terminal shows:\n{self.seen}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # the child closed the terminal
                    chunk = b""
                assert chunk, f"the program ended before {text!r}; it showed:\n{self.seen}"
                self.seen += chunk.decode(errors="replace").replace("\r\n", "\n")
        return self.seen

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def end_of_input(self) -> None:
        os.write(self.master, b"\x04")

    def wait(self) -> int:
        code = self.process.wait(DEADLINE)
        with contextlib.suppress(OSError):  # what it wrote last; EIO once the terminal is drained
            while chunk := os.read(self.master, 4096):
                self.seen += chunk.decode(errors="replace").replace("\r\n", "\n")
        return code

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(DEADLINE)
        os.close(self.master)


@contextlib.contextmanager
def terminal(home: Path) -> Iterator[Terminal]:
    shell = Terminal([sys.executable, "-m", "actors.cli", "setup"], environment(home))
    try:
        yield shell
    finally:
        shell.close()


def test_setup_finds_the_local_server_checks_it_saves_it_keeping_comments_and_hermes_serve_answers(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("# my settings\napi_server:\n  port: 9999   # keep this port\n")
    with ModelServer(seed=1, model="local-llama", port=free_probed_port()) as server:
        with terminal(home) as shell:
            shown = shell.expect("Choose [1]: ")
            assert f"at {server.base_url} (models: local-llama)" in shown
            shell.type("")
            shell.expect("Model [1]: ")
            shell.type("1")
            shell.expect("Next: 'hermes serve'")
            assert shell.wait() == 0, shell.seen
            assert "it answered." in shell.seen
        check = [r for r in server.requests if r.path == "/v1/chat/completions"]
        assert len(check) == 1 and check[0].body["model"] == "local-llama", "one real call checked the choice"
        written = (home / "config.yaml").read_text()
        assert "# my settings" in written and "# keep this port" in written, "the user's comments stay"
        settings = yaml.safe_load(written)
        assert settings["model"] == {"default": "local-llama", "provider": "custom", "base_url": server.base_url, "api_key": "no-key-required"}
        assert settings["api_server"]["port"] == 9999
        with serving(home) as base:
            key = read_dotenv(home / ".env")["API_SERVER_KEY"]
            reply = httpx.post(
                f"{base}/v1/chat/completions",
                json={"messages": [{"role": "user", "content": "hello"}]},
                headers={"authorization": f"Bearer {key}"},
                timeout=DEADLINE,
            )
        assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"]


def test_setup_with_a_provider_key_saves_it_in_env_only_and_a_refused_key_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with ModelServer(seed=2) as server:
        server.fail_key("sk-bad-0123456789", HttpError.invalid_api_key("sk-bad-0123456789"))
        argv = [
            sys.executable,
            "-m",
            "actors.cli",
            "setup",
            "--non-interactive",
            "--provider",
            "custom",
            "--base-url",
            server.base_url,
            "--model",
            "test-model",
        ]
        refused = subprocess.run([*argv, "--api-key", "sk-bad-0123456789"], env=environment(home), capture_output=True, text=True, timeout=DEADLINE)
        assert refused.returncode == 1 and "the key was refused (401)" in refused.stdout and "nothing was written" in refused.stdout
        assert not home.exists() or not any(home.iterdir())
        good = subprocess.run([*argv, "--api-key", "sk-good-0123456789"], env=environment(home), capture_output=True, text=True, timeout=DEADLINE)
    assert good.returncode == 0, good.stdout + good.stderr
    assert read_dotenv(home / ".env") == {"OPENAI_API_KEY": "sk-good-0123456789"}
    assert (home / ".env").stat().st_mode & 0o777 == 0o600
    assert "sk-good" not in (home / "config.yaml").read_text(), "keys never go to config.yaml"
    missing = subprocess.run([*argv[:-4]], env=environment(tmp_path / "other"), capture_output=True, text=True, timeout=DEADLINE)
    assert missing.returncode == 2 and "--provider custom needs --base-url and --model" in missing.stdout


def test_ending_the_input_at_a_prompt_cancels_and_writes_nothing_and_serve_without_a_model_points_to_setup(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with terminal(home) as shell:
        shell.expect("Choose [")
        shell.end_of_input()
        assert shell.wait() == 130
        assert "setup cancelled; nothing was written" in shell.seen
    assert not (home / "config.yaml").exists()
    home.mkdir(exist_ok=True)
    served = subprocess.run(
        [sys.executable, "-m", "actors.cli", "serve", "--port", "0"], env=environment(home), capture_output=True, text=True, timeout=DEADLINE
    )
    assert served.returncode == 2 and "run 'hermes setup'" in served.stdout
