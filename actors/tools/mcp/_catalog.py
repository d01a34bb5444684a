"""The MCP servers of one runtime and the tools they offer: what sessions, the CLI and /health read.

Each server's entry is written only by that server's actor (its :class:`LinkState`) and read
from anywhere: entries and the tool table are replaced whole (copy on write), never changed in
place, so a reader in another thread sees one version or the next. :class:`LiveTools` is the
mapping a session holds as its tools: the built-in tools plus the MCP tools of the moment.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from actors.agent import ToolContext, ToolOutput, ToolSpec, ToolTraits
from protocols import McpToolInfo, McpToolKind

from ._link import Link, call_tool
from ._link_state import LinkState, invalid
from ._naming import chosen, describe, tool_name, traits
from ._sampling import SamplingTarget
from ._settings import McpSettings


@dataclasses.dataclass(frozen=True, slots=True)
class ServerEntry:
    settings: McpSettings
    state: LinkState
    link: Link | None = None
    offered: tuple[str, ...] = ()
    """The names the agent sees (``mcp_<server>_<tool>``), after include / exclude."""

    def status(self) -> dict[str, Any]:
        """What /health/detailed and ``hermes mcp list`` show."""
        state = self.state
        return {
            "name": self.settings.name,
            "transport": self.settings.transport,
            "target": self.settings.target,
            "state": state.phase,
            "server": state.server,
            "tools": list(self.offered),
            "restarts": state.restarts,
            "error": state.error,
        }


class McpCatalog:
    """Every configured MCP server's state and offered tools."""

    def __init__(self, servers: Sequence[McpSettings], sampling: SamplingTarget | None = None) -> None:
        self._entries: dict[str, ServerEntry] = {s.name: ServerEntry(settings=s, state=invalid(s.problem) if s.problem else LinkState()) for s in servers}
        self._tools: dict[str, ToolSpec] = {}
        self._retired: dict[str, str] = {}
        self.sampling = sampling
        """Where servers allowed to sample send their requests (None: no model to offer)."""
        self.version = 0
        """Grows with every change of the tool table."""
        self._changed = threading.Condition()

    # -- reads (any thread) -----------------------------------------------------------------

    def names(self) -> list[str]:
        return list(self._entries)

    def entry(self, name: str) -> ServerEntry:
        return self._entries[name]

    def tools(self) -> Mapping[str, ToolSpec]:
        return self._tools

    def retired(self, name: str) -> str | None:
        """The server of a tool that was offered and no longer is."""
        return self._retired.get(name)

    def statuses(self) -> list[dict[str, Any]]:
        return [entry.status() for entry in self._entries.values()]

    def wait_for(self, predicate: Callable[[McpCatalog], bool], timeout: float) -> bool:
        """Block (a thread that is not an actor's or the reactor's) until ``predicate`` holds."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self), timeout)

    # -- writes (the server's actor) --------------------------------------------------------

    def attach(self, name: str, link: Link | None) -> None:
        self._update(name, dataclasses.replace(self._entries[name], link=link))

    def publish(self, name: str, state: LinkState) -> None:
        """The server's new state; its offered tools follow it (none when it never came up)."""
        entry = self._entries[name]
        settings = entry.settings
        infos = chosen(state.tools, settings.include, settings.exclude) if state.phase in ("ready", "restarting") else ()
        specs = {tool_name(name, t.name): self._spec(settings, t, describe(name, t)) for t in infos}
        self._update(name, dataclasses.replace(entry, state=state, offered=tuple(specs)))
        if _signature(specs) != _signature({n: self._tools[n] for n in entry.offered}):
            tools = {n: s for n, s in self._tools.items() if n not in entry.offered}
            tools.update(specs)
            for gone in set(entry.offered) - set(specs):
                self._retired[gone] = name
            self._tools = tools
            self.version += 1
        self._notify()

    def _spec(self, settings: McpSettings, tool: McpToolInfo, description: str) -> ToolSpec:
        exposed = tool_name(settings.name, tool.name)
        run = functools.partial(self._run, settings.name, tool.name, exposed, tool.kind, tool.output_schema)
        return ToolSpec(name=exposed, description=description, parameters=tool.input_schema, run=run, traits=traits(tool))

    async def _run(
        self, server: str, tool: str, exposed: str, kind: McpToolKind, output_schema: dict[str, Any] | None, arguments: dict[str, Any], context: ToolContext
    ) -> ToolOutput:
        entry = self._entries[server]
        return await call_tool(entry.link, entry.settings, tool, exposed, arguments, context, kind, output_schema)

    def _update(self, name: str, entry: ServerEntry) -> None:
        entries = dict(self._entries)
        entries[name] = entry
        self._entries = entries

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()


class LiveTools(Mapping[str, ToolSpec]):
    """A session's tools: the built-in ones and, as they are now, the MCP servers' ones.

    A tool an MCP server stopped offering still answers (with an error saying so), so a call
    the model made just before the change gets a result, not a crash.
    """

    def __init__(self, builtin: Mapping[str, ToolSpec], catalog: McpCatalog) -> None:
        self._builtin = dict(builtin)
        self._catalog = catalog

    @property
    def version(self) -> int:
        return self._catalog.version

    def __getitem__(self, name: str) -> ToolSpec:
        found = self._builtin.get(name) or self._catalog.tools().get(name)
        if found is not None:
            return found
        server = self._catalog.retired(name)
        if server is None:
            raise KeyError(name)
        return _retired_spec(name, server)

    def __iter__(self) -> Iterator[str]:
        return iter({**self._builtin, **self._catalog.tools()})

    def __len__(self) -> int:
        return len(self._builtin) + len(self._catalog.tools())

    def __contains__(self, name: object) -> bool:
        return name in self._builtin or name in self._catalog.tools()

    def traits(self) -> LiveTraits:
        return LiveTraits(self)

    def over(self, builtin: Mapping[str, ToolSpec]) -> LiveTools:
        """Other built-in tools (a config reload) over the same servers."""
        return LiveTools(builtin, self._catalog)


class LiveTraits(Mapping[str, ToolTraits]):
    """The batch planner's view of :class:`LiveTools`: which tools exist now, and their traits."""

    def __init__(self, tools: LiveTools) -> None:
        self._tools = tools

    def __getitem__(self, name: str) -> ToolTraits:
        if name not in self._tools:
            raise KeyError(name)
        return self._tools[name].traits

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools


def _retired_spec(name: str, server: str) -> ToolSpec:
    async def run(_arguments: dict[str, Any], _context: ToolContext) -> ToolOutput:
        return ToolOutput(content=f"[error] {name} is no longer offered by MCP server {server}", ok=False)

    return ToolSpec(name=name, description="", parameters={"type": "object"}, run=run)


def _signature(specs: Mapping[str, ToolSpec]) -> dict[str, tuple[str, Any, ToolTraits]]:
    return {n: (s.description, s.parameters, s.traits) for n, s in specs.items()}
