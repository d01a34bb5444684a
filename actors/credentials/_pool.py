"""The credential pool actor: one per provider, at ``/credentials/<provider>``.

It executes what the pure core (``_pool_core``) decides: it answers each :class:`LeaseKey` at
once (or, while the only usable keys are being refreshed, as soon as a refresh ends), counts
each :class:`ReportKey`, runs refresh commands as reactor waits (``run_process``, with a
deadline, at most one per key), and keeps its state in the store.

Persistence. At start the pool tells the store writer ``GetStoreStatistics`` and loads its
saved state only after that barrier, in a worker thread (a reactor wait): whatever a dead
incarnation sent the writer is committed by then. Leases and reports that arrive before the
load ends wait in the actor (never in a handler) and are handled right after it. Saves are
debounced: at most one ``SavePoolState`` is in flight, and changes made meanwhile are
coalesced into the next one. A change to a key's bench (a cooldown set or lifted, keys added
or removed) is saved at once, or as soon as the save in flight is acknowledged; grants, usage
counters and settled lease ids wait up to ``PoolOptions.save_delay`` seconds, so after the
*process* dies they may lag that much (the exactly-once rule of the core still holds for the
lease ids that were saved). Every exit of the pool, a crash included, sends a last save of
its current state, which the next incarnation's barrier orders before its load.

A crash never loses a lease: messages sent while the pool restarts wait in its address and
reach the next incarnation, and so do the requests a dying incarnation held (waiting for the
load or a refresh); a report for a lease granted before the crash is counted once (the core
recognises it, or counts it as unknown when the grant was never saved).

Invariant: no handler waits; the store, the load and the refresh commands answer as messages.
Invariant: a secret appears only in ``KeyLeased`` (hidden from ``repr``) and in this actor's
memory; it is never logged, saved or put in a status.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import trio

from actors import Actor, ActorPath, Address, HermesError, Registry
from actors._reactor import WaitHandle
from actors.store import StoreError
from actors.store._credentials_rows import read_pool_state
from protocols import ProcessResult, StoreFailed, StoreStatistics, SupervisorInbox, WaitFinished
from protocols._credentials import (
    KeyLeased,
    LeaseKey,
    NoKeyAvailable,
    PoolInbox,
    PoolSaveDue,
    PoolSaveTimedOut,
    PoolStateSaved,
    PoolStatus,
    PoolStatusRequest,
    ReloadPool,
    ReportKey,
    SavePoolState,
)
from protocols._store import GetStoreStatistics
from supervisor import ChildSpec, supervisor_spec

from ._keys import KeySpec, ProviderSpec
from ._pool_core import (
    Cooling,
    Granted,
    Pending,
    PoolState,
    bench_changed,
    decode_state,
    encode_state,
    lease,
    needs_refresh,
    refreshed,
    refreshing,
    reload,
    report,
    restore,
    snapshot,
)

log = logging.getLogger(__name__)

CREDENTIALS_PATH: ActorPath[SupervisorInbox] = ActorPath("/credentials")
"""The supervisor of the pools (``credential_specs``)."""

PoolStore = SavePoolState | GetStoreStatistics
"""What a pool tells the store writer."""


def pool_path(provider: str) -> ActorPath[PoolInbox]:
    """Where the pool of ``provider`` lives: ``/credentials/<provider>``."""
    return ActorPath(f"{CREDENTIALS_PATH.path}/{provider}")


def pool_address(registry: Registry, provider: str) -> Address[PoolInbox]:
    """The address of ``provider``'s pool.

    Raises:
        LookupError: no pool for ``provider`` was configured.
    """
    return registry.lookup(pool_path(provider))


@dataclasses.dataclass(frozen=True, slots=True)
class PoolOptions:
    """What every pool of a runtime shares."""

    store_file: str | os.PathLike[str] | None = None
    """The store file the pools load their state from; None: nothing is saved or loaded."""
    store_path: str = "/store"
    """The store writer's path (it must start before ``/credentials``)."""
    save_delay: float = 1.0
    """Seconds usage counters may wait before they are saved (debounce)."""
    save_timeout: float = 30.0
    """Seconds a save may stay unanswered before it is sent again."""
    load_timeout: float = 30.0
    """Seconds the load of the saved state may take; past it the pool starts fresh."""
    refresh_timeout: float = 30.0
    """Seconds a refresh command may run; past it its process group is killed and it failed."""
    clock: Callable[[], float] = time.time
    """Unix time (cooldowns are saved as Unix times, so they mean the same after a restart)."""


class ProviderCell:
    """A pool's current configuration, shared by all its incarnations, so that a reload
    (``ReloadPool``) outlives a restart of the pool."""

    __slots__ = ("spec",)

    def __init__(self, spec: ProviderSpec) -> None:
        self.spec = spec


def credential_specs(providers: Sequence[ProviderSpec], options: PoolOptions = PoolOptions()) -> ChildSpec:
    """The ``/credentials`` subtree: a supervisor with one pool per provider (one_for_one).

    Put it after the store writer among the root's children: pools save to it, and stop first.
    """
    children = [ChildSpec(id=provider.name, actor=CredentialPool, args=(ProviderCell(provider), options)) for provider in providers]
    return supervisor_spec(CREDENTIALS_PATH.path.strip("/"), children)


class CredentialPool(Actor[PoolInbox]):
    """The pool of one provider's API keys (lease, report, cooldown, refresh)."""

    def __init__(self, cell: ProviderCell, options: PoolOptions = PoolOptions()) -> None:
        super().__init__()
        self.cell = cell
        self.options = options
        self.state: PoolState | None = None
        """None until the saved state is loaded."""
        self._loading = False
        self._early: list[LeaseKey | ReportKey | ReloadPool | PoolStatusRequest] = []
        """What arrived before the load ended, in order."""
        self._parked: list[LeaseKey] = []
        """Leases waiting for a refresh to end (every usable key is being refreshed)."""
        self._secrets: dict[str, str] = {}
        """Fresh credentials from refresh commands, by key id: memory only."""
        self._refreshes: dict[int, str] = {}
        """Refresh waits running: wait id -> key id."""
        self._store: Address[PoolStore] | None = None
        self._dirty = False
        self._urgent = False
        self._saving: int | None = None
        """The number of the save in flight."""
        self._saves = 0
        self._save_timer: WaitHandle | None = None
        self._timers = 0
        self._overdue: WaitHandle | None = None

    @property
    def spec(self) -> ProviderSpec:
        return self.cell.spec

    # -- lifecycle ----------------------------------------------------------------------------

    def started(self) -> None:
        if self.options.store_file is None:
            self._loaded(None)
            return
        path: ActorPath[PoolStore] = ActorPath(self.options.store_path)
        self._store = self._context().registry.lookup(path)
        # Load only after the writer has committed what a dead incarnation sent (its last save).
        self._store.tell(GetStoreStatistics(reply_to=self.actor_ref))

    def receive(self, message: PoolInbox) -> Any:
        match message:
            case StoreStatistics() if self.state is None and not self._loading:
                self._loading = True
                assert self.options.store_file is not None
                store_file = os.fspath(self.options.store_file)
                self.start_wait(_load, store_file, self.spec.name, tag="load", timeout=self.options.load_timeout)
            case WaitFinished(tag="load"):
                self._on_load(message)
            case WaitFinished(tag="refresh"):
                self._on_refresh(message)
            case LeaseKey() | ReportKey() | ReloadPool() | PoolStatusRequest() if self.state is None:
                self._early.append(message)
            case PoolStatusRequest(reply_to=reply_to):
                status = self.status()
                _tell(reply_to, status)
                return status
            case LeaseKey():
                return self._lease(message)
            case ReportKey():
                self._set(report(self._state(), self.spec, message, self.options.clock()))
                self._start_refreshes()
            case ReloadPool(spec=spec):
                self._reload(spec)
            case PoolSaveDue(seq=seq) if seq == self._timers:
                self._save_timer = None
                if self._saving is None and self._dirty:
                    self._save()
            case PoolStateSaved(token=token) if token == str(self._saving):
                self._saved(ok=True)
            case StoreFailed(token=token, error=error) if token == str(self._saving):
                log.warning("%s: saving the pool's state failed (tried again in %g s): %s", self.path, self.options.save_delay, error)
                self._saved(ok=False)
            case PoolSaveTimedOut(seq=seq) if seq == self._saving:
                log.warning("%s: the store did not answer save %d within %g s; sending it again", self.path, seq, self.options.save_timeout)
                self._overdue = None
                self._saved(ok=False)
            case PoolSaveDue() | PoolStateSaved() | StoreFailed() | PoolSaveTimedOut() | StoreStatistics():
                pass  # stale: an earlier timer or save
            case _:
                return super().receive(message)
        return None

    def terminated(self, kind: str) -> None:
        # Requests this incarnation held (waiting for the load or a refresh) go back to the
        # address, which hands them to the next incarnation: a crash never loses a lease.
        for held in (*self._early, *self._parked):
            try:
                self.address.tell(held)
            except HermesError as exc:
                log.warning("%s: a %s it held was not handed on: %s", self.path, type(held).__name__, exc)
        self._early, self._parked = [], []
        # Whatever the exit (a crash included), send what the store does not have yet; the
        # next incarnation's barrier orders it before that incarnation's load.
        if self.state is None or self._store is None or not self._dirty:
            return
        try:
            self._store.tell(SavePoolState(provider=self.spec.name, state=encode_state(self.state), saved_at=self.options.clock()))
        except HermesError as exc:
            log.warning("%s: the pool's last state was not saved: %s", self.path, exc)

    def status(self) -> PoolStatus:
        """The pool as /health/detailed and the TUI show it (no secret)."""
        state = self.state if self.state is not None else restore(None, self.spec)
        return snapshot(state, self.spec, self.options.clock())

    # -- leases -------------------------------------------------------------------------------

    def _lease(self, request: LeaseKey) -> KeyLeased | NoKeyAvailable | None:
        self._start_refreshes()
        state, outcome = lease(self._state(), self.spec, request.lease_id, self.options.clock())
        self._set(state)
        answer: KeyLeased | NoKeyAvailable
        match outcome:
            case Granted(key_id=key_id):
                key = self._key(key_id)
                secret = self._secrets.get(key_id, key.api_key)
                answer = KeyLeased(lease_id=request.lease_id, provider=self.spec.name, key_id=key_id, api_key=secret, shown=key.shown)
            case Cooling(until=until, why=why, kind=kind):
                answer = NoKeyAvailable(lease_id=request.lease_id, provider=self.spec.name, until=until, reason=why, kind=kind)
            case Pending():
                self._parked.append(request)
                return None
        _tell(request.reply_to, answer)
        return answer

    def _key(self, key_id: str) -> KeySpec:
        return next(k for k in self.spec.keys if k.key_id == key_id)

    def _reload(self, spec: Any) -> None:
        if not isinstance(spec, ProviderSpec) or spec.name != self.spec.name:
            log.error("%s: ReloadPool needs a ProviderSpec named %r, got %r; ignored", self.path, self.spec.name, type(spec).__name__)
            return
        self.cell.spec = spec
        self._secrets = {k.key_id: self._secrets[k.key_id] for k in spec.keys if k.key_id in self._secrets and k.refresh_command}
        self._set(reload(self._state(), spec))
        log.info("%s: reloaded, %d key(s)", self.path, len(spec.keys))
        self._start_refreshes()
        self._retry_parked()

    # -- refresh ------------------------------------------------------------------------------

    def _start_refreshes(self) -> None:
        for key_id in needs_refresh(self._state(), self.spec, self.options.clock()):
            command = self._key(key_id).refresh_command
            assert command is not None
            handle = self.run_process(("/bin/sh", "-c", command), tag="refresh", timeout=self.options.refresh_timeout)
            self._refreshes[handle.wait_id] = key_id
            self._set(refreshing(self._state(), key_id))

    def _on_refresh(self, finished: WaitFinished) -> None:
        key_id = self._refreshes.pop(finished.wait_id, None)
        if key_id is None:
            return
        secret, problem = _fresh_secret(finished, self.options.refresh_timeout)
        if secret and any(k.key_id == key_id for k in self.spec.keys):
            self._secrets[key_id] = secret
        elif not secret:
            log.warning("%s: refreshing key %s failed: %s", self.path, key_id, problem)
        self._set(refreshed(self._state(), key_id, bool(secret), self.options.clock(), message=problem))
        self._retry_parked()

    def _retry_parked(self) -> None:
        parked, self._parked = self._parked, []
        for request in parked:
            self._lease(request)

    # -- load and save ------------------------------------------------------------------------

    def _on_load(self, finished: WaitFinished) -> None:
        text: str | None = None
        if finished.status == "ok":
            text = finished.value
        else:
            log.error(
                "%s: the saved pool state could not be read (%s %s); starting with fresh cooldowns and counters", self.path, finished.status, finished.error
            )
        self._loaded(text)

    def _loaded(self, text: str | None) -> None:
        saved: PoolState | None = None
        if text is not None:
            try:
                saved = decode_state(text)
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                log.error("%s: the saved pool state is unreadable (%s); starting fresh", self.path, exc)
        self.state = restore(saved, self.spec)
        if saved is not None and bench_changed(saved, self.state):
            self._dirty = self._urgent = True  # keys came or went since the save
            self._schedule_save()
        self._start_refreshes()
        early, self._early = self._early, []
        for message in early:
            self.receive(message)

    def _state(self) -> PoolState:
        assert self.state is not None, "the pool's state is used before it was loaded"
        return self.state

    def _set(self, new: PoolState) -> None:
        old, self.state = self.state, new
        if old is new or self._store is None:
            return
        self._dirty = True
        if old is None or bench_changed(old, new):
            self._urgent = True
        self._schedule_save()

    def _schedule_save(self) -> None:
        if not self._dirty or self._saving is not None or self._store is None:
            return  # an acknowledgement (or its timeout) calls again
        if self._urgent:
            self._save()
        elif self._save_timer is None:
            self._timers += 1
            self._save_timer = self.send_after(self.options.save_delay, PoolSaveDue(seq=self._timers))

    def _save(self) -> None:
        assert self._store is not None
        if self._save_timer is not None:
            self.cancel_wait(self._save_timer)
            self._save_timer = None
            self._timers += 1  # a timer already on its way is stale
        self._saves += 1
        self._saving = self._saves
        self._dirty = self._urgent = False
        command = SavePoolState(
            provider=self.spec.name, state=encode_state(self._state()), saved_at=self.options.clock(), token=str(self._saves), reply_to=self.actor_ref
        )
        try:
            self._store.tell(command)
        except HermesError as exc:
            log.warning("%s: the store refused the pool's state (%s); trying again in %g s", self.path, exc, self.options.save_delay)
            self._saved(ok=False)
            return
        self._overdue = self.send_after(self.options.save_timeout, PoolSaveTimedOut(seq=self._saves))

    def _saved(self, *, ok: bool) -> None:
        self._saving = None
        if self._overdue is not None:
            self.cancel_wait(self._overdue)
            self._overdue = None
        if not ok:
            # Not at once: a store that refuses now would be asked in a tight loop.
            self._dirty = True
            self._urgent = False
        self._schedule_save()


async def _load(store_file: str, provider: str) -> str | None:
    """The saved state of ``provider``'s pool, read in a worker thread."""
    delay = 0.01
    while True:
        try:
            return await trio.to_thread.run_sync(read_pool_state, store_file, provider)
        except StoreError as exc:
            # The writer answered the barrier, so the file exists; a schema migration by
            # another process may still hold it. The wait's deadline bounds the retries.
            log.debug("credential pool %s: store not readable yet: %s", provider, exc)
            await trio.sleep(delay)
            delay = min(0.5, delay * 2)


def _fresh_secret(finished: WaitFinished, timeout: float) -> tuple[str, str]:
    """The new credential a refresh command printed (first line of stdout), or why there is none.

    The output is never logged: it is the secret.
    """
    if finished.status == "timeout":
        return "", f"its refresh command did not finish within {timeout:g} s"
    if finished.status != "ok" or not isinstance(finished.value, ProcessResult):
        return "", f"its refresh command could not run ({finished.status}: {finished.error})"
    result = finished.value
    if result.returncode != 0:
        return "", f"its refresh command exited with status {result.returncode}"
    lines = result.stdout.decode(errors="replace").strip().splitlines()
    if not lines or not lines[0].strip():
        return "", "its refresh command printed nothing"
    return lines[0].strip(), ""


def _tell(reply_to: Any, message: Any) -> None:
    if reply_to is None:
        return
    try:
        reply_to.tell(message)
    except Exception as exc:
        # The caller is gone (a session that stopped); the pool's state stands.
        log.debug("could not deliver %s to %r: %s", type(message).__name__, reply_to, exc)
