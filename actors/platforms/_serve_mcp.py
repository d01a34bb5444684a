"""``hermes serve`` with ``mcp_servers:``: the live tool table, the ``/tools/mcp`` subtree, start-up lines."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from actors.agent import SessionDeps
from actors.config import McpServer
from actors.tools.mcp import McpCatalog, SamplingTarget, live_tools, mcp_settings, mcp_tree
from supervisor import ChildSpec

START_WAIT_CAP = 30.0
"""Seconds serve waits at most for its MCP servers before it announces itself (they keep starting after)."""


@dataclasses.dataclass(frozen=True)
class ServeMcp:
    catalog: McpCatalog
    tree: ChildSpec

    def wait_started(self) -> None:
        """Until every server is up or has failed once (bounded by the longest connect timeout, at most 30 s)."""
        entries = [self.catalog.entry(n) for n in self.catalog.names()]
        cap = min(START_WAIT_CAP, max((e.settings.connect_timeout for e in entries), default=0.0))
        self.catalog.wait_for(lambda c: all(c.entry(n).state.phase != "starting" for n in c.names()), cap)

    def lines(self) -> list[str]:
        """One line per server: its tools, or why it is not up."""
        found = []
        for status in self.catalog.statuses():
            name, state = status["name"], status["state"]
            if state == "ready":
                found.append(f"MCP server {name}: {len(status['tools'])} tools ({', '.join(status['tools']) or 'none offered'})")
            else:
                found.append(f"MCP server {name}: {state}" + (f": {status['error']}" if status["error"] else "") + ("" if state == "invalid" else "; retrying"))
        return found


def with_mcp(deps: SessionDeps, servers: Mapping[str, McpServer]) -> tuple[SessionDeps, ServeMcp]:
    """``deps`` whose tools and traits are read over the servers' catalog, and what serve starts and
    shows (servers allowed to sample are answered by the sessions' model)."""
    model = deps.model
    target = SamplingTarget(base_url=model.base_url, api_key=model.api_key, model=model.model, headers=dict(model.extra_headers))
    table, catalog = live_tools(deps.tools, mcp_settings(servers), target)
    config = dataclasses.replace(deps.config, traits=table.traits())
    return dataclasses.replace(deps, tools=table, config=config), ServeMcp(catalog=catalog, tree=mcp_tree(catalog))
