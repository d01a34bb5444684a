"""``SignalStop``, the stop of ``hermes run`` and ``hermes serve``: the first signal asks for an
orderly stop, a second exits at once; the previous handlers come back afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from actors import SignalStop
from tests.conftest import DEADLINE

# A command whose orderly stop hangs: only a second signal ends it.
STUCK_COMMAND = """
import threading
from actors import SignalStop
with SignalStop("stuck") as stop:
    print("up", flush=True)
    stop.wait()
    print("stopping after", stop.received, flush=True)
    threading.Event().wait(60)  # the fault under test: a shutdown that never finishes
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_exits_at_once_with_128_plus_its_number(signum: signal.Signals) -> None:
    process = subprocess.Popen([sys.executable, "-c", STUCK_COMMAND], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "up\n"
        process.send_signal(signum)
        assert process.stdout.readline() == f"stopping after {signum.name}\n"
        process.send_signal(signum)
        _stdout, stderr = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(DEADLINE)
    assert process.returncode == 128 + signum
    assert stderr == f"stuck: {signum.name} again: exiting now, without finishing the shutdown\n"


def test_the_first_signal_ends_the_wait_and_the_old_handlers_come_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with SignalStop("test") as stop:
        assert not stop.wait(0) and stop.received is None
        signal.raise_signal(signal.SIGTERM)
        assert stop.wait(DEADLINE) and stop.received == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_end_of_the_runtime_ends_the_wait_without_a_signal() -> None:
    from supervisor import Runtime

    with SignalStop("test") as stop:
        runtime = Runtime()
        stop.follow(runtime)
        runtime.start()
        assert not stop.wait(0)
        stopper = threading.Thread(target=runtime.stop)
        stopper.start()
        assert stop.wait(DEADLINE)
        stopper.join(DEADLINE)
    assert stop.received is None


# The signal lands on another thread while the main thread waits (the kernel picks any thread
# that does not block it): the main thread must still wake up and run the handler.
LOST_SIGNAL_COMMAND = """
import inspect, os, signal, sys, threading
from actors import SignalStop
main = threading.main_thread().ident
lines, first = inspect.getsourcelines(threading.Condition.wait)
waiting = [first + i for i, line in enumerate(lines) if "waiter.acquire(" in line][1:]  # the first takes the new waiter lock

def blocked() -> bool:
    frame = sys._current_frames().get(main)
    if frame is None or frame.f_code is not threading.Condition.wait.__code__ or frame.f_lineno not in waiting:
        return False
    with open(f"/proc/self/task/{threading.main_thread().native_id}/stat") as stat:  # asleep in the kernel, not on its way there
        return stat.read().rsplit(")", 1)[1].split()[0] == "S"

def other_thread() -> None:
    while not blocked():  # a barrier: the main thread sits in the lock's acquire
        os.sched_yield()
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

with SignalStop("lost") as stop:
    threading.Thread(target=other_thread, daemon=True).start()
    stop.wait()
    print("stopped by", stop.received, flush=True)
"""


def test_a_signal_delivered_to_another_thread_still_ends_the_main_threads_wait() -> None:
    """Found by a flaky CI run: SIGTERM right after 'listening' left hermes serve waiting forever."""
    done = subprocess.run([sys.executable, "-c", LOST_SIGNAL_COMMAND], capture_output=True, text=True, timeout=DEADLINE)
    assert (done.returncode, done.stdout) == (0, "stopped by SIGTERM\n"), done.stderr


def test_sighup_asks_a_reload_once_each_and_a_stop_still_wins() -> None:
    before = signal.getsignal(signal.SIGHUP)
    with SignalStop("test", reload=True) as stop:
        assert not stop.wait(0) and not stop.take_reload()
        os.kill(os.getpid(), signal.SIGHUP)
        assert stop.wait(DEADLINE) and stop.take_reload()
        assert not stop.take_reload()  # one reload per SIGHUP
        assert stop.received is None  # a reload is not a stop
        os.kill(os.getpid(), signal.SIGHUP)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(DEADLINE) and stop.received == "SIGTERM"
        assert not stop.take_reload()  # stopping: the pending reload is dropped
    assert signal.getsignal(signal.SIGHUP) == before


def test_without_reload_sighup_keeps_its_previous_handler() -> None:
    before = signal.getsignal(signal.SIGHUP)
    with SignalStop("test"):
        assert signal.getsignal(signal.SIGHUP) == before
