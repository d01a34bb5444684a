"""The ``/tools`` subtree of a runtime with MCP servers: ``/tools/mcp/<name>``, one actor each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from actors.agent import ToolSpec
from supervisor import ChildSpec, Intensity, Supervisor

from ._actor import McpServerActor
from ._catalog import LiveTools, McpCatalog
from ._sampling import SamplingTarget
from ._settings import McpSettings


def mcp_tree(catalog: McpCatalog) -> ChildSpec:
    """``tools`` → ``mcp`` → one :class:`McpServerActor` per server.

    The actors handle their servers' failures themselves (backoff); the supervisor restarts
    an actor that crashed, generously, so one server's bug never stops another's.
    """
    servers = tuple(ChildSpec(id=name, actor=McpServerActor, args=(catalog, name)) for name in catalog.names())
    mcp = ChildSpec(id="mcp", actor=Supervisor, args=(servers,), kwargs={"intensity": Intensity(max_restarts=50, within=60.0)})
    return ChildSpec(id="tools", actor=Supervisor, args=((mcp,),))


def live_tools(builtin: Mapping[str, ToolSpec], servers: Sequence[McpSettings], sampling: SamplingTarget | None = None) -> tuple[LiveTools, McpCatalog]:
    """A session's tools over a new catalog of ``servers`` (``sampling``: the model that answers servers allowed to sample)."""
    catalog = McpCatalog(servers, sampling)
    return LiveTools(builtin, catalog), catalog
