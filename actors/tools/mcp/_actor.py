"""``McpServerActor``: one per configured MCP server, at ``/tools/mcp/<name>``.

It owns the server's link (a reactor wait, :func:`run_link`) and its entry in the runtime's
:class:`McpCatalog`. The decisions are :mod:`._link_state`'s: on each report the actor moves
the state, publishes it (the tools follow), and when the link ends waits its backoff and opens
the next one. A server that never starts only ever affects its own entry; its link is retried
with backoff, capped at a minute. A crash of the actor itself (a bug) is its supervisor's to
restart.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from actors import Actor
from protocols import McpLinkUp, McpServerInbox, McpToolsListed, ReconnectMcp, WaitFinished

from ._catalog import McpCatalog
from ._link import Link, run_link
from ._link_state import LinkState, link_down, link_up, opening, tools_listed
from ._sampling import sampler_for

log = logging.getLogger(__name__)


class McpServerActor(Actor[McpServerInbox]):
    def __init__(self, catalog: McpCatalog, name: str) -> None:
        super().__init__()
        self.catalog = catalog
        self.name = name
        self.settings = catalog.entry(name).settings
        self.state: LinkState = catalog.entry(name).state

    def started(self) -> None:
        if self.state.phase == "invalid":
            log.warning("MCP server %s not started: %s", self.name, self.state.error)
            return
        self._open()

    def _open(self) -> None:
        self.state = opening(self.state)
        link = Link(self.name, self.state.attempt)
        self.catalog.attach(self.name, link)
        self.catalog.publish(self.name, self.state)
        sampler = sampler_for(self.settings, self.catalog.sampling)
        self.start_wait(run_link, self.settings, link, self.address.tell, sampler, tag="link", timeout=math.inf)

    def receive(self, message: McpServerInbox) -> Any:
        match message:
            case McpLinkUp(attempt=attempt, server=server, tools=tools) if attempt == self.state.attempt:
                self.state = link_up(self.state, server=server, tools=tools, now=time.monotonic())
                log.info("MCP server %s up (%s): %d tools", self.name, server or self.settings.target, len(tools))
                self.catalog.publish(self.name, self.state)
            case McpToolsListed(attempt=attempt, tools=tools) if attempt == self.state.attempt:
                self.state = tools_listed(self.state, tools)
                self.catalog.publish(self.name, self.state)
            case WaitFinished(tag="link", status=status, value=value, error=error):
                reason = str(value) if status == "error" and value is not None else error or status
                self.state, delay = link_down(self.state, error=reason, now=time.monotonic())
                log.warning("MCP server %s: %s; retrying in %.2g s", self.name, reason, delay)
                self.catalog.publish(self.name, self.state)
                self.send_after(delay, ReconnectMcp(attempt=self.state.attempt))
            case ReconnectMcp(attempt=attempt) if attempt == self.state.attempt:
                self._open()
            case _:
                pass  # a report of an earlier link

    def stopping(self) -> None:
        self.catalog.attach(self.name, None)
