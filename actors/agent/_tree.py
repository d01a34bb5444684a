"""The part of the supervision tree that holds conversations: the store and the sessions."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

from actors.store import StoreReader, StoreWriter
from supervisor import ChildSpec, DynamicSupervisor, Intensity, Restart, Runtime

from ._session import SessionActor
from ._session_deps import SessionDeps

SESSIONS_INTENSITY = Intensity(max_restarts=50, within=10.0)
"""Many sessions share one supervisor: one crashing session must not take the others down."""


def agent_specs(store_file: str | Path, deps: SessionDeps) -> list[ChildSpec]:
    """Children for the root: ``/store`` (the writer) then ``/sessions`` (one actor per session)."""
    template = ChildSpec(id="session", actor=SessionActor, args=(deps,), restart=Restart.TRANSIENT, shutdown=10.0)
    return [
        ChildSpec(id="store", actor=StoreWriter, args=(str(store_file),)),
        ChildSpec(id="sessions", actor=DynamicSupervisor, args=(template,), kwargs={"intensity": SESSIONS_INTENSITY}),
    ]


def reader_opener(store_file: str | Path) -> functools.partial[Any]:
    """What ``SessionDeps.open_reader`` wants: opens a read-only connection to the store file."""
    return functools.partial(StoreReader, str(store_file))


def start_agent_runtime(store_file: str | Path, deps: SessionDeps, **options: Any) -> Runtime:
    """Start a runtime holding the store and the sessions; model clients close with the reactor."""
    if deps.store_file is None:
        deps = dataclasses.replace(deps, store_file=Path(store_file))
    runtime = Runtime(agent_specs(store_file, deps), **options)
    runtime.reactor.at_stop(deps.clients.aclose)
    return runtime.start()
