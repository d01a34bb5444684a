"""Supervision messages: what supervisors and their children tell each other.

Commands are imperative (``StartChild``, ``TerminateChild``, ``Shutdown``), events past
tense (``ChildStarted``, ``ChildExited``, ``ChildRestarted``, ``Escalated``). The tree
snapshot (``TreeSnapshot`` of ``NodeSnapshot``) is what the TUI and the API show.
"""

from __future__ import annotations

from typing import Any, Literal

from ._base import Message

ExitKind = Literal["normal", "crashed", "start_failed", "abandoned"]
"""How an actor incarnation ended.

``normal``: it stopped (itself, or because its supervisor asked). ``crashed``: a handler
or stop hook raised. ``start_failed``: construction or ``started()`` raised.
``abandoned``: it did not stop within its shutdown timeout and was cut loose.
"""

NodeState = Literal["starting", "running", "restarting", "stopping", "stopped", "abandoned"]


class ChildStarted(Message, frozen=True, kw_only=True):
    """An incarnation of a child is running and its address delivers to it."""

    path: str
    incarnation: int


class ChildExited(Message, frozen=True, kw_only=True):
    """An incarnation of a child ended; sent by the child to its supervisor."""

    path: str
    child_id: str
    incarnation: int
    """Which start of the child this was (1 for the first); stale exits are ignored."""
    kind: ExitKind
    error: str = ""
    """``Type: message`` of the exception for crashed/start_failed, else empty."""


class ChildRestarted(Message, frozen=True, kw_only=True):
    """A supervisor started a new incarnation of a child after an exit."""

    path: str
    incarnation: int
    restarts: int


class Escalated(Message, frozen=True, kw_only=True):
    """A supervisor gave up (restart intensity exceeded) and handed the failure up."""

    path: str
    reason: str


class InjectCrash(Message, frozen=True, kw_only=True):
    """A fault on purpose: any actor that receives it crashes (chaos testing)."""

    reason: str = "injected crash"


class StartChild(Message, frozen=True, kw_only=True):
    """Ask a dynamic supervisor to start one child of its template spec."""

    child_id: str
    args: tuple[Any, ...] = ()
    """Positional arguments for the child's constructor (in-process only)."""


class ReplaceTemplate(Message, frozen=True, kw_only=True):
    """Ask a dynamic supervisor to start children (new ones, and restarts) with these template
    arguments from now on, and to tell ``notify`` to each child running now."""

    args: tuple[Any, ...]
    """The template's positional arguments (in-process only)."""
    notify: Any = None
    """A message for every running child (None: tell them nothing)."""


class TerminateChild(Message, frozen=True, kw_only=True):
    """Ask a supervisor to stop a child for good (no restart)."""

    child_id: str


class Shutdown(Message, frozen=True, kw_only=True):
    """Ask a supervisor to stop all its children in reverse start order, then itself."""

    reason: str = "shutdown"


class ShutdownTimedOut(Message, frozen=True, kw_only=True):
    """Timer: a child did not stop within its shutdown timeout."""

    child_id: str
    incarnation: int


class RestartDue(Message, frozen=True, kw_only=True):
    """Timer: a child's restart backoff has elapsed."""

    child_id: str


SupervisorInbox = ChildExited | ShutdownTimedOut | RestartDue | Shutdown | TerminateChild | StartChild | ReplaceTemplate
"""What a supervisor's inbox accepts: its children's exits, its own timers and the commands.

``StartChild`` and ``ReplaceTemplate`` are for a ``DynamicSupervisor``; a fixed ``Supervisor`` logs them as misuse.
"""


class NodeSnapshot(Message, frozen=True, kw_only=True):
    """One node of the supervision tree at the moment of the snapshot."""

    path: str
    kind: Literal["supervisor", "worker"]
    state: NodeState
    incarnation: int
    restarts: int
    mailbox: int
    """Messages waiting in the inbox, plus any buffered at the address."""
    uptime_s: float
    """Seconds since the current incarnation started (0 when not running)."""
    dropped: int = 0
    """Messages the address refused (buffer overflow) or dead-lettered (closed)."""
    children: tuple[NodeSnapshot, ...] = ()


class TreeSnapshot(Message, frozen=True, kw_only=True):
    """The whole tree, plus reactor health."""

    root: NodeSnapshot
    reactor_lag_ms: float
    """Latest heartbeat lateness of the reactor thread, in milliseconds."""
    reactor_lag_max_ms: float
    reactor_waits: int
    """Waits (timers, model streams, subprocesses...) currently running in the reactor."""
    reactor_faults: int
    """Callbacks that raised inside the reactor and were contained."""
