"""Messages of the MCP server actors: one actor per configured MCP server, under ``/tools/mcp``.

The actor owns its server's link: a reactor wait that starts (or reaches) the server, opens an
MCP session and lists its tools. The wait reports what it learns as messages
(:class:`McpLinkUp`, :class:`McpToolsListed`) and ends when the link breaks; the actor then
waits its backoff (:class:`ReconnectMcp`, its own timer) and opens the next link.
"""

from __future__ import annotations

from typing import Any, Literal

from ._base import Message
from ._reactor import WaitFinished

McpToolKind = Literal["tool", "list_resources", "read_resource", "list_prompts", "get_prompt"]


class McpToolInfo(Message, frozen=True, kw_only=True):
    """One tool as an MCP server lists it (``tools/list``)."""

    name: str
    """The server's own name of the tool (the agent sees ``mcp_<server>_<name>``)."""
    description: str = ""
    input_schema: dict[str, Any]
    """The JSON schema of the arguments object, as the server sent it."""
    read_only: bool = False
    """The server marked it read-only (``annotations.readOnlyHint``): it may run beside others."""
    output_schema: dict[str, Any] | None = None
    """The JSON schema of its structured results (``outputSchema``), if it declares one: each
    result is checked against it (``actors.agent._json_schema``: in bounded time)."""
    kind: McpToolKind = "tool"
    """``tool``: the server's own tool; the others are ours, over its resources or prompts."""


class McpLinkUp(Message, frozen=True, kw_only=True):
    """Link ``attempt`` is initialised and listed its tools."""

    attempt: int
    server: str = ""
    """What the server calls itself (``serverInfo.name`` and version)."""
    tools: tuple[McpToolInfo, ...]


class McpToolsListed(Message, frozen=True, kw_only=True):
    """The server said its tools changed (``notifications/tools/list_changed``); this is the new list."""

    attempt: int
    tools: tuple[McpToolInfo, ...]


class ReconnectMcp(Message, frozen=True, kw_only=True):
    """The actor's timer: the backoff after link ``attempt`` ended is over."""

    attempt: int


McpServerInbox = McpLinkUp | McpToolsListed | ReconnectMcp | WaitFinished
"""What an MCP server actor takes: its link's reports, its reconnect timer, its wait's end."""
