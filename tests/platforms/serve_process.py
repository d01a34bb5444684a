"""``hermes serve`` as a real subprocess on a free port, for tests that talk to it over HTTP."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import DEADLINE

HERMES = [sys.executable, "-m", "actors.cli"]
CLEARED = ("API_SERVER_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "HERMES_MODEL", "OPENROUTER_API_KEY")
"""Variables of the test's own environment that would leak into the served home's settings."""


@contextlib.contextmanager
def launched(home: Path, *options: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Start ``hermes serve --port 0 [options]`` on ``home``; yield the process and its base URL. On leaving,
    a process still running is killed with its group and reaped; one the test stopped, the
    test has reaped."""
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env["HERMES_HOME"] = str(home)
    process = subprocess.Popen(
        [*HERMES, "serve", "--port", "0", *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        found = re.search(r"listening on (http://\S+)/v1", first)
        assert found, first + (process.stderr.read() if process.poll() is not None and process.stderr else "")
        yield process, found.group(1)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate(timeout=DEADLINE)
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


@contextlib.contextmanager
def serving(home: Path) -> Iterator[str]:
    """Start ``hermes serve --port 0`` on ``home``; yield its base URL; on leaving, SIGTERM it and
    check it stopped cleanly (exit 0, no traceback), killing its group if it did not."""
    with launched(home) as (process, url):
        yield url
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=DEADLINE)
        assert process.returncode == 0 and "Traceback" not in stderr, stderr
