"""The reactor: waits owned by actors, outcomes as messages, cancellation, subprocess groups."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel

from actors import UsageError, WaitHandle
from protocols import ProcessResult, WaitFinished
from supervisor import ChildSpec, Runtime
from tests.conftest import DEADLINE, EchoActor, Probe
from tests.processes import live_processes_with, open_fifo, wait_for_line

StartRuntime = Callable[..., Runtime]


class Waiter(EchoActor):
    """Starts waits on command; every message (outcomes included) is copied to the probe."""

    def receive(self, message: Any) -> Any:
        match message:
            case ("wait", fn, args, timeout):
                return self.start_wait(fn, *args, tag="test", timeout=timeout)
            case ("process", argv, timeout):
                return self.run_process(argv, tag="proc", timeout=timeout, grace=0.5)
            case ("cancel", WaitHandle() as handle):
                self.cancel_wait(handle)
                return None
            case ("after", delay, payload):
                return self.send_after(delay, payload)
            case _:
                return super().receive(message)


def waiter(start_runtime: StartRuntime, probe: Probe) -> Any:
    runtime = start_runtime([ChildSpec(id="waiter", actor=Waiter, args=(probe,))])
    return runtime, runtime.lookup("/waiter")


def outcome(probe: Probe, handle: WaitHandle | None = None) -> WaitFinished:
    return probe.get_matching(lambda m: isinstance(m, WaitFinished) and (handle is None or m.wait_id == handle.wait_id))


async def answer(value: Any) -> Any:
    await trio.lowlevel.checkpoint()
    return value


async def fail() -> None:
    await trio.lowlevel.checkpoint()
    raise ValueError("the wait failed")


def test_a_wait_returns_its_value_to_the_owner_as_a_message(start_runtime: StartRuntime, probe: Probe) -> None:
    _, address = waiter(start_runtime, probe)
    handle = address.ask(("wait", answer, (42,), 5.0), timeout=DEADLINE)
    finished = outcome(probe, handle)
    assert (finished.status, finished.value, finished.tag) == ("ok", 42, "test")


def test_a_failing_wait_reports_the_exception_and_the_reactor_goes_on(start_runtime: StartRuntime, probe: Probe) -> None:
    _, address = waiter(start_runtime, probe)
    failed = outcome(probe, address.ask(("wait", fail, (), 5.0), timeout=DEADLINE))
    assert failed.status == "error"
    assert isinstance(failed.value, ValueError)
    assert failed.error == "ValueError: the wait failed"
    assert outcome(probe, address.ask(("wait", answer, ("next",), 5.0), timeout=DEADLINE)).value == "next"


def test_a_wait_past_its_deadline_reports_timeout(start_runtime: StartRuntime, probe: Probe) -> None:
    _, address = waiter(start_runtime, probe)
    finished = outcome(probe, address.ask(("wait", trio.sleep, (30,), 0.05), timeout=DEADLINE))
    assert finished.status == "timeout"
    assert "0.05 s" in finished.error


def test_cancelling_a_wait_reports_cancelled_to_the_owner(start_runtime: StartRuntime, probe: Probe) -> None:
    _, address = waiter(start_runtime, probe)
    handle = address.ask(("wait", trio.sleep, (30,), 60.0), timeout=DEADLINE)
    address.tell(("cancel", handle))
    assert outcome(probe, handle).status == "cancelled"


def test_a_wait_without_a_positive_deadline_is_refused(start_runtime: StartRuntime, probe: Probe) -> None:
    _, address = waiter(start_runtime, probe)
    with pytest.raises(Exception, match="timeout must be positive"):
        address.ask(("wait", trio.sleep, (1,), 0), timeout=DEADLINE)
    # The refusal crashed the handler (it raised UsageError); the actor was restarted.
    assert address.ask("incarnation", timeout=DEADLINE) == 2


def test_the_death_of_an_owner_cancels_its_waits(start_runtime: StartRuntime, probe: Probe) -> None:
    _, address = waiter(start_runtime, probe)
    cancelled = threading.Event()

    async def watched() -> None:
        try:
            await trio.sleep(30)
        except trio.Cancelled:
            cancelled.set()
            raise

    first = address.ask(("wait", watched, (), 60.0), timeout=DEADLINE)
    address.tell("crash")
    assert cancelled.wait(DEADLINE)
    second = address.ask(("wait", answer, ("fresh",), 5.0), timeout=DEADLINE)
    seen = []
    while not seen or seen[-1].wait_id != second.wait_id:
        seen.append(outcome(probe))
    assert first.wait_id not in [m.wait_id for m in seen], "a dead owner's outcome reached its successor"


def test_send_after_delivers_the_message_and_a_cancelled_timer_stays_silent(start_runtime: StartRuntime, probe: Probe) -> None:
    _, address = waiter(start_runtime, probe)
    silent = address.ask(("after", 0.05, "never"), timeout=DEADLINE)
    address.tell(("cancel", silent))
    address.ask(("after", 0.1, "ring"), timeout=DEADLINE)
    arrived = probe.get_matching(lambda m: m in ("ring", "never"))
    assert arrived == "ring"


def test_cancelling_a_subprocess_wait_kills_its_whole_process_group(start_runtime: StartRuntime, probe: Probe, tmp_path: Path) -> None:
    _, address = waiter(start_runtime, probe)
    fifo = open_fifo(str(tmp_path / "ready"))
    marker = f"30.{os.getpid()}1"
    try:
        argv = ["bash", "-c", f"echo started > {tmp_path / 'ready'}; sleep {marker}; echo done"]
        handle = address.ask(("process", argv, 60.0), timeout=DEADLINE)
        assert wait_for_line(fifo, DEADLINE) == b"started\n"
        assert live_processes_with(f"sleep {marker}")
        cancelled_at = time.monotonic()
        address.tell(("cancel", handle))
        finished = outcome(probe, handle)
        latency = time.monotonic() - cancelled_at
    finally:
        os.close(fifo)
    assert finished.status == "cancelled"
    assert live_processes_with(f"sleep {marker}") == [], "the sleep outlived its cancelled group"
    print(f"cancel -> owner saw 'cancelled' in {latency * 1000:.1f} ms")


def test_the_death_of_an_owner_kills_its_subprocess_group(start_runtime: StartRuntime, probe: Probe, tmp_path: Path) -> None:
    runtime, address = waiter(start_runtime, probe)
    fifo = open_fifo(str(tmp_path / "ready"))
    marker = f"30.{os.getpid()}2"
    try:
        argv = ["bash", "-c", f"echo started > {tmp_path / 'ready'}; sleep {marker}; echo done"]
        address.ask(("process", argv, 60.0), timeout=DEADLINE)
        assert wait_for_line(fifo, DEADLINE) == b"started\n"
        address.tell("crash")
        assert address.ask("incarnation", timeout=DEADLINE) == 2
    finally:
        os.close(fifo)
    # The reactor kills the group before the wait settles; stopping the runtime waits for that.
    assert runtime.stop(timeout=DEADLINE)
    assert live_processes_with(f"sleep {marker}") == []


def test_a_subprocess_wait_returns_its_output(start_runtime: StartRuntime, probe: Probe) -> None:
    _, address = waiter(start_runtime, probe)
    handle = address.ask(("process", ["bash", "-c", "echo out; echo err >&2; exit 3"], 10.0), timeout=DEADLINE)
    finished = outcome(probe, handle)
    assert finished.status == "ok"
    result = finished.value
    assert isinstance(result, ProcessResult)
    assert (result.returncode, result.stdout, result.stderr) == (3, b"out\n", b"err\n")


def test_the_reactor_survives_a_callback_that_raises(start_runtime: StartRuntime, probe: Probe) -> None:
    runtime, address = waiter(start_runtime, probe)
    runtime.reactor.call_soon(lambda: 1 / 0)
    # Callbacks run in order, so this wait is handled after the faulty one.
    assert outcome(probe, address.ask(("wait", answer, ("alive",), 5.0), timeout=DEADLINE)).value == "alive"
    assert runtime.reactor.statistics().faults == 1
    assert runtime.snapshot().reactor_faults == 1


def test_the_heartbeat_measures_reactor_lag(start_runtime: StartRuntime, probe: Probe) -> None:
    runtime, address = waiter(start_runtime, probe)
    runtime.reactor.call_soon(time.sleep, 0.2)  # a fault on purpose: blocking the reactor
    # The timer starts only after the block (callbacks run in order) and ends several
    # heartbeats later, so the heartbeat has measured the late wake-up by then.
    address.ask(("after", 0.3, "tick"), timeout=DEADLINE)
    probe.get_matching(lambda m: m == "tick")
    assert runtime.snapshot().reactor_lag_max_ms >= 100


def test_an_unsupervised_actor_asking_for_the_reactor_gets_a_clear_error() -> None:
    actor = Waiter.start()
    try:
        with pytest.raises(UsageError, match="was not started by a supervisor"):
            actor.ask(("after", 0.1, "x"), timeout=DEADLINE)
    finally:
        actor.stop(timeout=DEADLINE)
