"""What a session host gives the interpreter (:class:`SessionPort`) and how it is configured.

The port is the I/O of one session: the store, waits, timers, the event stream and the clock.
``_session.SessionActor`` implements it over the real actors and reactor,
``actors.chaos._sim_session.SimSession`` over the simulated world.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from protocols import KeyLeased, LeaseKey, ReportKey
from protocols._session import SessionEvent
from protocols._store import (
    AppendMessages,
    CreateSession,
    MessagesPersisted,
    RemoveLastTurn,
    SessionCreated,
    SessionTotalsUpdated,
    StoreFailed,
    TurnRemoved,
    UpdateSessionTotals,
)

from ._machine import CallModel, MachineConfig, RunTool, SessionState
from ._recovery import OpenTurns
from ._sanitize import sanitize
from ._session_core import Sanitizer
from ._session_deps import RecoveryPolicy
from ._session_timers import Timer

WRITE_REPLIES = (MessagesPersisted, StoreFailed, SessionCreated, TurnRemoved, SessionTotalsUpdated)
"""The store's answers to a session's writes (each carries the write's token)."""
WRITE_REPLY_TYPES = frozenset(WRITE_REPLIES)
Write = CreateSession | AppendMessages | UpdateSessionTotals | RemoveLastTurn


class Handle(Protocol):
    @property
    def wait_id(self) -> int: ...


class SessionPort(Protocol):
    """What a host gives the interpreter: the I/O, nothing else."""

    open_turns: OpenTurns
    """The session's hub's record of open turns (outlives an incarnation within a process)."""

    @property
    def me(self) -> Any:
        """Where the store's replies go (the ``reply_to`` of every write)."""

    def now(self) -> float: ...
    def wall(self) -> float: ...
    def new_turn_id(self) -> str: ...
    def tell_store(self, command: Write) -> None: ...
    def reopen_writes(self) -> None: ...
    def lease(self, provider: str, request: LeaseKey) -> None:
        """Ask ``provider``'s credential pool for a key (it answers the session ``KeyLeased`` or ``NoKeyAvailable``)."""

    def report(self, provider: str, outcome: ReportKey) -> None:
        """Tell ``provider``'s pool how a leased key did (fire and forget)."""

    def start_model(self, effect: CallModel, model: str, key: KeyLeased) -> Handle: ...
    def start_tool(self, effect: RunTool, turn_id: str) -> Handle: ...
    def after(self, delay: float, message: Timer) -> Handle: ...
    def cancel(self, handle: Any) -> None:
        """Cancel a wait or timer this port started (its own handle type)."""

    def publish(self, event: SessionEvent) -> None: ...
    def reload(self, why: str) -> None:
        """Restart from the store (memory and store disagree); the host handles nothing more."""

    def passivate(self) -> None: ...
    def idle(self, generation: int, state: SessionState) -> None:
        """The session has no turn: arm the idle timer for ``generation`` (``IdleTimer``)."""


@dataclasses.dataclass(frozen=True)
class HostConfig:
    session_id: str
    model: str
    machine: MachineConfig = MachineConfig()
    source: str = "api"
    recovery: RecoveryPolicy = "fail"
    ack_timeout: float = 30.0
    parent_session_id: str | None = None
    sanitizer: Sanitizer = sanitize
    """What a loaded transcript goes through (the simulator plants a bug by replacing it)."""
