"""``hermes serve`` as a real process: first start, a chat completion, a clean stop."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import openai

from actors.chaos import ModelServer, TextReply
from tests.conftest import DEADLINE

HERMES = [sys.executable, "-m", "actors.cli"]


def test_first_start_makes_a_key_serves_a_chat_completion_and_stops_cleanly_on_sigterm(tmp_path: Path, model_server: ModelServer) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(f"model:\n  default: test-model\n  base_url: {model_server.base_url}\n  api_key: upstream-key\n")
    env = {k: v for k, v in os.environ.items() if k not in ("API_SERVER_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "HERMES_MODEL")}
    env["HERMES_HOME"] = str(home)
    process = subprocess.Popen([*HERMES, "serve", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        found = re.search(r"listening on (http://\S+/v1)", first)
        assert found, first
        url = found.group(1)
        assert "A new API key was made" in process.stdout.readline()
        key = process.stdout.readline().strip()
        assert (home / ".env").read_text().strip() == f"API_SERVER_KEY={key}"
        assert (home / ".env").stat().st_mode & 0o777 == 0o600
        assert httpx.get(url.removesuffix("/v1") + "/health", timeout=DEADLINE).json()["status"] == "ok"
        model_server.script([TextReply(content="served")])
        client = openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=DEADLINE)
        reply = client.chat.completions.create(model="hermes-agent", messages=[{"role": "user", "content": "hello"}])
        assert reply.choices[0].message.content == "served"
        client.close()
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(DEADLINE)
    assert process.returncode == 0, stderr
    assert "stopped cleanly" in stdout
    assert "Traceback" not in stderr


def test_serve_without_a_model_says_what_to_configure(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HERMES_MODEL", "OPENROUTER_API_KEY")}
    env["HERMES_HOME"] = str(tmp_path)
    out = subprocess.run([*HERMES, "serve", "--port", "0"], capture_output=True, text=True, env=env, timeout=DEADLINE)
    assert out.returncode == 2
    assert "no model is configured" in out.stdout and "config.yaml" in out.stdout
    assert "Traceback" not in out.stderr


def test_a_taken_port_is_one_line_and_exit_status_2_without_restarts_or_a_traceback(tmp_path: Path, model_server: ModelServer) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(f"model:\n  default: test-model\n  base_url: {model_server.base_url}\n  api_key: upstream-key\n")
    env = {k: v for k, v in os.environ.items() if k not in ("API_SERVER_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "HERMES_MODEL")}
    env["HERMES_HOME"] = str(home)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([*HERMES, "serve", "--port", str(port)], capture_output=True, text=True, env=env, timeout=DEADLINE)
    assert out.returncode == 2, out
    assert out.stderr.strip() == f"hermes serve: port {port} on 127.0.0.1 is already in use: stop the other server or pass --port / set api_server.port"
    assert "listening" not in out.stdout and "Traceback" not in out.stderr
