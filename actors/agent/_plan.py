"""Plan a batch of tool calls: which run together, which wait.

Read-only calls run in parallel; calls scoped to a path run in parallel with calls on other
paths; everything else (a write without a declared path, an interactive tool, an unknown
tool) runs alone, in the model's order. A group never exceeds ``max_parallel``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any


@dataclasses.dataclass(frozen=True, slots=True)
class ToolTraits:
    """What the planner knows of a tool."""

    read_only: bool = False
    path_argument: str | None = None
    """The argument naming the one path this tool touches, if it is path-scoped."""
    exclusive: bool = False
    """Never run beside anything else (interactive tools, process control)."""


@dataclasses.dataclass(frozen=True, slots=True)
class PlannedCall:
    call_id: str
    name: str
    arguments: Mapping[str, Any]


def _path_of(call: PlannedCall, traits: ToolTraits) -> str | None:
    if traits.path_argument is None:
        return None
    value = call.arguments.get(traits.path_argument)
    return value if isinstance(value, str) and value else None


def plan_batches(calls: Sequence[PlannedCall], traits: Mapping[str, ToolTraits], *, max_parallel: int = 8) -> tuple[tuple[str, ...], ...]:
    """Split ``calls`` (in the model's order) into groups of call ids run one group at a time."""
    groups: list[list[str]] = []
    current: list[str] = []
    reads: set[str] = set()
    writes: set[str] = set()

    def close() -> None:
        nonlocal current
        if current:
            groups.append(current)
        current = []
        reads.clear()
        writes.clear()

    for call in calls:
        tool = traits.get(call.name)
        path = _path_of(call, tool) if tool is not None else None
        if tool is None or tool.exclusive or (not tool.read_only and path is None):
            close()
            groups.append([call.call_id])
            continue
        if tool.read_only:
            conflict = path is not None and path in writes
        else:
            conflict = path in writes or path in reads
        if conflict or len(current) >= max_parallel:
            close()
        current.append(call.call_id)
        if path is not None:
            (reads if tool.read_only else writes).add(path)
    close()
    return tuple(tuple(group) for group in groups)
