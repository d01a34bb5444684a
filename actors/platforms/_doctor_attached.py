"""``hermes doctor``'s checks of what config.yaml attaches to the runtime: the sessions' settings
(toolsets, limits, working directory), chat platforms, MCP servers and shell hooks.

Local checks read files and look up programs; with the network, a Telegram token is tried with
``getMe`` and each MCP server is started (or reached) once and asked for its tools. Nothing here
writes to the home or consents to a hook.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from actors.config import ConfigError, HermesConfig, LoadedConfig, read_dotenv

from ._doctor import PROBE_TIMEOUT, Check

if TYPE_CHECKING:
    from actors.tools.mcp import McpSettings


def attached_checks(home: Path, env: Mapping[str, str], loaded: LoadedConfig, *, network: bool) -> Iterator[Check]:
    """The sessions' settings, then each platform, MCP server and shell hook, one line each."""
    yield _sessions(home, env, loaded)
    secrets = {**read_dotenv(home / ".env"), **env}
    yield from _platforms(loaded.config, secrets, home, network=network)
    yield from _mcp_servers(loaded.config, network=network)
    yield from _hooks(loaded.config, home)


def _sessions(home: Path, env: Mapping[str, str], loaded: LoadedConfig) -> Check:
    from ._runtime_deps import configured_deps
    from ._serve import API_PLATFORM

    try:
        deps = configured_deps(home, env, loaded, API_PLATFORM)
    except ConfigError as exc:
        first, _, rest = str(exc).partition("\n")
        return Check("sessions", "fail", first, rest or f"edit {loaded.file}")
    limit = "no cap" if deps.config.max_iterations >= 1_000_000 else f"{deps.config.max_iterations} model calls"
    return Check("sessions", "ok", f"{len(deps.tools)} tools for hermes serve, turns of up to {limit}, starting in {deps.workdir}")


def _platforms(config: HermesConfig, secrets: Mapping[str, str], home: Path, *, network: bool) -> Iterator[Check]:
    from actors.agent import HubRegistry

    from .gateway import load_gateway

    try:
        gateway = load_gateway(config, secrets, home=home, hubs=HubRegistry())
    except ConfigError as exc:
        yield Check("platforms", "fail", str(exc), "fix platforms: in config.yaml or the token in .env")
        return
    for note in gateway.notes:
        yield Check("platforms", "warn", note, "remove the entry or set enabled: false")
    for spec in gateway.specs:
        name = f"platform {spec.id}"
        if spec.id == "telegram" and network:
            yield _telegram(name, str(spec.kwargs["base_url"]), str(spec.kwargs["token"]))
        elif spec.id == "webhook":
            routes = spec.kwargs["routes"]
            yield Check(name, "ok", f"enabled on {spec.kwargs['host']}:{spec.kwargs['port']}, {len(routes)} route(s)")
        else:
            yield Check(name, "ok", "enabled" + ("" if network else " (token not tried: --offline)"))


def _telegram(name: str, base_url: str, token: str) -> Check:
    url = f"{base_url.rstrip('/')}/bot{token}/getMe"
    try:
        with httpx.Client(timeout=PROBE_TIMEOUT) as client:
            answer = client.post(url, json={})
    except httpx.HTTPError as exc:
        return Check(name, "fail", f"{base_url} does not answer ({type(exc).__name__})", "check the network, or platforms.telegram.extra.base_url")
    if answer.status_code in (401, 404):
        return Check(
            name, "fail", "Telegram refused the bot token (revoked or mistyped)", "get a new token from @BotFather and put it in TELEGRAM_BOT_TOKEN in .env"
        )
    if answer.status_code != 200:
        return Check(name, "warn", f"getMe answered {answer.status_code}", "try again later; Telegram may be having an outage")
    try:
        username = answer.json()["result"]["username"]
    except (ValueError, KeyError, TypeError):
        username = "?"
    return Check(name, "ok", f"the token works (@{username})")


def _mcp_servers(config: HermesConfig, *, network: bool) -> Iterator[Check]:
    if not config.mcp_servers:
        return
    from actors.tools.mcp._settings import mcp_settings  # the config's own reading, without the SDK

    for settings in mcp_settings(config.mcp_servers):
        name = f"MCP server {settings.name}"
        if settings.problem:
            yield Check(name, "fail", settings.problem, "fix its entry under mcp_servers: in config.yaml")
            continue
        if settings.transport == "stdio":
            program = settings.command
            if shutil.which(program) is None and not os.access(program, os.X_OK):
                yield Check(
                    name, "fail", f"{program} is not installed or not on PATH", f"install it, or give its full path in mcp_servers.{settings.name}.command"
                )
                continue
        if not network:
            yield Check(name, "ok", f"{settings.transport}: {settings.target} (not started: --offline)")
            continue
        yield _mcp_probe(name, settings)


def _mcp_probe(name: str, settings: McpSettings) -> Check:
    import trio

    from actors.tools.mcp._cli import probe

    outcome = trio.run(probe, settings)
    if isinstance(outcome, str):
        return Check(name, "fail", f"did not come up: {outcome}", f"run 'hermes mcp test {settings.name}' to see it start")
    return Check(name, "ok", f"up ({outcome.server}), {len(outcome.tools)} tools")


def _hooks(config: HermesConfig, home: Path) -> Iterator[Check]:
    if not config.hooks:
        return
    from actors.hooks._consent import drift, find, load_approvals, script_of
    from actors.hooks._shell import shell_hooks

    hooks, warnings = shell_hooks(config.hooks)
    for warning in warnings:
        yield Check("hooks", "warn", warning, "fix the hooks: block in config.yaml")
    approvals = load_approvals(home)
    for hook in hooks:
        name = f"hook {hook.event}"
        script = script_of(hook)
        if script is not None and not script.is_file():
            yield Check(name, "fail", f"{hook.command}: the script {script} does not exist", "fix the command, or remove the hook")
        elif script is not None and not os.access(script, os.X_OK):
            yield Check(name, "fail", f"{hook.command}: the script {script} is not executable", f"chmod +x {script}")
        elif (approval := find(approvals, hook)) is None:
            yield Check(
                name, "warn", f"{hook.command}: not allowed yet, so it does not run", "start hermes serve --accept-hooks once, or answer yes on a terminal"
            )
        elif (changed := drift(approval, hook)) is not None:
            yield Check(name, "warn", f"{hook.command}: {changed}", "hermes hooks doctor shows it; allow it again after reading it")
        else:
            yield Check(name, "ok", f"{hook.command} (allowed)")
