"""The simulated credential pool actor: a mailbox, a saved state, crashes and restarts.

What ``actors.credentials._pool.CredentialPool`` does for ``/credentials/sim``, done in the
simulated world through the same pure core (``_pool_core``, by way of ``LocalPool``):

- ``LeaseKey`` reaches the pool :data:`HOP_S` after it is told and is answered at once, to
  the asking incarnation (dropped if it died meanwhile); ``ReportKey`` is handled when told
  (an address is FIFO, so a session's report always comes before its next lease).
- Its state is saved as the actor saves it: a change to a key's bench at once, grants and
  usage after :data:`SAVE_DELAY` (debounced), one save in flight, saves committed in order
  ``commit_s`` after they are sent; a save may fail (the store busy) and is sent again later.
- It crashes (``CrashFaults.pool``) instead of handling a message. That message and every
  one told while it restarts wait in its address and reach the next incarnation, never
  dropped. The exit sends a last save of what the pool had, unless the plan loses it
  (``CrashFaults.pool_save_lost``); the next incarnation loads only after every save sent
  before it is committed (the real pool's store barrier), so it starts from the newest one
  that landed: grants and reports it never saw are forgotten, and a report of a lease it
  does not know is counted as the core counts it, grant included.
- The process dying (``_sim_process``) takes the pool with it: saves not committed are lost,
  messages on their way die with their senders, and the next process's pool starts from the
  saved state. The pool learns of the death from the store's epoch (it is part of the process).

The checker (``Invariants``) learns every lease told and answered, every report handled, the
usage the pool shows after it, every save that landed and every return to a saved state.
"""

from __future__ import annotations

import collections
import math
from typing import TYPE_CHECKING, Literal

import msgspec

from protocols import ChildExited, ChildRestarted, ChildStarted, KeyLeased, LeaseKey, ReportKey

from ..credentials import ProviderSpec
from ..credentials._local import LocalPool
from ..credentials._pool_core import KeyState, PoolState, bench_changed, restore, settled_lease_ids

if TYPE_CHECKING:
    from ._sim_world import World

PoolBug = Literal["pool_drops_mailbox", "grant_benched", "forget_in_flight", "drop_unknown_reports", "reuse_lease"]
"""Pool bugs a test plants on purpose, to prove the checker catches them:

- ``pool_drops_mailbox``: messages told while the pool restarts are dropped (``lease_unanswered``).
- ``grant_benched``: the pool grants keys as if none were benched (``benched_key_granted``).
- ``forget_in_flight``: a restarted pool forgets the leases in flight, so their reports count
  their grant a second time (``usage_double_counted``).
- ``drop_unknown_reports``: the pool ignores a report of a lease it does not know (one granted
  by an incarnation whose state was lost) (``usage_uncounted``).
- ``reuse_lease``: a session runs every model call on the first key it was leased (``model_key_not_leased``).
"""

HOP_S = 0.0002
"""Seconds a message takes to reach the pool."""
SAVE_DELAY = 1.0
"""Seconds usage waits before it is saved (``PoolOptions.save_delay``)."""
RESTART_S = 0.001
"""Seconds the supervisor takes to start the next incarnation (its load comes after)."""
LOAD_S = 0.005
"""Longest time the load of the saved state takes."""


class SimPool:
    """The provider's pool as an actor in the world: one incarnation at a time."""

    def __init__(self, world: World, spec: ProviderSpec) -> None:
        self.world = world
        self.spec = spec
        self.path = f"/credentials/{spec.name}"
        self.core = LocalPool(spec)
        """The running incarnation's state and decisions (the pure core)."""
        self.saved: PoolState = self.core.state
        """What the store holds (the state an incarnation starts from)."""
        self.up = True
        self.mailbox: collections.deque[tuple[LeaseKey | ReportKey, str]] = collections.deque()
        """Messages told while no incarnation runs, with their sender's session id."""
        self.incarnation = 1
        self.crashes = 0
        self.epoch = world.store.epoch
        self.dirty = self.urgent = self.saving = False
        self.timer_at: float | None = None
        """When the debounce timer runs out (None: not armed)."""
        self.pending: collections.deque[tuple[float, PoolState, int, bool, int]] = collections.deque()
        """Saves sent and not committed yet: (commit time, state, checker mark, failed, incarnation)."""
        self.commits_at = 0.0
        """When the last save sent is committed (the store commits in order)."""
        self.saves = world.plan.crashes.pool > 0 or world.plan.crashes.process > 0
        """Whether saves are simulated: nothing reads the saved state unless the pool or the process can die."""
        self.bug: str | None = None
        """The run's planted bug; the pool (and the world) act on the ``PoolBug`` ones."""
        world.checker.supervision(ChildStarted(path=self.path, incarnation=1), world.now)

    # -- the address ------------------------------------------------------------------------------

    def tell(self, message: LeaseKey | ReportKey, session_id: str) -> None:
        """A session tells the pool ``message``: a lease arrives :data:`HOP_S` later (its answer
        must not reach the session while it still handles the step that asked); a report is
        handled at once (it needs no answer, and the address keeps it ahead of the next lease)."""
        world = self.world
        if type(message) is LeaseKey:
            world.checker.pool.lease_sent(session_id, message.lease_id, world.now)
            world.at(world.now + HOP_S, self._arrive, world.store.epoch, message, session_id)
        else:
            self._arrive(world.store.epoch, message, session_id)

    def _arrive(self, epoch: int, message: LeaseKey | ReportKey, session_id: str) -> None:
        if epoch != self.world.store.epoch:
            return  # told by a process that died since: gone with its sender
        if self.epoch != epoch:
            self._new_process()
        now = self.world.now
        if (self.timer_at is not None and self.timer_at <= now) or (self.pending and self.pending[0][0] <= now):
            self._catch_up(now)  # a debounce timer ran out or a save was committed since the pool last ran
        if self.up:
            self._handle(message, session_id)
        elif self.bug == "pool_drops_mailbox":
            self.world.note(f"planted bug: the restarting pool dropped a {type(message).__name__}")
        else:
            self.mailbox.append((message, session_id))

    def _handle(self, message: LeaseKey | ReportKey, session_id: str) -> None:
        crashes = self.world.plan.crashes
        if crashes.pool and self.crashes < crashes.max_per_pool and self.world.dice.fault("pool", "crash", crashes.pool):
            self.mailbox.appendleft((message, session_id))  # InjectCrash was ahead of it
            self._crash()
        elif type(message) is LeaseKey:  # exact types: messages are final structs
            self._lease(message, session_id)
        elif type(message) is ReportKey:
            self._report(message, session_id)

    # -- leases and reports ------------------------------------------------------------------------

    def _lease(self, request: LeaseKey, session_id: str) -> None:
        world, core = self.world, self.core
        before = core.state
        if self.bug == "grant_benched":
            core.state = _unbenched(before)
        answer = core.lease(request, world.now)
        if self.bug == "grant_benched":
            core.state = msgspec.structs.replace(core.state, keys={k: _bench_of(v, before.keys[k]) for k, v in core.state.keys.items()})
        if type(answer) is KeyLeased:
            key_id = answer.key_id
            world.checker.pool.answered(session_id, request.lease_id, key_id, before.keys[key_id].cooling_until, core.state.keys[key_id], world.now)
        else:
            world.checker.pool.answered(session_id, request.lease_id, None, 0.0, None, world.now)
        if core.state is not before:  # after the checker's ledger: a save sent now holds this grant
            self.dirty = True
            self._schedule(world.now)
        incarnation = request.reply_to  # told at once (no message fault hits a pool's reply): one step, not two
        incarnation.session.on_message(incarnation, answer)

    def _report(self, outcome: ReportKey, session_id: str) -> None:
        world, core = self.world, self.core
        before = core.state
        lease_id = outcome.lease_id
        if self.bug == "drop_unknown_reports" and lease_id not in before.in_flight and lease_id not in settled_lease_ids(before):
            world.note(f"planted bug: the pool ignored the report of {lease_id}, a lease it does not know")
        else:
            core.report(outcome, world.now)
        world.checker.pool.reported(session_id, outcome, core.state.keys, world.now)
        if core.state is not before:  # after the checker's ledger, as for a grant
            self.dirty = True
            self.urgent = self.urgent or (not outcome.ok and bench_changed(before, core.state))  # a success never benches
            self._schedule(world.now)

    # -- saves ---------------------------------------------------------------------------------------
    #
    # The save machinery's own moments (a debounce timer running out, a save committed) are not
    # heap entries: they are run when the pool is next busy (``_catch_up``), in time order, up to
    # that moment. Nothing but the pool changes its state, so the state each of them sees is the
    # state the pool has then: the outcome is the one timers and commits would give, for fewer steps.

    def _catch_up(self, until: float) -> None:
        """Run every timer and commit due by ``until``, in order."""
        pending = self.pending
        while True:
            commit = pending[0][0] if pending else math.inf
            timer = self.timer_at
            if timer is not None and timer <= until and timer < commit:
                self.timer_at = None
                if not self.saving and self.dirty:
                    self._send(timer)
                continue
            if commit > until:
                return
            at, state, mark, failed, incarnation = pending.popleft()
            if not failed:
                self.saved = state
                self.world.checker.pool.saved(mark)
            if incarnation == self.incarnation and self.up:
                self.saving = False
                if failed:  # sent again after the debounce, not at once (as the actor does)
                    self.dirty, self.urgent = True, False
                self._schedule(at)

    def _schedule(self, now: float) -> None:
        if not self.dirty or self.saving or not self.saves:
            return  # the commit of the save in flight schedules again
        if self.urgent:
            self._send(now)
        elif self.timer_at is None:
            self.timer_at = now + SAVE_DELAY

    def _send(self, now: float, *, lost: bool | None = None) -> None:
        """Send the state as it is; ``lost`` given: the exit's last save (nobody waits for it)."""
        world = self.world
        self.timer_at = None
        self.saving = lost is None
        self.dirty = self.urgent = False
        commit = self.commits_at = max(now, self.commits_at) + world.plan.workload.commit_s
        failed = world.dice.fault("pool", "save_failed", world.plan.store.busy) if lost is None else lost
        self.pending.append((commit, self.core.state, world.checker.pool.mark(), failed, self.incarnation))

    # -- crashes and restarts ---------------------------------------------------------------------------

    def _crash(self) -> None:
        world = self.world
        self.crashes += 1
        world.checker.counts["pool_crashes"] += 1
        world.note(f"fault: the credential pool crashed (incarnation {self.incarnation})")
        if self.dirty:  # the exit sends what the store does not have yet; the store may lose it
            lost = world.dice.fault("pool", "save_lost", world.plan.crashes.pool_save_lost)
            if lost:
                world.note("fault: the crashed pool's last save was lost")
            self._send(world.now, lost=lost)
        self.up = self.saving = self.dirty = self.urgent = False
        self.timer_at = None
        load = world.dice.uniform("pool", 0.0005, LOAD_S)
        world.at(max(world.now + RESTART_S, self.commits_at) + load, self._restart, self.epoch)

    def _restart(self, epoch: int) -> None:
        world = self.world
        if epoch != world.store.epoch:  # the process died while the pool restarted
            if self.epoch != world.store.epoch:
                self._new_process()
            return
        self._catch_up(world.now)  # the load comes after every save sent before (the store's barrier)
        self.incarnation += 1
        checker = world.checker
        checker.supervision(ChildRestarted(path=self.path, incarnation=self.incarnation, restarts=self.incarnation - 1), world.now)
        checker.supervision(ChildExited(path=self.path, child_id=self.spec.name, incarnation=self.incarnation - 1, kind="crashed"), world.now)
        self._start_from_saved()
        while self.mailbox and self.up:
            self._handle(*self.mailbox.popleft())

    def _new_process(self) -> None:
        """The process died since the pool last ran: the next process's pool, from the saved state."""
        world = self.world
        self._catch_up(world.died_at)  # what the store committed before the process died stays
        world.checker.supervision(ChildExited(path=self.path, child_id=self.spec.name, incarnation=self.incarnation, kind="crashed"), world.now)
        self.epoch = world.store.epoch
        self.mailbox.clear()
        self.pending.clear()
        self.saving = self.dirty = self.urgent = False
        self.timer_at = None
        self.commits_at = world.now
        self.incarnation = 1
        world.checker.supervision(ChildStarted(path=self.path, incarnation=1), world.now)
        self._start_from_saved()

    def _start_from_saved(self) -> None:
        world = self.world
        state = restore(self.saved, self.spec)
        if self.bug == "forget_in_flight":
            state = msgspec.structs.replace(state, in_flight={})
        self.core.state = state
        self.up = True
        world.note(f"the credential pool started from its saved state ({len(state.in_flight)} lease(s) in flight)")
        world.checker.pool.reverted(state.keys, world.now)


def _unbenched(state: PoolState) -> PoolState:
    """The planted bug ``grant_benched``: the state as if no key were benched."""
    return msgspec.structs.replace(state, keys={k: msgspec.structs.replace(v, cooling_until=0.0) for k, v in state.keys.items()})


def _bench_of(key: KeyState, before: KeyState) -> KeyState:
    return msgspec.structs.replace(key, cooling_until=before.cooling_until, why=before.why)
