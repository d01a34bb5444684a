"""Toolsets: named groups of tools, with ``includes``, resolved to a list of tool names.

Every tool's own ``toolset`` name is a toolset of the tools that declare it. Composite
toolsets (the platform presets) include others. ``all`` and ``*`` mean every registered
tool. Unknown names are refused with a "did you mean" hint; cycles are refused.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping

from actors import UsageError

from ._registry import REGISTRY, Registry


@dataclasses.dataclass(frozen=True)
class Toolset:
    name: str
    description: str
    tools: tuple[str, ...] = ()
    includes: tuple[str, ...] = ()


_CORE = ("file", "terminal", "todo", "memory", "skills", "session_search", "code_execution", "delegation", "cronjob")

PRESETS: dict[str, Toolset] = {
    "hermes-cli": Toolset("hermes-cli", "Everything a person at a terminal uses, clarify included.", includes=(*_CORE, "clarify")),
    "hermes-api-server": Toolset("hermes-api-server", "The tools of an API server session (no interactive clarify).", includes=_CORE),
    # Chat platforms: the core tools; no clarify, since the gateway has no way to put the
    # model's question to the chat and wait for its answer inside the turn (the user's next
    # message is a new turn), so a clarify call would only wait out its deadline.
    "hermes-telegram": Toolset("hermes-telegram", "The tools of a Telegram chat's session (no interactive clarify).", includes=_CORE),
    "hermes-matrix": Toolset("hermes-matrix", "The tools of a Matrix room's session (no interactive clarify).", includes=_CORE),
    "hermes-webhook": Toolset("hermes-webhook", "The tools of a webhook route's session (nobody answers back: no clarify).", includes=_CORE),
    "hermes-gateway": Toolset("hermes-gateway", "The union of every chat platform's tools.", includes=("hermes-telegram", "hermes-matrix", "hermes-webhook")),
}


def _all_toolsets(registry: Registry, extra: Mapping[str, Toolset]) -> dict[str, Toolset]:
    found: dict[str, list[str]] = {}
    for name in registry.names():
        found.setdefault(registry.get(name).toolset, []).append(name)
    sets = {name: Toolset(name, f"the {name} tools", tools=tuple(tools)) for name, tools in found.items()}
    sets.update(extra)
    return sets


def resolve_toolsets(
    names: Iterable[str],
    *,
    enabled: Iterable[str] = (),
    disabled: Iterable[str] = (),
    registry: Registry = REGISTRY,
    presets: Mapping[str, Toolset] = PRESETS,
) -> list[str]:
    """The tool names the toolsets ``names`` stand for, plus ``enabled`` tools, minus ``disabled``.

    Raises:
        UsageError: an unknown toolset or tool (with a "did you mean"), or a cycle of includes.
    """
    sets = _all_toolsets(registry, presets)
    chosen: list[str] = []

    def add(tool: str) -> None:
        if tool not in chosen:
            chosen.append(tool)

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in ("all", "*"):
            for tool in registry.names():
                add(tool)
            return
        if name in path:
            msg = f"toolset include cycle: {' -> '.join((*path, name))}"
            raise UsageError(msg)
        toolset = sets.get(name)
        if toolset is None:
            if name in (*_CORE, "clarify") and name not in sets:
                return  # a preset names a toolset whose tools are not built (yet): nothing to add
            raise UsageError(_unknown("toolset", name, sets))
        for tool in toolset.tools:
            add(tool)
        for included in toolset.includes:
            visit(included, (*path, name))

    for name in names:
        visit(name, ())
    known = registry.names()
    for tool in enabled:
        if tool not in known:
            raise UsageError(_unknown("tool", tool, known))
        add(tool)
    for tool in disabled:
        if tool not in known:
            raise UsageError(_unknown("tool", tool, known))
    drop = set(disabled)
    return [t for t in chosen if t not in drop]


def _unknown(kind: str, name: str, known: Iterable[str]) -> str:
    candidates = sorted(set(known) | ({"all"} if kind == "toolset" else set()))
    close = difflib.get_close_matches(name, candidates, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown {kind} {name!r}{hint} (known: {', '.join(candidates) or 'none'})"
