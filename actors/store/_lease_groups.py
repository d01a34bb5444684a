"""The store writer's lease commands grouped per batch (Postgres with the server's clock):
acquires and renewals wait for the batch's end and are written together (``acquire_leases``,
``renew_leases``: a few round trips for all of them), each still answered on its own; a command
the group cannot take is written alone as ever. A session's other write, or its lease command
of the other kind, runs its waiting ones first, so each session's commands keep their order.
A mixin of :class:`StoreWriter`: it uses the writer's batch and connection, declared below.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from protocols import AcquireLease, AppendMessages, Message, MessagesPersisted, RenewLease

from ._backend import Connection, apply_write
from ._errors import BROKEN, describe
from ._lease_rows import Clock, acquire_lease, acquire_leases, renew_lease, renew_leases

log = logging.getLogger("actors.store._writer")

L = TypeVar("L", AcquireLease, RenewLease)
G = TypeVar("G", AcquireLease, RenewLease, AppendMessages)
Grouped = tuple[list[tuple[G, Message]], list[G]]
"""What a grouped write answers: the commands it answered, and those left to write alone."""


class LeaseGroups:
    """Lease commands waiting for the batch's end (a mixin of :class:`StoreWriter`)."""

    path: str
    _now: Clock
    _pending: list[tuple[Any, Message, int]]
    _batch_writes: int
    _batch_began: float
    _connection: Callable[[], Connection]
    _write: Callable[..., None]
    _break: Callable[[BaseException], None]

    def start_lease_groups(self) -> None:
        """Nothing waiting (the writer's ``__init__`` calls it)."""
        self._renewals: list[RenewLease] = []
        """Renewals waiting for the batch's end, renewed together (``_renew_deferred``)."""
        self._acquires: list[AcquireLease] = []
        """Acquires waiting for the batch's end, acquired together (``_acquire_deferred``)."""
        self._renewing: set[str] = set()
        """Their sessions: another write of one of them runs them first (its order kept)."""

    def _defer(self, command: AcquireLease | RenewLease) -> None:
        if command.session_id in self._renewing and any(c.session_id == command.session_id for c in self._other_kind(command)):
            self._run_deferred()  # a session's acquire and renewal run in the order it sent them
        if self._batch_writes == 0:
            self._batch_began = time.monotonic()
        self._batch_writes += 1
        if isinstance(command, AcquireLease):
            self._acquires.append(command)
        else:
            self._renewals.append(command)
        self._renewing.add(command.session_id)

    def _other_kind(self, command: AcquireLease | RenewLease) -> list[AcquireLease] | list[RenewLease]:
        return self._renewals if isinstance(command, AcquireLease) else self._acquires

    def _run_deferred(self) -> None:
        self._acquire_deferred()
        self._renew_deferred()

    def _acquire_deferred(self) -> None:
        """The acquires waiting in this batch, together (``acquire_leases``, Postgres only: two or
        three round trips for all of them); a session never leased, or a row another transaction
        holds, is acquired alone as ever (``acquire_lease``, which makes its row or waits for it)."""
        acquires, self._acquires = self._acquires, []
        self._renewing = {c.session_id for c in self._renewals}
        self._grouped(acquires, acquire_leases, lambda db, c: acquire_lease(db, c, self._now), "acquiring", "_acquires")

    def _renew_deferred(self) -> None:
        """The renewals waiting in this batch, in two statements (``renew_leases``); a row another
        transaction holds, or none, is renewed alone as ever (``renew_lease``, which waits for it)."""
        renewals, self._renewals = self._renewals, []
        self._renewing = {c.session_id for c in self._acquires}
        self._grouped(renewals, renew_leases, lambda db, c: renew_lease(db, c, self._now), "renewing", "_renewals")

    def _grouped(
        self,
        commands: list[G],
        together: Callable[[Any, list[G]], Grouped[G]],
        alone: Callable[[Connection, G], tuple[Message, int]],
        doing: str,
        queue: str,
        *,
        quiet: tuple[type[Exception], ...] = (),
    ) -> None:
        """Commands of one kind waiting in this batch: those ``together`` answers, answered;
        the rest (or all of them, when the group fails) written alone as ever. A broken
        connection leaves them pending, failed with everything else. A failure of a ``quiet``
        kind is expected (the group says to write each alone): not logged."""
        if not commands:
            return
        db = self._connection()
        try:
            if not db.in_transaction:
                db.execute("BEGIN IMMEDIATE")
            answered, left = apply_write(db, together, commands)
        except Exception as exc:
            if isinstance(exc, BROKEN):
                setattr(self, queue, commands)  # back in their queue: answered failed with everything pending
                self._break(exc)
            if not isinstance(exc, quiet):
                log.warning("%s: %s %d together failed, %s each alone: %s", self.path, doing, len(commands), doing, describe(exc))
            answered, left = [], commands
        for command, reply in answered:
            self._pending.append((command.reply_to, reply, len(reply.message_ids) if type(reply) is MessagesPersisted else 0))
        for command in left:
            self._write(command, alone)
