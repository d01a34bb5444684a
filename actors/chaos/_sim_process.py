"""Process death in the simulated world: everything in memory gone at once, the store's commits kept.

What ``kill -9`` of ``hermes serve`` does, and what the next start does about it. At a
moment the dice choose, every session incarnation dies without running any exit code,
commits the store had not made yet are lost (the store keeps only what it committed), and
messages sent while the process is down wait for the next one (a client retrying). The next
process first settles the store as ``actors.store.settle_interrupted`` does (every running
turn fails with reason ``interrupted``; every unanswered call of those turns gets one
result, never a re-run), then serves: each settled session is started (a client
reconnecting to its stream) and tells what was settled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocols import ChatMessage

from ..agent._sanitize import INTERRUPTED_RESULT, sanitize

if TYPE_CHECKING:
    from ._sim_store import SimStore
    from ._sim_world import World


def schedule_process_death(world: World) -> None:
    crashes = world.plan.crashes
    if world.dice.fault("crash", "process", crashes.process):
        world.at(world.dice.uniform("crash", 0.0, crashes.process_window_s), _die, world)


def _die(world: World) -> None:
    world.note("fault: the process died (kill -9)")
    world.down = True
    store = world.store
    store.epoch += 1
    store.free_at = world.now
    store.fenced.clear()  # the writer's fences lived in its memory
    for session in world.sessions.values():
        session.process_died()
        world.checker.process_died(session.session_id, store.turns.get(session.session_id, {}), world.now)
    world.at(world.now + world.plan.crashes.process_down_s, _start, world)


def _start(world: World) -> None:
    report = settle(world.store)
    world.note(f"the process started again; settled {len(report)} session(s)")
    world.down = False
    for session in world.sessions.values():
        session.process_started(report.get(session.session_id))


def settle(store: SimStore) -> dict[str, tuple[tuple[str, ...], int]]:
    """The store's settle at start: session id -> (interrupted turns, calls given a result)."""
    report: dict[str, tuple[tuple[str, ...], int]] = {}
    for session_id, turns in store.turns.items():
        running = tuple(t for t, status in turns.items() if status == "running")
        if not running:
            continue
        for turn_id in running:
            turns[turn_id] = "failed"
        messages = store.segment(session_id)  # the newest segment: what the next load reads
        settled, added = sanitize(messages, missing=INTERRUPTED_RESULT)
        results: list[ChatMessage] = [m for m in settled if m not in messages] if added else []
        store.settled(session_id, results)
        report[session_id] = (running, len(results))
    return report
