"""A simulated session's load: the store barrier, what a reader finds, the checks on it.

As the session actor does, an incarnation lifts its store fence and reads only after the store
committed what was sent before (the writer's barrier); a simulated reader wait later, it is told
what the store holds (``Loaded``, built with the runtime's ``told_once``), and the compression
checker sees both the loaded transcript and the one the session recovered to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..agent._session_core import Loaded, told_once
from ._sim_supervisor import Incarnation

if TYPE_CHECKING:
    from ._sim_session import SimSession


def start_load(session: SimSession, incarnation: Incarnation) -> None:
    # As SessionActor: lift the fence, and load only after the store committed what was sent before (a barrier).
    world = session.world
    world.store.reopen(session.session_id)
    world.at(max(world.now, world.store.free_at) + world.dice.uniform("session", 0.0005, session.load_s), _load_done, session, incarnation)


def _load_done(session: SimSession, incarnation: Incarnation) -> None:
    if incarnation is session.current:
        prompt, messages, turns = session.world.store.load(session.session_id)
        if prompt is None:
            loaded = Loaded(exists=False, prompt=f"You are the simulated agent of session {session.session_id}.")
        else:
            running = tuple(t for t, status in turns.items() if status == "running")
            settled = told_once(session.interrupted, session.open_turns.seen)  # as SessionActor
            loaded = Loaded(exists=True, prompt=prompt, messages=tuple(messages), known_turns=tuple(turns), running=running, interrupted=settled)
            if session.world.store.checked:
                session.world.checker.compression.loaded(session.session_id, messages, session.world.now)
        session.handle(incarnation, loaded, False)
        state = incarnation.host.state
        if session.world.store.checked and incarnation is session.current and state is not None:
            session.world.checker.compression.recovered(session.session_id, state.transcript, session.world.now)
