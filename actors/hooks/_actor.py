"""``HookActor``: one per plugin (or gateway hook), under ``/hooks``; owns the plugin's lane.

A callback is user code: it may raise, hang or answer too much. The actor loads the plugin
(a fresh import at each start) and runs its callbacks in its lane's thread (``_lane.Lane``),
which the dispatcher feeds directly: a call costs no trip through the actor's mailbox. A hang
stalls only that lane; the dispatcher (``_dispatch.Hooks``) waits for the answers with a
deadline and replaces an actor whose lane missed one (the stuck thread is abandoned). The
actor closes its lane on every exit. An ``async def`` callback runs to completion on an event
loop of its own in the lane's thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from actors import Actor
from protocols import ExitKind

from ._lane import Lane
from ._plugins import PluginError
from ._unit import UnitSource, load_unit

log = logging.getLogger("hermes.hooks")

Loaded = Callable[[str, int, frozenset[str] | None, tuple[str, ...], str | None], None]
"""Told (from this thread) what a load gave: name, generation, events, warnings, error."""


class HookActor(Actor[object]):
    def __init__(self, source: UnitSource, generation: int, loaded: Loaded, lane: Lane) -> None:
        super().__init__()
        self.source = source
        self.generation = generation
        self.report = loaded
        self.lane = lane

    def started(self) -> None:
        try:
            unit = load_unit(self.source)
        except PluginError as exc:
            log.warning("%s", exc)
            self.lane.start(None)
            self.report(self.source.name, self.generation, frozenset(), (), str(exc))
            return
        for warning in unit.warnings:
            log.warning("%s", warning)
        self.lane.start(unit)
        self.report(self.source.name, self.generation, unit.events(), unit.warnings, None)

    def terminated(self, kind: ExitKind) -> None:
        self.lane.close()
