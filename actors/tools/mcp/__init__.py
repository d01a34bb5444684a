"""MCP: each configured server an actor under ``/tools/mcp/<name>``, its tools offered to sessions.

Not imported by ``actors.tools`` (the ``mcp`` SDK loads only where servers are configured).
"""

from ._actor import McpServerActor as McpServerActor
from ._catalog import LiveTools as LiveTools
from ._catalog import McpCatalog as McpCatalog
from ._link import McpLinkBroken as McpLinkBroken
from ._naming import tool_name as tool_name
from ._sampling import SamplingTarget as SamplingTarget
from ._settings import McpSettings as McpSettings
from ._settings import mcp_settings as mcp_settings
from ._tree import live_tools as live_tools
from ._tree import mcp_tree as mcp_tree

__all__ = [
    "LiveTools",
    "McpCatalog",
    "McpLinkBroken",
    "McpServerActor",
    "McpSettings",
    "SamplingTarget",
    "live_tools",
    "mcp_settings",
    "mcp_tree",
    "tool_name",
]
