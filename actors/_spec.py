"""Child specifications and supervision policies: what to start, when to restart, how hard.

Plain data, imported by ``supervisor`` (which re-exports every public name here).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import Any

from ._actor import Actor
from ._errors import UsageError

WORKER_SHUTDOWN = 5.0
SUPERVISOR_SHUTDOWN = 60.0


class Restart(enum.StrEnum):
    """When a child that exited is started again."""

    PERMANENT = "permanent"
    """Always."""
    TRANSIENT = "transient"
    """Only after an abnormal exit (crash, failed start)."""
    TEMPORARY = "temporary"
    """Never; the child is forgotten when it exits."""


class Strategy(enum.StrEnum):
    ONE_FOR_ONE = "one_for_one"
    ONE_FOR_ALL = "one_for_all"
    REST_FOR_ONE = "rest_for_one"


@dataclasses.dataclass(frozen=True, slots=True)
class Intensity:
    """At most ``max_restarts`` restarts within ``within`` seconds, or the supervisor gives up.

    OTP defaults to 1 in 5 s; we allow 3 because an agent child (a tool, a provider pool)
    meets transient faults more often than an OTP worker, and escalation restarts siblings.
    """

    max_restarts: int = 3
    within: float = 5.0


@dataclasses.dataclass(frozen=True, slots=True)
class Backoff:
    """Delay before restart number n (counted within the intensity window): initial * factor**(n-1)."""

    initial: float = 0.01
    factor: float = 2.0
    maximum: float = 5.0

    def delay(self, attempt: int) -> float:
        return min(self.maximum, self.initial * self.factor ** max(0, attempt - 1))


@dataclasses.dataclass(frozen=True, slots=True)
class ChildSpec:
    """How to start one child: ``actor.start(*args, **kwargs)`` under ``id``."""

    id: str
    actor: type[Actor[Any]]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    restart: Restart = Restart.PERMANENT
    shutdown: float | None = None
    """Seconds an orderly stop may take before the child is abandoned. Default: 5 s for a
    worker, 60 s for a supervisor (it stops its own children first)."""

    def __post_init__(self) -> None:
        _check_child_id(self.id)
        if not (isinstance(self.actor, type) and issubclass(self.actor, Actor)):
            msg = f"child {self.id!r}: actor must be a subclass of actors.Actor, got {self.actor!r}"
            raise UsageError(msg)
        if self.shutdown is not None and self.shutdown < 0:
            msg = f"child {self.id!r}: shutdown must be >= 0 seconds, got {self.shutdown}"
            raise UsageError(msg)

    @property
    def kind(self) -> str:
        return "supervisor" if self.actor.is_supervisor else "worker"

    @property
    def shutdown_timeout(self) -> float:
        if self.shutdown is not None:
            return self.shutdown
        return SUPERVISOR_SHUTDOWN if self.kind == "supervisor" else WORKER_SHUTDOWN


def _check_child_id(child_id: str) -> None:
    if not child_id or "/" in child_id or len(child_id) > 256 or not child_id.isprintable():
        msg = f"child id {child_id!r} is invalid: use 1-256 printable characters without '/'"
        raise UsageError(msg)


def _check_unique(children: Sequence[ChildSpec]) -> None:
    ids = [spec.id for spec in children]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        msg = f"child ids must be unique under one supervisor; repeated: {', '.join(duplicates)}"
        raise UsageError(msg)


def _join(parent: str, child_id: str) -> str:
    return f"{parent.rstrip('/')}/{child_id}"
