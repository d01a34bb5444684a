"""``HookActor``: one per plugin (or gateway hook), under ``/hooks``; owns the plugin's lane.

A callback is user code: it may raise, hang or answer too much. The actor loads the plugin
(a fresh import), tells the dispatcher the loaded unit (well-behaved plugins' callbacks run in
the dispatcher's shared lane, ``_placement``) and runs the others in its own lane's thread
(``_lane.Lane``), which the dispatcher feeds directly: a call costs no trip through the
actor's mailbox. A hang stalls
only that lane. After a fault the dispatcher tells ``ReloadPlugin`` with a new lane: the actor
closes the old one (a stuck thread is abandoned: it never reads again), imports the plugin
afresh and starts the new lane; a restart of the plugin that costs no supervisor round trip.
The actor closes its lane on every exit (the shared lane closes when the reactor stops); restarted by
its supervisor, it reopens the lane the dispatcher feeds now (``current``) at that generation. An ``async def`` callback runs to completion on an
event loop of its own in the lane's thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from actors import Actor
from protocols import ExitKind
from protocols._hooks import ReloadPlugin

from ._lane import Lane
from ._plugins import PluginError
from ._unit import Unit, UnitSource, load_unit

log = logging.getLogger("hermes.hooks")

Current = Callable[[], tuple[Lane | None, int]]
"""The lane the dispatcher feeds for this plugin now, and its generation (None: the tree is stopping)."""
Loaded = Callable[[str, int, Unit | None, tuple[str, ...], str | None], None]
"""Told (from this thread) what a load gave: name, generation, the unit, warnings, error."""


class HookActor(Actor[ReloadPlugin]):
    def __init__(self, source: UnitSource, generation: int, loaded: Loaded, lane: Lane, current: Current | None = None) -> None:
        super().__init__()
        self.source = source
        self.generation = generation
        self.report = loaded
        self.lane = lane
        self.current = current

    def started(self) -> None:
        if self.lane.closed and self.current is not None:
            # A supervisor restart: the spec holds the first lane; the dispatcher feeds its latest one.
            lane, generation = self.current()
            if lane is not None:
                self.lane, self.generation = lane, generation
                self.lane.reopen()
        self._load()

    def receive(self, message: ReloadPlugin) -> Any:
        if not isinstance(message, ReloadPlugin):
            return super().receive(message)
        self.lane.close()
        self.lane, self.generation = message.lane, message.generation
        self._load()
        return None

    def _load(self) -> None:
        try:
            unit = load_unit(self.source)
        except PluginError as exc:
            log.warning("%s", exc)
            self.lane.start(None)
            self.report(self.source.name, self.generation, None, (), str(exc))
            return
        for warning in unit.warnings:
            log.warning("%s", warning)
        self.lane.start(unit)
        self.report(self.source.name, self.generation, unit, unit.warnings, None)

    def terminated(self, kind: ExitKind) -> None:
        self.lane.close()
