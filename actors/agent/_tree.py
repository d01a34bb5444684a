"""The part of the supervision tree that holds conversations: the store and the sessions."""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from actors.credentials import PoolOptions, credential_specs
from actors.memory import memory_spec
from actors.store import HermesImportError, ReaderPool, StoreError, StoreReader, StoreWriter, import_hermes_store, is_database_url, settle_interrupted
from actors.store._owner import claim_store, refuse_beside_workers
from supervisor import ChildSpec, DynamicSupervisor, Intensity, Restart, Runtime

from ._deps_table import DepsTable
from ._providers import pool_specs
from ._sanitize import INTERRUPTED_RESULT
from ._session import SessionActor
from ._session_deps import SessionDeps

log = logging.getLogger(__name__)

SESSIONS_INTENSITY = Intensity(max_restarts=50, within=10.0)
"""Many sessions share one supervisor: one crashing session must not take the others down."""


def agent_specs(store_file: str | Path, deps: SessionDeps, platforms: Mapping[str, SessionDeps] | None = None) -> list[ChildSpec]:
    """Children for the root: ``/store`` (the writer), ``/credentials`` (a key pool per provider),
    ``/memory`` (the memory providers' actors), then ``/sessions`` (one actor per session; a chat
    platform's sessions with ``platforms[<name>]``, see ``_deps_table``)."""
    template = ChildSpec(id="session", actor=SessionActor, args=(sessions_argument(deps, platforms),), restart=Restart.TRANSIENT, shutdown=10.0)
    pools = PoolOptions(store_file=str(store_file), store_path=deps.store_path)
    memory = memory_spec(deps.memory, deps.home, deps.tool_settings.memory, Path(store_file), store_path=deps.store_path)
    return [
        ChildSpec(id="store", actor=StoreWriter, args=(str(store_file),), kwargs={"lock_hold": deps.node.lock_hold} if deps.node is not None else {}),
        credential_specs(pool_specs(deps), pools),
        memory,
        ChildSpec(id="sessions", actor=DynamicSupervisor, args=(template,), kwargs={"intensity": SESSIONS_INTENSITY}),
    ]


def sessions_argument(deps: SessionDeps, platforms: Mapping[str, SessionDeps] | None = None) -> SessionDeps | DepsTable:
    """The sessions' template argument: ``deps`` alone, or with one deps per chat platform."""
    return DepsTable(default=deps, platforms=dict(platforms)) if platforms else deps


def reader_opener(store_file: str | Path) -> Callable[[], Any]:
    """What ``SessionDeps.open_reader`` wants: a read-only connection to the store for a ``with``
    block; for a Postgres store, lent from a pool of kept ones (``ReaderPool``, closed when the
    runtime that uses it stops)."""
    location = str(store_file)
    return ReaderPool(location) if is_database_url(location) else functools.partial(StoreReader, location)


def settle_store(store_file: str | Path, deps: SessionDeps) -> SessionDeps:
    """Settle what a stopped process left open in ``store_file`` (before its writer starts);
    ``deps`` with the report in ``interrupted``. A cluster node (``deps.node``) spares the
    sessions whose live lease another node holds.

    A store that cannot be settled (not a store, locked, broken) is logged and left as it is:
    the writer, starting next, meets the same problem and reports it its own way.
    """
    try:
        report = settle_interrupted(store_file, result_text=INTERRUPTED_RESULT, node_id=deps.node.node_id if deps.node is not None else None)
    except StoreError as exc:
        log.warning("could not settle the turns a stopped process left open: %s", exc)
        return deps
    if report.sessions:
        calls = sum(s.settled_calls for s in report.sessions.values())
        turns = sum(len(s.turn_ids) for s in report.sessions.values())
        log.warning(
            "a stopped process left %d session(s) open: %d turn(s) failed as interrupted, %d tool call(s) given an unknown outcome (%.3f s)",
            len(report.sessions),
            turns,
            calls,
            report.seconds,
        )
    return dataclasses.replace(deps, interrupted=report.sessions)


def build_agent_runtime(
    store_file: str | Path,
    deps: SessionDeps,
    *,
    extra: Sequence[ChildSpec] = (),
    announce: Callable[[str], None] | None = None,
    platforms: Mapping[str, SessionDeps] | None = None,
    **options: Any,
) -> Runtime:
    """A runtime holding the store, the sessions and ``extra`` children (not started yet);
    ``platforms``: the deps of each chat platform's sessions (they share ``deps``'s hubs and clients).

    It claims the store file (``claim_store``) and, owning it, imports a ``state.db`` Hermes
    wrote (``import_hermes_store``: backup first, then in place; the line goes to the log and
    to ``announce``) and settles what a stopped process left open (``settle_store``) before
    any session can run; another live runtime on the same file keeps its turns. The claim and
    the model clients are released when the reactor stops. A ``--workers`` worker claims
    nothing (its parent holds the claim and imported the file) and settles as a cluster node;
    a cluster node that finds the claim held settles as one too (the other nodes' leased
    sessions spared).

    Raises:
        HermesImportError: a Hermes ``state.db`` could not be imported (it is left as it was).
        StoreServedByWorkers: a ``hermes serve --workers`` parent holds the claim.
    """
    if deps.store_file is None:
        deps = dataclasses.replace(deps, store_file=store_file if isinstance(store_file, str) and is_database_url(store_file) else Path(store_file))
    worker = deps.node is not None and deps.node.worker
    claim = None if worker else claim_store(store_file)
    if claim is None and not worker:
        refuse_beside_workers(store_file)
    if claim is not None:
        try:
            report = import_hermes_store(store_file)
        except HermesImportError:
            claim.close()
            raise
        if report is not None:
            log.warning("%s", report.line())
            if announce is not None:
                announce(report.line())
        deps = settle_store(store_file, deps)
    elif deps.node is not None:
        deps = settle_store(store_file, deps)
    else:
        log.info("another hermes process serves %s: its open turns are its own, nothing settled", store_file)
    # What was settled, and where the store is, is the same for every platform's sessions.
    platforms = {name: dataclasses.replace(each, store_file=deps.store_file, interrupted=deps.interrupted) for name, each in (platforms or {}).items()}
    runtime = Runtime([*agent_specs(store_file, deps, platforms), *extra], **options)
    runtime.reactor.at_stop(deps.clients.aclose)
    for each in (deps, *platforms.values()):
        if isinstance(each.open_reader, ReaderPool):
            runtime.reactor.at_stop(each.open_reader.aclose)
    if claim is not None:
        runtime.reactor.at_stop(claim.release)
    return runtime


def start_agent_runtime(store_file: str | Path, deps: SessionDeps, **options: Any) -> Runtime:
    """Start a runtime holding the store and the sessions (``build_agent_runtime``)."""
    return build_agent_runtime(store_file, deps, **options).start()
