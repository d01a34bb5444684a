"""``hermes mcp list`` (the configured servers) and ``hermes mcp test <name>`` (connect, list the tools)."""

from __future__ import annotations

import time
from pathlib import Path

import trio

from actors.config import ConfigError, hermes_home, load_config
from protocols import McpLinkUp, Message

from ._link import Link, McpLinkBroken, run_link
from ._naming import chosen, tool_name
from ._settings import McpSettings, mcp_settings


def run_mcp(action: str, *, home: Path | None, name: str = "") -> int:
    home = home or hermes_home()
    try:
        servers = load_config(home).config.mcp_servers
    except ConfigError as exc:
        print(f"hermes mcp: {exc}")
        return 2
    if action == "list":
        if not servers:
            print(f"No MCP servers in {home / 'config.yaml'} (add them under mcp_servers:).")
            return 0
        enabled = {s.name for s in mcp_settings(servers)}
        for key, entry in servers.items():
            where = entry.url or " ".join((entry.command, *entry.args))
            kind = "http " if entry.url else "stdio"
            print(f"{key:<20} {kind} {'enabled ' if key in enabled else 'disabled'} {where}")
        return 0
    found = {s.name: s for s in mcp_settings(servers)}
    if name not in found:
        known = ", ".join(found) or "none enabled"
        print(f"hermes mcp: no enabled MCP server named {name!r} in {home / 'config.yaml'} (known: {known})")
        return 2
    return _test(found[name])


def _test(settings: McpSettings) -> int:
    if settings.problem:
        print(f"hermes mcp: {settings.problem}")
        return 2
    print(f"Connecting to {settings.name} ({settings.transport}: {settings.target}) ...", flush=True)
    start = time.monotonic()
    outcome = trio.run(probe, settings)
    if isinstance(outcome, str):
        print(f"MCP server {settings.name} failed: {outcome}")
        return 1
    offered = {t.name for t in chosen(outcome.tools, settings.include, settings.exclude)}
    print(f"MCP server {settings.name} is up ({outcome.server}) in {time.monotonic() - start:.2f} s; {len(outcome.tools)} tools:")
    for tool in outcome.tools:
        marks = ("read-only " if tool.read_only else "") + ("" if tool.name in offered else "(excluded) ")
        print(f"  {tool_name(settings.name, tool.name):<40} {marks}{tool.description.strip().splitlines()[0] if tool.description.strip() else ''}")
    return 0


async def probe(settings: McpSettings) -> McpLinkUp | str:
    """Open one link, take its tool list and close it: what it reported, or why it failed."""
    link = Link(settings.name, 1)
    reports: list[Message] = []

    def report(message: Message) -> None:
        reports.append(message)
        link.break_link("probe done")

    with trio.move_on_after(settings.connect_timeout + 5.0):
        try:
            await run_link(settings, link, report)
        except McpLinkBroken:
            pass
    up = next((r for r in reports if isinstance(r, McpLinkUp)), None)
    return up if up is not None else (link.down or f"no answer within {settings.connect_timeout:g} s")
