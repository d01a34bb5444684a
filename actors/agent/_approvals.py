"""Approvals: a tool that wants to do something dangerous asks, and the turn waits.

The wait is the tool's own (it runs in the reactor), so it is bound to the turn: cancelling
the turn cancels it, and a timeout denies. The question goes out as an
``ApprovalRequested`` event on the session's stream; any attached client answers with
``ResolveApproval``, which the session actor hands to :meth:`ApprovalGate.resolve` in the
reactor. An answer for an unknown, finished or other session's request does nothing.

Invariant: only ``once``, ``session`` or ``always`` lets the command run; ``deny``, a
timeout, a cancel, and any late or stale answer never run anything.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import trio

from protocols._session import ApprovalRequested, ApprovalResolved, SessionEvent

from ._approval_settings import ApprovalSettings

if TYPE_CHECKING:
    from actors.hooks import Hooks

log = logging.getLogger(__name__)

Decision = Literal["once", "session", "always", "deny", "timeout", "cancelled", "yolo"]
ALLOWING: frozenset[str] = frozenset({"once", "session", "always", "yolo"})
ALWAYS_ASK: frozenset[str] = frozenset({"write-hermes-home"})
"""Findings a person is asked about even with approvals off: the agent changing its own
configuration (its approvals, its keys) must never be approved by that configuration."""
ALLOWLIST_FILE = "approved_patterns.txt"
"""Under HERMES_HOME: one pattern key per line, approved with ``always``."""


@dataclasses.dataclass
class _Pending:
    event: trio.Event
    choice: str | None = None


class ApprovalGate:
    """One per session; touched only in the reactor thread."""

    def __init__(
        self,
        publish: Callable[[SessionEvent], object],
        *,
        home: Path,
        settings: ApprovalSettings | None = None,
        yolo: bool = False,
        timeout: float | None = None,
        hooks: Hooks | None = None,
        session_id: str = "",
        surface: str = "gateway",
    ) -> None:
        settings = settings or ApprovalSettings()
        self._publish = publish
        self._home = home
        self.yolo = yolo or settings.yolo
        self.timeout = timeout if timeout is not None else settings.timeout
        """Seconds a request waits for an answer before it is denied."""
        self.allowlist = settings.allowlist
        """Keys approved for good in config.yaml (``command_allowlist``)."""
        self.deny_globs = settings.deny
        """Globs that block a command outright (``approvals.deny``): the terminal reads them."""
        self._ids = itertools.count(1)
        self._pending: dict[str, _Pending] = {}
        self._session_allowed: set[str] = set()
        self.hooks = hooks
        """``pre_approval_request`` / ``post_approval_response`` observe each question asked (in the background)."""
        self.session_id = session_id
        self.surface = surface

    def _always_allowed(self) -> set[str]:
        try:
            return {line.strip() for line in (self._home / ALLOWLIST_FILE).read_text().splitlines() if line.strip()}
        except FileNotFoundError:
            return set()

    def _remember_always(self, keys: Iterable[str]) -> None:
        path = self._home / ALLOWLIST_FILE
        known = self._always_allowed()
        new = [k for k in keys if k not in known]
        if new:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as f:
                f.writelines(f"{k}\n" for k in new)

    async def request(self, *, turn_id: str, call_id: str, command: str, reasons: tuple[str, ...], keys: tuple[str, ...], timeout: float) -> Decision:
        """Ask the attached client; return the decision (see ``ALLOWING``).

        ``keys`` name the dangerous patterns found; ``session`` / ``always`` approve those
        patterns for later commands too.
        """
        if self.yolo and not ALWAYS_ASK.intersection(keys):
            return "yolo"
        if keys and all(k in self._session_allowed for k in keys):
            return "session"
        if keys and all(k in self._session_allowed or k in self.allowlist or k in self._always_allowed() for k in keys):
            return "always"
        request_id = f"{call_id}:{next(self._ids)}"
        pending = self._pending[request_id] = _Pending(trio.Event())
        decision: Decision = "cancelled"
        observed = self._observed(command, reasons, keys)
        self._observe("pre_approval_request", observed)
        try:
            self._publish(ApprovalRequested(turn_id=turn_id, request_id=request_id, call_id=call_id, command=command, reasons=reasons, timeout_s=timeout))
            with trio.move_on_after(timeout):
                await pending.event.wait()
            choice = pending.choice
            decision = "timeout" if choice is None else choice  # type: ignore[assignment]
        finally:
            del self._pending[request_id]
            if decision == "session":
                self._session_allowed.update(keys)
            elif decision == "always":
                self._session_allowed.update(keys)
                try:
                    self._remember_always(keys)
                except OSError as exc:
                    log.warning("could not save the approval for later sessions: %s", exc)
            self._publish(ApprovalResolved(turn_id=turn_id, request_id=request_id, choice=decision))
            self._observe("post_approval_response", {**observed, "choice": decision})
        return decision

    def _observed(self, command: str, reasons: tuple[str, ...], keys: tuple[str, ...]) -> dict[str, Any]:
        """The approval hooks' keyword arguments (the seed's names)."""
        return {
            "command": command,
            "description": "; ".join(reasons),
            "pattern_key": keys[0] if keys else "",
            "pattern_keys": list(keys),
            "session_key": self.session_id,
            "surface": self.surface,
        }

    def _observe(self, event: str, kwargs: dict[str, Any]) -> None:
        if self.hooks is not None:
            self.hooks.fire_soon(event, kwargs, session_id=self.session_id, publish=self._publish)

    def resolve(self, request_id: str, choice: str) -> bool:
        """Answer a pending request; False (and nothing happens) when it is not pending."""
        pending = self._pending.get(request_id)
        if pending is None or pending.choice is not None or choice not in ("once", "session", "always", "deny"):
            return False
        pending.choice = choice
        pending.event.set()
        return True

    @property
    def pending(self) -> list[str]:
        return list(self._pending)
