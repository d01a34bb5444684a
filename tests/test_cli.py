"""The ``hermes`` command, run as a real subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import DEADLINE

HERMES = [sys.executable, "-m", "actors.cli"]


def test_hermes_help_lists_the_commands() -> None:
    out = subprocess.run([*HERMES, "--help"], capture_output=True, text=True, timeout=DEADLINE, check=True)
    assert "usage: hermes" in out.stdout
    assert "run" in out.stdout


def test_hermes_without_a_command_prints_help_and_exits_2() -> None:
    out = subprocess.run(HERMES, capture_output=True, text=True, timeout=DEADLINE)
    assert out.returncode == 2
    assert "usage: hermes" in out.stdout


def test_hermes_run_rejects_a_negative_duration_with_a_clear_message() -> None:
    out = subprocess.run([*HERMES, "run", "--for", "-1"], capture_output=True, text=True, timeout=DEADLINE)
    assert out.returncode == 2
    assert "--for needs a number of seconds >= 0" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_hermes_run_stops_cleanly_on_a_signal(signum: signal.Signals) -> None:
    process = subprocess.Popen([*HERMES, "run"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # the barrier: the runtime is up
        assert "runtime up" in first
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(DEADLINE)
    assert process.returncode == 0, stderr
    assert "stopped cleanly" in stdout
    assert "Traceback" not in stderr


def test_hermes_run_for_a_duration_prints_the_tree_as_json() -> None:
    out = subprocess.run([*HERMES, "run", "--for", "0", "--json"], capture_output=True, text=True, timeout=DEADLINE)
    assert out.returncode == 0, out.stderr
    assert '"type":"TreeSnapshot"' in out.stdout.splitlines()[0]
