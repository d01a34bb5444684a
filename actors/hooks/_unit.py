"""A loaded hook unit: a plugin or a gateway hook, as callbacks per event."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal

from ._gateway import gateway_events, load_handler
from ._names import gateway_matches
from ._plugins import PluginManifest, load

Callback = Callable[[str, dict[str, Any]], Any]
Kind = Literal["plugin", "gateway"]


@dataclasses.dataclass(frozen=True, slots=True)
class UnitSource:
    """What a hook actor loads (again at each restart)."""

    kind: Kind
    manifest: PluginManifest

    @property
    def name(self) -> str:
        return self.manifest.name if self.kind == "plugin" else f"hook:{self.manifest.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class Unit:
    source: UnitSource
    subscriptions: dict[str, tuple[Callback, ...]]
    warnings: tuple[str, ...] = ()

    def callbacks(self, event: str) -> tuple[Callback, ...]:
        if self.source.kind == "plugin":
            return self.subscriptions.get(event, ())
        return tuple(cb for pattern, cbs in self.subscriptions.items() if gateway_matches(pattern, event) for cb in cbs)

    def events(self) -> frozenset[str]:
        return frozenset(self.subscriptions)


def _keyword(callback: Callable[..., Any]) -> Callback:
    return lambda _event, kwargs: callback(**kwargs)


def _positional(handle: Callable[..., Any]) -> Callback:
    return lambda event, kwargs: handle(event, kwargs)


def load_unit(source: UnitSource) -> Unit:
    """Import the unit's code afresh (``PluginError`` when it cannot be)."""
    if source.kind == "plugin":
        context = load(source.manifest)
        subscriptions = {event: tuple(_keyword(cb) for cb in cbs) for event, cbs in context.hooks.items()}
        return Unit(source, subscriptions, tuple(context.warnings))
    events, warnings = gateway_events(source.manifest)
    handle = _positional(load_handler(source.manifest))
    return Unit(source, {event: (handle,) for event in events}, tuple(warnings))
