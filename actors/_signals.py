"""How a command that runs a runtime in its main thread stops: on a signal or the runtime's end.

``hermes run`` and ``hermes serve`` both hold one :class:`SignalStop` while they run. The
first SIGINT or SIGTERM asks for an orderly stop: :meth:`SignalStop.wait` returns and the
command shuts the runtime down its own way (``hermes serve`` drains first). A second
signal means the person (or the service manager) will not wait: the process exits at
once with status 128 + the signal's number (130 for SIGINT, 143 for SIGTERM), without
finishing the shutdown. Process groups its commands left running are killed by the next
start (the group ledger, ``_groups.py``).

The handlers run in the main thread between bytecodes. A signal the kernel delivers to
another thread (the reactor's, an actor's) does not interrupt the main thread's wait, so
its handler would run only when the main thread next wakes: :meth:`SignalStop.wait` wakes
every :data:`SIGNAL_POLL` seconds for that (without it, a SIGTERM that landed on the reactor
thread left ``hermes serve`` waiting forever).

With ``reload=True`` (``hermes serve``), SIGHUP asks for a reload instead: :meth:`SignalStop.wait`
returns and :meth:`SignalStop.take_reload` says so, once per SIGHUP received.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Sequence
from types import FrameType, TracebackType
from typing import TYPE_CHECKING

from protocols import ChildExited, Message

if TYPE_CHECKING:
    from ._runtime import Runtime

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)
SIGNAL_POLL = 0.2
"""Seconds at most between two wake-ups of a waiting main thread (see the module docstring)."""


class SignalStop:
    """A command's stop: the first signal, or the exit of the runtime's root.

    Use as a context manager around everything the command does (the handlers are
    installed on entry and the previous ones put back on exit)::

        with SignalStop("hermes serve") as stop:
            runtime = Runtime(children)
            stop.follow(runtime)
            runtime.start()
            stop.wait()
            ...  # an orderly stop; stop.received says which signal asked for it, if one did
    """

    def __init__(self, program: str, signals: Sequence[signal.Signals] = STOP_SIGNALS, *, reload: bool = False) -> None:
        self.program = program
        """Names the process in the line printed on a forced exit."""
        self._signals = tuple(signals)
        self._reload_signal = signal.SIGHUP if reload and hasattr(signal, "SIGHUP") else None
        self._reloads = 0
        self._done = threading.Event()
        self._signal: str | None = None
        self._previous: dict[signal.Signals, object] = {}

    def __enter__(self) -> SignalStop:
        for signum in self._signals:
            self._previous[signum] = signal.signal(signum, self._on_signal)
        if self._reload_signal is not None:
            self._previous[self._reload_signal] = signal.signal(self._reload_signal, self._on_reload)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None) -> None:
        previous, self._previous = self._previous, {}
        for signum, handler in previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]  # what signal.signal returned

    @property
    def received(self) -> str | None:
        """The name of the first signal received (``"SIGTERM"``), or None."""
        return self._signal

    def follow(self, runtime: Runtime) -> None:
        """The runtime's end (its root exited: stopped, or given up) ends the wait too."""
        runtime.subscribe(self._on_event)

    def wait(self, timeout: float | None = None) -> bool:
        """Until a signal or the runtime's end, or a reload asked (or ``timeout`` seconds); whether one came."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = SIGNAL_POLL if deadline is None else max(0.0, min(SIGNAL_POLL, deadline - time.monotonic()))
            if self._done.wait(step) or self._reloads:  # a timed wait returns, and pending handlers run
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return self._done.is_set()

    def take_reload(self) -> bool:
        """Whether a reload was asked (SIGHUP) and not taken yet; takes one (a stop asked wins: False)."""
        if not self._reloads or self._done.is_set():
            return False
        self._reloads -= 1
        return True

    def _on_reload(self, _signum: int, _frame: FrameType | None) -> None:
        self._reloads += 1

    def _on_event(self, event: Message) -> None:
        if isinstance(event, ChildExited) and event.path == "/":
            self._done.set()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self._signal is None:
            self._signal = name
            self._done.set()
            return
        # os.write, not print: the main thread may be inside a print to the same stream.
        line = f"{self.program}: {name} again: exiting now, without finishing the shutdown\n"
        os.write(2, line.encode())
        os._exit(128 + signum)
