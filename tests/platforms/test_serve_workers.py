"""``hermes serve --workers N``: real worker processes on one port, sharing the home's SQLite store.

Each test starts the real command (``python -m actors.cli serve --workers 2 --port 0``) on a
temporary home and the test model server, reads its output as it comes, and talks HTTP to
the one port over fresh connections (each may reach either worker: ``SO_REUSEPORT``).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from actors.agent import ConfigError
from actors.chaos import ModelServer
from actors.config import load_config
from actors.platforms._worker_role import WORKER_ENV, worker_role
from actors.platforms._workers import configured_workers, describe_exit, restart_delay
from actors.store import StoreReader
from tests.conftest import DEADLINE
from tests.platforms.serve_process import CLEARED, HERMES

KEY = "sk-hermes-test-key"
AUTH = {"authorization": f"Bearer {KEY}"}
START = 120.0
"""Seconds two interpreters have to import and start on two shared cores."""


class Parent:
    """The running parent: its process, its URL, and its output lines as they come."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.seen: list[str] = []
        self.readers = [threading.Thread(target=self._read, args=(pipe,), daemon=True) for pipe in (process.stdout, process.stderr)]
        for reader in self.readers:
            reader.start()
        first = self.wait_for(r"listening on (http://\S+)/v1|could not start|is in use", START)
        found = re.search(r"listening on (http://\S+)/v1 \(2 workers, pids (\d+), (\d+)\)", first)
        assert found, "\n".join(self.seen)
        self.url = found.group(1)
        self.pids = [int(found.group(2)), int(found.group(3))]

    def _read(self, pipe: object) -> None:
        assert hasattr(pipe, "readline")
        for line in iter(pipe.readline, ""):
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, pattern: str, timeout: float = DEADLINE) -> str:
        """The next line matching ``pattern`` (earlier lines are kept in ``seen``)."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no line matching {pattern!r} within {timeout} s; output:\n" + "\n".join(self.seen)) from None
            self.seen.append(line)
            if re.search(pattern, line):
                return line


@contextlib.contextmanager
def workers_serving(home: Path, *extra: str) -> Iterator[Parent]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env["HERMES_HOME"] = str(home)
    argv = [*HERMES, "serve", "--port", "0", "--workers", "2", "--drain-timeout", "5", *extra]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    parent: Parent | None = None
    try:
        parent = Parent(process)
        yield parent
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=DEADLINE)
        for reader in parent.readers if parent is not None else ():
            reader.join(timeout=DEADLINE)  # the pipes end with the parent (its workers never held them)
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


def configured_home(tmp_path: Path, server: ModelServer, more: str = "") -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(f'model:\n  default: test-model\n  base_url: "{server.base_url}"\n  api_key: sk-test\n{more}')
    (home / ".env").write_text(f"API_SERVER_KEY={KEY}\n")
    return home


def node_ids_over_fresh_connections(url: str, want: int, attempts: int = 400) -> set[str]:
    """The node ids ``/health/detailed`` names, one new connection per request, until ``want`` are seen."""
    seen: set[str] = set()
    for _ in range(attempts):
        with httpx.Client(timeout=DEADLINE) as client:  # a new connection (a new source port) each time
            health = client.get(f"{url}/health/detailed", headers=AUTH).json()
        seen.add(health["cluster"]["node_id"])
        if len(seen) >= want:
            break
    return seen


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_two_workers_answer_on_one_port_keep_one_copy_of_each_message_and_survive_a_killed_worker(tmp_path: Path) -> None:
    with ModelServer(seed=3) as server:
        home = configured_home(tmp_path, server)
        with workers_serving(home) as parent:
            # Both workers answer on the one port, each a cluster node of its own.
            ids = node_ids_over_fresh_connections(parent.url, 2)
            assert len(ids) == 2 and all(re.fullmatch(r".+-w[01]", node) for node in ids), ids
            health = httpx.get(f"{parent.url}/health/detailed", headers=AUTH, timeout=DEADLINE).json()
            assert health["cluster"]["worker"] is True

            # One client on one keep-alive connection: its session stays with one worker.
            with httpx.Client(timeout=DEADLINE, headers={**AUTH, "x-hermes-session-id": "kept"}) as client:
                for n in range(3):
                    reply = client.post(f"{parent.url}/v1/chat/completions", json={"messages": [{"role": "user", "content": f"turn {n}"}]})
                    assert reply.status_code == 200, reply.text
                    assert reply.json()["choices"][0]["message"]["content"] == f"echo: turn {n}"

            # The same session over fresh connections (the kernel spreads them over both workers: a
            # 409 here before forwarding): its worker answers, and the other forwards the request to
            # it (the owner's own loopback port, signed); never a second agent in the session.
            answered: list[str] = []
            for n in range(12):
                with httpx.Client(timeout=DEADLINE, headers={**AUTH, "x-hermes-session-id": "kept"}) as client:
                    reply = client.post(f"{parent.url}/v1/chat/completions", json={"messages": [{"role": "user", "content": f"fresh {n}"}]})
                assert reply.status_code == 200, reply.text
                assert reply.json()["choices"][0]["message"]["content"] == f"echo: fresh {n}"
                answered.append(f"fresh {n}")

            # SIGKILL one worker: the parent says so, the port keeps answering, the worker comes back.
            killed = parent.pids[1]
            os.kill(killed, signal.SIGKILL)
            parent.wait_for(rf"worker w1 \(pid {killed}\) died \(killed by SIGKILL\) after [\d.]+ s; restarting it in 0.5 s")
            with httpx.Client(timeout=DEADLINE) as client:
                assert client.get(f"{parent.url}/health", headers=AUTH).status_code == 200
            restarted = int(re.findall(r"worker w1 restarted \(pid (\d+)\)", parent.wait_for(r"worker w1 restarted", START))[0])
            assert restarted != killed and gone(killed)
            assert len(node_ids_over_fresh_connections(parent.url, 2)) == 2

            # A second hermes serve on the same home is refused: it would answer beside the workers.
            env = {k: v for k, v in os.environ.items() if k not in CLEARED}
            second = subprocess.run([*HERMES, "serve", "--port", "0"], env={**env, "HERMES_HOME": str(home)}, capture_output=True, text=True, timeout=START)
            assert second.returncode == 2, second.stdout + second.stderr
            assert "is served by 'hermes serve --workers 2" in second.stderr and "Stop that server first" in second.stderr
            assert "Traceback" not in second.stderr

            # SIGTERM: every worker drains and stops, the parent exits 0, nothing is left.
            parent.process.send_signal(signal.SIGTERM)
            assert parent.process.wait(timeout=START) == 0, "\n".join(parent.seen)
            parent.wait_for(r"every worker stopped cleanly")
            assert all(gone(pid) for pid in (parent.pids[0], restarted))
        with StoreReader(home / "state.db") as reader:
            users = [m.content for m in reader.load_messages("kept") if m.role == "user"]
        assert users == ["turn 0", "turn 1", "turn 2", *answered]  # each answered message stored once


def test_workers_that_cannot_start_fail_the_command_with_the_workers_reason(tmp_path: Path) -> None:
    with ModelServer(seed=4) as server:
        home = configured_home(tmp_path, server, "platforms:\n  telegram:\n    enabled: true\n")
        env = {k: v for k, v in os.environ.items() if k not in CLEARED}
        argv = [*HERMES, "serve", "--port", "0", "--workers", "2"]
        done = subprocess.run(argv, env={**env, "HERMES_HOME": str(home)}, capture_output=True, text=True, timeout=START, start_new_session=True)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "worker w0" in done.stderr and "could not start (exit status 2)" in done.stderr
    assert "TELEGRAM_BOT_TOKEN" in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert "listening on" not in done.stdout


def test_restart_backoff_doubles_for_quick_deaths_up_to_its_cap() -> None:
    assert [restart_delay(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert restart_delay(20) == 30.0
    assert describe_exit(-signal.SIGKILL) == "killed by SIGKILL" and describe_exit(3) == "exit status 3"


def test_api_server_workers_in_config_yaml_is_read_and_a_bad_value_is_left_to_hermes_serve_to_explain(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("api_server:\n  workers: 3\n")
    assert configured_workers({}, tmp_path) == 3
    (tmp_path / "config.yaml").write_text("api_server:\n  workers: 0\n")
    assert configured_workers({}, tmp_path) == 1  # hermes serve itself then reports the invalid value
    with pytest.raises(ConfigError, match="workers"):
        load_config(tmp_path, {})


def test_a_worker_variable_hermes_serve_did_not_set_is_a_clear_configuration_error() -> None:
    assert worker_role({}) is None
    role = worker_role({WORKER_ENV: "1:2:7"})
    assert role is not None and (role.index, role.count, role.parent_fd, role.primary) == (1, 2, 7, False)
    with pytest.raises(ConfigError, match="is not <index>:<count>:<fd>.*unset it"):
        worker_role({WORKER_ENV: "yes"})
    with pytest.raises(ConfigError, match="index 2 is not below the count 2"):
        worker_role({WORKER_ENV: "2:2:7"})
