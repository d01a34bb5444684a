"""Reloading config.yaml in a running runtime (SIGHUP to ``hermes serve``, ``/reload`` in ``hermes chat``).

The file is read and validated as at start; a file that does not load changes nothing (the
running settings stay, and the error says why). Otherwise :func:`actors.config._reload.reload_plan`
says which changed sections apply; the sessions' shared dependencies are rebuilt from the new
file, keeping everything a restart would be needed for (the model, its providers and their
pools, the stores, the hubs); with the gateway, every chat platform's deps too, all replaced in
one message. ``/sessions`` starts new sessions with them from now on and tells
each running session :class:`RefreshSettings`: it starts again from the store with them once no
turn runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from actors import HermesError
from actors.agent import SESSIONS_PATH, ConfigError, SessionDeps, sessions_argument
from actors.config import LoadedConfig, load_config
from actors.config._reload import reload_plan
from protocols import RefreshSettings, ReplaceTemplate
from supervisor import Runtime

from ._runtime_deps import GATEWAY_PLATFORMS, Platform, configured_deps

REPLACE_TIMEOUT = 10.0


@dataclasses.dataclass(frozen=True)
class Running:
    """What a runtime was configured with."""

    loaded: LoadedConfig
    deps: SessionDeps
    platform: Platform
    yolo: bool = False
    gateway: Mapping[str, SessionDeps] = dataclasses.field(default_factory=dict)
    """The deps of each chat platform's sessions (``hermes serve`` with the gateway), by platform name."""


def reloaded(home: Path, env: Mapping[str, str], running: Running, runtime: Runtime) -> tuple[Running, list[str]]:
    """Read config.yaml again and apply what may change while running; the new state and what to say."""
    try:
        loaded = load_config(home, env)
        fresh = configured_deps(home, env, loaded, running.platform, yolo=running.yolo, hubs=running.deps.hubs, clients=running.deps.clients)
        fresh_gateway = {
            name: configured_deps(home, env, loaded, GATEWAY_PLATFORMS[name], yolo=running.yolo, hubs=old.hubs, clients=old.clients)
            for name, old in running.gateway.items()
        }
    except ConfigError as exc:
        return running, [f"config.yaml not reloaded, the running settings stay: {exc}"]
    plan = reload_plan(running.loaded.config, loaded.config)
    lines = [*plan.lines(str(loaded.file)), *loaded.warning_lines()]
    if not plan.applied:
        return dataclasses.replace(running, loaded=loaded), lines
    deps = merged(running.deps, fresh)
    gateway = {name: merged(old, fresh_gateway[name]) for name, old in running.gateway.items()}
    # Asked, not told: once answered, every running session has RefreshSettings in its inbox
    # ahead of any message sent after this line, so its next turn runs on the new settings.
    # Every platform's deps are replaced in the one template argument, together.
    try:
        runtime.lookup(SESSIONS_PATH).ask(ReplaceTemplate(args=(sessions_argument(deps, gateway),), notify=RefreshSettings()), timeout=REPLACE_TIMEOUT)
    except (HermesError, TimeoutError) as exc:
        return running, [f"config.yaml not reloaded: the sessions' supervisor did not take the new settings ({exc}); try again"]
    return Running(loaded=loaded, deps=deps, platform=running.platform, yolo=running.yolo, gateway=gateway), lines


def merged(old: SessionDeps, fresh: SessionDeps) -> SessionDeps:
    """``old`` with what a reload may change taken from ``fresh``: the tools and their settings,
    approvals, the machine's limits and compression, prices and prompt caching. The providers,
    their deadlines and everything the tree holds stay ``old``'s.

    ``old`` is what the command built, before the tree settled the store: a session loaded for
    the first time after a reload does not announce an interruption settled at start (its
    transcript is settled all the same)."""
    config = dataclasses.replace(fresh.config, providers=old.config.providers, turn_timeout=old.config.turn_timeout, model_timeout=old.config.model_timeout)
    tools = fresh.tools
    over = getattr(old.tools, "over", None)  # MCP servers' tools (actors.tools.mcp.LiveTools): kept, over the new built-in ones
    if over is not None:
        tools = over(fresh.tools)
        config = dataclasses.replace(config, traits=tools.traits())
    model = dataclasses.replace(old.model, prices=fresh.model.prices, caching=fresh.model.caching)
    return dataclasses.replace(
        old,
        tools=tools,
        config=config,
        model=model,
        approvals=fresh.approvals,
        tool_settings=fresh.tool_settings,
        delegation=fresh.delegation,
        workdir=fresh.workdir,
        nudges=fresh.nudges,
    )
