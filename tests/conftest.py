"""Test zoo: small actors with known behaviour, and a runtime fixture that always cleans up.

Synchronisation is by barriers with deadlines (a probe queue's ``get(timeout=...)``,
``Address.ask``, ``threading.Event.wait(timeout)``), never by sleeping.
"""

from __future__ import annotations

import compileall
import logging
import os
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from actors import Actor
from supervisor import ChildSpec, Runtime

# Property tests share a 2-core machine with other work: slowness is not a failure.
settings.register_profile("shared-machine", suppress_health_check=[HealthCheck.too_slow], deadline=None)
settings.load_profile("shared-machine")

MAX_WORKERS = 4
"""``-n auto`` (pyproject's addopts) runs this many pytest-xdist workers at most, one per core:
each worker starts its own session-wide servers (Postgres, Synapse), so more would cost more
than they save."""


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_WORKERS, cores))


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the project once, before any worker starts: the hundreds of subprocesses the
    tests start (``hermes serve``, the CLI, chaos children) then import it from bytecode instead
    of compiling every module again, which they do where nothing writes bytecode (a clean clone,
    ``PYTHONDONTWRITEBYTECODE`` set, as on CI)."""
    if hasattr(session.config, "workerinput"):  # an xdist worker: its controller compiled
        return
    root = Path(__file__).resolve().parent.parent
    for name in ("actors", "protocols", "tests"):
        compileall.compile_dir(root / name, quiet=2)
    compileall.compile_file(root / "supervisor.py", quiet=2)


DEADLINE = 10.0
"""Seconds any barrier in the tests waits before the test fails (instead of hanging)."""


class Probe:
    """A thread-safe inbox the test reads with a deadline."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Any] = queue.Queue()

    def put(self, item: Any) -> None:
        self._queue.put(item)

    tell = put  # a probe can stand where an address is expected

    def get(self, timeout: float = DEADLINE) -> Any:
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            msg = f"nothing arrived at the probe within {timeout} s"
            raise AssertionError(msg) from None

    def get_matching(self, predicate: Callable[[Any], bool], timeout: float = DEADLINE) -> Any:
        while True:
            item = self.get(timeout)
            if predicate(item):
                return item

    def drain(self) -> list[Any]:
        items = []
        while True:
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                return items


class EchoActor(Actor):
    """Answers each message with itself and copies it to ``probe``.

    "crash" raises RuntimeError, "exit" raises SystemExit, "stop" stops normally.
    ``journal`` (a list) records ("start", path, incarnation) and ("stop", path).
    """

    def __init__(self, probe: Probe | None = None, journal: list[Any] | None = None) -> None:
        super().__init__()
        self.probe = probe
        self.journal = journal

    def started(self) -> None:
        if self.journal is not None and self.context is not None:
            self.journal.append(("start", self.path, self.context.incarnation))

    def receive(self, message: Any) -> Any:
        if self.probe is not None:
            self.probe.put(message)
        if message == "crash":
            raise RuntimeError("asked to crash")
        if message == "exit":
            raise SystemExit(3)
        if message == "stop":
            self.stop()
        if message == "incarnation":
            return self.context.incarnation if self.context else 0
        return message

    def stopping(self) -> None:
        if self.journal is not None:
            self.journal.append(("stop", self.path))


class CrashingActor(EchoActor):
    """Fails in ``started()`` while ``failures`` (a shared list used as a counter) is non-empty."""

    def __init__(self, failures: list[str], probe: Probe | None = None) -> None:
        super().__init__(probe)
        self.failures = failures

    def started(self) -> None:
        if self.failures:
            raise ValueError(self.failures.pop())


class SlowActor(EchoActor):
    """On "block", blocks its own thread until ``release`` is set (a stuck handler)."""

    def __init__(self, release: threading.Event, probe: Probe | None = None) -> None:
        super().__init__(probe)
        self.release = release

    def receive(self, message: Any) -> Any:
        if message == "block":
            if self.probe is not None:
                self.probe.put("blocked")
            self.release.wait(DEADLINE)
            return "released"
        if message == "block_then_crash":
            if self.probe is not None:
                self.probe.put("blocked")
            self.release.wait(DEADLINE)
            raise RuntimeError("crashed after being released")
        return super().receive(message)


@pytest.fixture
def probe() -> Probe:
    return Probe()


@pytest.fixture
def start_runtime() -> Iterator[Callable[..., Runtime]]:
    """Start a runtime for the test; it is stopped (and its threads checked) afterwards."""
    before = set(threading.enumerate())
    started: list[Runtime] = []

    def start(children: Sequence[ChildSpec] = (), **options: Any) -> Runtime:
        runtime = Runtime(children, **options).start()
        started.append(runtime)
        return runtime

    yield start
    for runtime in started:
        if runtime.wait(0):
            runtime.stop(timeout=DEADLINE)  # ended already (the test stopped it): reactor cleanup only
        else:
            assert runtime.stop(timeout=DEADLINE), "the runtime did not stop within the deadline"
    # Actor threads end just after they report their exit; give them the deadline to finish.
    # trio keeps idle worker threads cached for a while (it waits for child processes in
    # one): they are daemon threads owned by trio, not by the runtime.
    ours = [t for t in set(threading.enumerate()) - before if not t.name.startswith("Trio thread")]
    for thread in ours:
        thread.join(DEADLINE)
    leftover = [t for t in ours if t.is_alive()]
    assert not leftover, f"threads left behind: {leftover}"


@pytest.fixture(autouse=True)
def _quiet_intentional_crashes(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL + 1, logger="actors")
    caplog.set_level(logging.CRITICAL + 1, logger="supervisor")


from tests.model_fixtures import model_server as model_server  # noqa: E402 - a shared fixture
