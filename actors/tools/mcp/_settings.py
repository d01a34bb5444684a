"""What the runtime needs of one ``mcp_servers:`` entry, checked: :class:`McpSettings`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Literal

from actors.config import McpServer

Transport = Literal["stdio", "http"]


@dataclasses.dataclass(frozen=True, slots=True)
class McpSettings:
    """One MCP server as configured (``mcp_servers.<name>``)."""

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    cwd: str = ""
    url: str = ""
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    timeout: float = 120.0
    """Seconds a tool call may take."""
    connect_timeout: float = 60.0
    """Seconds to start or reach the server, initialise and list its tools."""
    include: frozenset[str] = frozenset()
    exclude: frozenset[str] = frozenset()
    resources: bool = True
    """Offer the server's resources as tools (``tools.resources``)."""
    prompts: bool = True
    sampling_enabled: bool = False
    """The server may ask our model for completions (``sampling.enabled``)."""
    sampling_model: str = ""
    sampling_cap: int = 4096
    sampling_timeout: float = 30.0
    problem: str = ""
    """Why this entry cannot run (no command and no url, or both); empty when it can."""

    @property
    def transport(self) -> Transport:
        return "http" if self.url else "stdio"

    @property
    def target(self) -> str:
        """Where the server is, for people: its command line or its URL."""
        return self.url or " ".join((self.command, *self.args))


def mcp_settings(servers: Mapping[str, McpServer]) -> list[McpSettings]:
    """The enabled servers of ``mcp_servers:``, in the file's order (a bad entry carries its ``problem``)."""
    found: list[McpSettings] = []
    for name, entry in servers.items():
        if not entry.enabled:
            continue
        problem = ""
        if entry.command and entry.url:
            problem = f"mcp_servers.{name}: give either command (a stdio server) or url (a streamable HTTP server), not both"
        elif not entry.command and not entry.url:
            problem = f"mcp_servers.{name}: give command (a stdio server) or url (a streamable HTTP server)"
        found.append(
            McpSettings(
                name=name,
                command=entry.command,
                args=tuple(entry.args),
                env=dict(entry.env),
                cwd=entry.cwd,
                url=entry.url,
                headers=dict(entry.headers),
                timeout=entry.timeout,
                connect_timeout=entry.connect_timeout,
                include=frozenset(entry.tools.include),
                exclude=frozenset(entry.tools.exclude),
                resources=entry.tools.resources,
                prompts=entry.tools.prompts,
                sampling_enabled=entry.sampling.enabled,
                sampling_model=entry.sampling.model,
                sampling_cap=entry.sampling.max_tokens_cap,
                sampling_timeout=entry.sampling.timeout,
                problem=problem,
            )
        )
    return found
