"""The life of one MCP server's link, as a pure state: what the actor decides on each report.

Phases: ``starting`` (the first link is being opened), ``ready`` (a link is up, its tools are
offered), ``restarting`` (the link broke after it had been up: its tools stay offered and answer
at once that the server is restarting), ``failed`` (the server never came up: no tools, the
error says why; it is retried with backoff all the same), ``invalid`` (the entry cannot run).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from protocols import McpToolInfo

Phase = Literal["starting", "ready", "restarting", "failed", "invalid"]

BACKOFF_FIRST = 0.25
"""Seconds before the first retry."""
BACKOFF_CAP = 60.0
HEALTHY_AFTER = 30.0
"""A link up this long counts as healthy: the next break starts the backoff from the beginning."""


@dataclasses.dataclass(frozen=True, slots=True)
class LinkState:
    phase: Phase = "starting"
    attempt: int = 0
    """The number of the current (or last) link."""
    failures: int = 0
    """Links in a row that broke before being healthy (or never came up)."""
    restarts: int = 0
    """Links opened after the first."""
    error: str = ""
    """Why the last link broke, or why the entry cannot run."""
    server: str = ""
    """What the server calls itself (name and version)."""
    tools: tuple[McpToolInfo, ...] = ()
    """The server's tools (all of them; the filter is applied where they are offered)."""
    up_since: float | None = None


def invalid(problem: str) -> LinkState:
    return LinkState(phase="invalid", error=problem)


def opening(state: LinkState) -> LinkState:
    """A new link starts."""
    attempt = state.attempt + 1
    return dataclasses.replace(state, attempt=attempt, restarts=state.restarts + (attempt > 1))


def link_up(state: LinkState, *, server: str, tools: tuple[McpToolInfo, ...], now: float) -> LinkState:
    return dataclasses.replace(state, phase="ready", server=server, tools=tools, up_since=now, error="")


def tools_listed(state: LinkState, tools: tuple[McpToolInfo, ...]) -> LinkState:
    return dataclasses.replace(state, tools=tools)


def link_down(state: LinkState, *, error: str, now: float) -> tuple[LinkState, float]:
    """The link broke (or never came up): the new state, and the seconds to wait before the next."""
    healthy = state.up_since is not None and now - state.up_since >= HEALTHY_AFTER
    failures = 1 if healthy else state.failures + 1
    was_up = state.phase in ("ready", "restarting")
    phase: Phase = "restarting" if was_up else "failed"
    delay = min(BACKOFF_CAP, BACKOFF_FIRST * 2 ** (failures - 1))
    return dataclasses.replace(state, phase=phase, failures=failures, error=error, up_since=None), delay
