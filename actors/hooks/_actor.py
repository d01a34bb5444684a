"""``HookActor``: one per plugin (or gateway hook), under ``/hooks``; runs its callbacks.

A callback is user code: it may raise, hang or answer too much. It runs in this actor's own
thread, so a hang stalls only this actor; the dispatcher (``_dispatch.Hooks``) waits for the
answer with a deadline, and replaces an actor that missed one (the kernel abandons the stuck
thread after its shutdown timeout). A ``async def`` callback runs to completion on an event
loop of its own in this thread.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

from actors import Actor
from protocols._hooks import HookAnswered, InvokeHook

from ._plugins import PluginError
from ._unit import Unit, UnitSource, load_unit

log = logging.getLogger("hermes.hooks")

Loaded = Callable[[str, int, frozenset[str] | None, tuple[str, ...], str | None], None]
"""Told (from this thread) what a load gave: name, generation, events, warnings, error."""


class HookActor(Actor[InvokeHook]):
    def __init__(self, source: UnitSource, generation: int, loaded: Loaded) -> None:
        super().__init__()
        self.source = source
        self.generation = generation
        self.report = loaded
        self.unit: Unit | None = None

    def started(self) -> None:
        try:
            self.unit = load_unit(self.source)
        except PluginError as exc:
            log.warning("%s", exc)
            self.report(self.source.name, self.generation, frozenset(), (), str(exc))
            return
        for warning in self.unit.warnings:
            log.warning("%s", warning)
        self.report(self.source.name, self.generation, self.unit.events(), self.unit.warnings, None)

    def receive(self, message: InvokeHook) -> Any:
        if not isinstance(message, InvokeHook):
            return super().receive(message)
        name = self.source.name
        callbacks = self.unit.callbacks(message.event) if self.unit is not None else ()
        if not callbacks:
            message.reply_to.tell(HookAnswered(plugin=name, call=message.call, subscribed=False))
            return None
        values: list[Any] = []
        for callback in callbacks:
            try:
                value = callback(message.event, message.kwargs)
                if inspect.iscoroutine(value):
                    value = asyncio.run(value)
            except (Exception, SystemExit) as exc:
                message.reply_to.tell(HookAnswered(plugin=name, call=message.call, values=tuple(values), error=f"{type(exc).__name__}: {exc}"))
                return None
            values.append(value)
        message.reply_to.tell(HookAnswered(plugin=name, call=message.call, values=tuple(values)))
        return None
