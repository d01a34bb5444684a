"""``hermes serve``, ``hermes chat`` and ``hermes doctor`` say once which keys of config.yaml have
no effect: unknown ones with a did-you-mean, Hermes's that this build ignores."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from actors.chaos import ModelServer, TextReply
from tests.conftest import DEADLINE
from tests.platforms.serve_process import CLEARED

CONFIG = "compresion:\n  threshold: 0.4\ndisplay:\n  skin: default\ncompression:\n  target_ratio: 0.2\n"
TYPO = "unknown key 'compresion' (did you mean 'compression'?) is not used"
IGNORED = "ignored, not supported by this build: display, compression.target_ratio"


def environment(home: Path, server: ModelServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    return env | {"HERMES_HOME": str(home), "HERMES_MODEL": "test-model", "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key"}


def test_chat_says_once_on_stderr_which_keys_have_no_effect(tmp_path: Path, model_server: ModelServer) -> None:
    (tmp_path / "config.yaml").write_text(CONFIG)
    model_server.script([TextReply(content="hello")])
    done = subprocess.run(
        [sys.executable, "-m", "actors.cli", "chat", "-q", "hi"],
        env=environment(tmp_path, model_server),
        capture_output=True,
        text=True,
        timeout=DEADLINE * 3,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello\n"
    assert done.stderr.count(TYPO) == 1 and done.stderr.count(IGNORED) == 1, done.stderr


def test_chat_stops_with_the_loaders_error_before_anything_starts(tmp_path: Path, model_server: ModelServer) -> None:
    (tmp_path / "config.yaml").write_text("compression:\n  threshold: high\n")
    done = subprocess.run(
        [sys.executable, "-m", "actors.cli", "chat", "-q", "hi"],
        env=environment(tmp_path, model_server),
        capture_output=True,
        text=True,
        timeout=DEADLINE * 3,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "compression.threshold is 'high'" in done.stderr and "Traceback" not in done.stderr


def test_serve_says_once_on_stderr_which_keys_have_no_effect(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(CONFIG)
    with ModelServer(seed=3) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "actors.cli", "serve", "--port", "0"],
            env=environment(tmp_path, server),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            assert re.search(r"listening on http://\S+/v1", first), first
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=DEADLINE)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(DEADLINE)
            for pipe in (process.stdout, process.stderr):  # a failed test must not leak them into the next
                if pipe is not None:
                    pipe.close()
    assert process.returncode == 0, stderr
    assert stderr.count(TYPO) == 1 and stderr.count(IGNORED) == 1, stderr


def test_doctor_lists_the_keys_without_effect_as_a_warning(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(CONFIG + "model:\n  default: m\n  base_url: http://127.0.0.1:9/v1\n  api_key: k\n")
    env = {k: v for k, v in os.environ.items() if k not in CLEARED} | {"HERMES_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "actors.cli", "doctor", "--offline"], env=env, capture_output=True, text=True, timeout=DEADLINE)
    lines = done.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("[warn] config keys:"))
    assert TYPO in lines[at] and IGNORED in lines[at + 1]
    assert done.returncode == 0, done.stdout  # warnings do not fail
    (tmp_path / "config.yaml").write_text("model:\n  default: m\n  base_url: http://127.0.0.1:9/v1\n  api_key: k\n")
    clean = subprocess.run([sys.executable, "-m", "actors.cli", "doctor", "--offline"], env=env, capture_output=True, text=True, timeout=DEADLINE)
    assert "[ok  ] config keys: every key is known and used" in clean.stdout
