"""How an MCP server's tools appear to the model: names, the chosen subset, traits. Pure."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from actors.agent import ToolTraits
from protocols import McpToolInfo

MAX_NAME = 64
"""OpenAI's limit on a function name."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def tool_name(server: str, tool: str) -> str:
    """``mcp_<server>_<tool>``, with every character a function name may not hold made ``_``;
    past 64 characters, cut and ended with a short hash of the whole name (still unique)."""
    name = f"mcp_{_UNSAFE.sub('_', server)}_{_UNSAFE.sub('_', tool)}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.blake2b(name.encode(), digest_size=4).hexdigest()
    return f"{name[: MAX_NAME - 9]}_{digest}"


def chosen(tools: Iterable[McpToolInfo], include: frozenset[str], exclude: frozenset[str]) -> tuple[McpToolInfo, ...]:
    """The tools the agent sees: only ``include`` when it is given, never ``exclude``."""
    return tuple(t for t in tools if (not include or t.name in include) and t.name not in exclude)


def traits(tool: McpToolInfo) -> ToolTraits:
    """Never parallel unless the server marked the tool read-only."""
    return ToolTraits(read_only=tool.read_only)


def describe(server: str, tool: McpToolInfo) -> str:
    """The description the model reads: the server's, prefixed with where the tool lives."""
    text = tool.description.strip() or f"The {tool.name} tool."
    return f"[MCP server {server}] {text}"
