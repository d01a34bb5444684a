"""Messages from the reactor back to the actor that owns a wait."""

from __future__ import annotations

from typing import Any, Literal

from ._base import Message

WaitStatus = Literal["ok", "error", "cancelled", "timeout"]


class WaitFinished(Message, frozen=True, kw_only=True):
    """A wait started by an actor settled; delivered to the owning incarnation only."""

    wait_id: int
    tag: str
    """The label the owner gave the wait, to route the outcome in its handler."""
    status: WaitStatus
    value: Any = None
    """The coroutine's return value (``ok``) or the exception object (``error``)."""
    error: str = ""
    """``Type: message`` for ``error``; a short reason for ``timeout``."""


class ProcessResult(Message, frozen=True, kw_only=True):
    """Outcome of a subprocess run by the reactor in its own process group."""

    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes
    truncated: bool = False
    """True when output passed the cap and was cut."""
