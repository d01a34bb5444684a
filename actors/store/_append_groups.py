"""The store writer's appends grouped per batch (Postgres with the server's clock).

An ``AppendMessages`` waits for its batch's end, and the batch's waiting appends go to the server
in two queries (``appends_together``): their fence checks (each lease row read ``FOR SHARE``
with the server's clock), then the turn marks, rows and counters of those whose fence holds, in
the order they came: two round trips for all of them, where each cost one or two. Each is still
answered on its own, with what it would have been answered alone; one whose fence is stale is
written alone after the group (and refused there), so no statement of a stale node runs. When
another check fails (a turn started twice, an unknown session) or any statement does, the
group's savepoint undoes all of them and each is written alone as ever, where the one at fault
fails by itself.

The order of one session's commands is kept: a session's lease command runs its waiting appends
first, and an append of a session with a waiting lease command runs that first; any other write,
a ``ReopenWrites`` of a session with one waiting, and the commit run them all first. Appends that
start a segment (the segment row needs the first message's id) are written alone.

A mixin of :class:`~actors.store._writer.StoreWriter`, beside ``LeaseGroups``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from protocols import AppendMessages, Message

from ._errors import RunAlone
from ._lease_rows import fence_answer, fence_step
from ._pg import PgConnection, Step
from ._writes import Rejected, append_messages, pg_append


def appends_together(db: PgConnection, commands: list[AppendMessages]) -> tuple[list[tuple[AppendMessages, Message]], list[AppendMessages]]:
    """``commands`` in two round trips, each answered as if written alone: their fence checks
    together, then the appends whose fence holds together. Returns the answered appends, and those
    left to write alone: each whose fence is stale (alone it is refused, and nothing of a stale
    node is ever run: run and undone, its statements would take the new owner's row locks).

    Raises:
        RunAlone: a check of one of them failed, or one could not be written: undo the group
            (its savepoint) and write each alone.
    """
    try:
        plans = [pg_append(c) for c in commands]
    except Rejected:
        raise RunAlone from None
    stale: set[int] = set()
    fenced = [c for c in commands if c.fence is not None]
    if fenced:
        checks = db.together([fence_step(c.session_id) for c in fenced])
        stale = {id(c) for c, sent in zip(fenced, checks, strict=True) if c.fence is not None and fence_answer(sent, c.session_id, c.fence) is not None}
        plans = [p for p in plans if id(p.command) not in stale]
    left = [c for c in commands if id(c) in stale]
    if not plans:
        return [], left
    steps: list[Step] = [step for plan in plans for step in plan.steps]
    sent = db.together(steps)
    answered: list[tuple[AppendMessages, Message]] = []
    first = 0
    for plan in plans:
        end = first + len(plan.steps)
        try:
            answered.append((plan.command, plan.answer(sent[first:end])))
        except Rejected:
            raise RunAlone from None
        first = end
    return answered, left


class AppendGroups:
    """Appends waiting for the batch's end (a mixin of :class:`StoreWriter`)."""

    _batch_writes: int
    _batch_began: float
    _renewing: set[str]
    _fenced: set[str]
    _run_deferred: Callable[[], None]
    _write: Callable[..., None]
    _grouped: Callable[..., None]

    def start_append_groups(self, *, grouped: bool) -> None:
        """``grouped``: whether appends wait for the batch's end (Postgres with the server's clock)."""
        self._groups_appends = grouped
        self._appends: list[AppendMessages] = []
        """Appends waiting for the batch's end, written together (``_append_deferred``)."""
        self._appending: set[str] = set()
        """Their sessions: a lease command or ``ReopenWrites`` of one of them runs them first."""

    def _append(self, command: AppendMessages) -> None:
        if not self._groups_appends or command.segment is not None or command.session_id in self._fenced:
            self._write(command, append_messages)  # alone, after the waiting ones (``_write`` runs them)
            return
        if command.session_id in self._renewing:
            self._run_deferred()  # the session's lease command came first
        if self._batch_writes == 0:
            self._batch_began = time.monotonic()
        self._batch_writes += 1
        self._appends.append(command)
        self._appending.add(command.session_id)

    def _append_deferred(self) -> None:
        """The appends waiting in this batch, together (``appends_together``)."""
        appends, self._appends = self._appends, []
        self._appending = set()
        self._grouped(appends, appends_together, append_messages, "appending", "_appends", quiet=(RunAlone,))

    def _appends_waiting(self, session_id: str | None = None) -> bool:
        """Whether appends wait (of ``session_id``, when given)."""
        return bool(self._appends) if session_id is None else session_id in self._appending

    def _deferred_appends(self) -> list[Any]:
        """Take the waiting appends (to answer them failed)."""
        appends, self._appends = self._appends, []
        self._appending = set()
        return appends
