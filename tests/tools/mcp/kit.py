"""A runtime with MCP servers (real FastMCP servers, as subprocesses) against the test model server."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from actors.agent import HubRegistry, MachineConfig, ModelClients, ModelSettings, SessionDeps, reader_opener, session_address, start_agent_runtime
from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.config import McpServer
from actors.tools.mcp import McpCatalog, SamplingTarget, live_tools, mcp_settings, mcp_tree
from protocols import TERMINAL_EVENTS
from protocols._session import CancelTurn, StartTurn, Subscribe
from supervisor import Runtime
from tests.conftest import DEADLINE, Probe

DEMO = str(Path(__file__).with_name("demo_server.py"))


def stdio_server(**options: Any) -> McpServer:
    """The demo server over stdio (``options``: other keys of the entry)."""
    return McpServer(command=sys.executable, args=[DEMO, "stdio"], **options)


@contextlib.contextmanager
def http_demo() -> Iterator[str]:
    """The demo server over streamable HTTP on 127.0.0.1; yields its MCP URL. Killed with its group after."""
    process = subprocess.Popen([sys.executable, DEMO, "http"], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert process.stdout is not None
        found = re.match(r"port (\d+)", process.stdout.readline())
        assert found, "the HTTP demo server did not say its port"
        yield f"http://127.0.0.1:{found.group(1)}/mcp"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(DEADLINE)
        assert process.stdout is not None
        process.stdout.close()


@dataclasses.dataclass
class McpKit:
    runtime: Runtime
    catalog: McpCatalog
    model: ModelServer
    hubs: HubRegistry

    def ready(self, name: str, *, restarts: int = 0) -> dict[str, Any]:
        """Wait until server ``name`` is up (after ``restarts`` restarts); its status."""
        ok = self.catalog.wait_for(lambda c: c.entry(name).state.phase == "ready" and c.entry(name).state.restarts >= restarts, DEADLINE)
        status = self.catalog.entry(name).status()
        assert ok, status
        return status

    def settled(self, name: str) -> dict[str, Any]:
        """Wait until server ``name`` is no longer starting; its status."""
        ok = self.catalog.wait_for(lambda c: c.entry(name).state.phase != "starting", DEADLINE)
        assert ok, self.catalog.entry(name).status()
        return self.catalog.entry(name).status()

    def subscribe(self, session: str) -> Probe:
        probe = Probe()
        self.address(session).tell(Subscribe(subscriber=probe))
        return probe

    def address(self, session: str) -> Any:
        return session_address(self.runtime.registry, self.runtime.lookup("/sessions"), session)

    def start(self, session: str, calls: Sequence[tuple[str, Mapping[str, Any]]], answer: str = "done") -> Probe:
        """Script the model to call ``calls`` then answer; start the turn; return the session's probe."""
        scripted = tuple(ScriptedCall(name=name, arguments=msgspec.json.encode(args).decode()) for name, args in calls)
        self.model.script([ToolCallsReply(calls=scripted), TextReply(content=answer)], session=session)
        probe = self.subscribe(session)
        self.address(session).tell(StartTurn(text="use the tools"))
        return probe

    def turn(self, session: str, calls: Sequence[tuple[str, Mapping[str, Any]]], answer: str = "done") -> list[Any]:
        """A whole turn: every event until its end."""
        return until_end(self.start(session, calls, answer))

    def cancel(self, session: str) -> None:
        self.address(session).tell(CancelTurn())


def until_end(probe: Probe) -> list[Any]:
    seen = []
    while True:
        seen.append(probe.get(DEADLINE))
        if isinstance(seen[-1], TERMINAL_EVENTS):
            return seen


def start_mcp_kit(home: Path, model: ModelServer, servers: Mapping[str, McpServer]) -> McpKit:
    target = SamplingTarget(base_url=model.base_url, api_key="test-key", model="test-model")
    tools, catalog = live_tools({}, mcp_settings(servers), target)
    store = home / "state.db"
    deps = SessionDeps(
        hubs=HubRegistry(),
        open_reader=reader_opener(store),
        model=ModelSettings(model="test-model", base_url=model.base_url, api_key="test-key"),
        clients=ModelClients(),
        tools=tools,
        config=MachineConfig(traits=tools.traits(), retry_base=0.01, turn_timeout=60.0),
        idle_timeout=0,
        home=home,
    )
    runtime = start_agent_runtime(store, deps, extra=(mcp_tree(catalog),))
    return McpKit(runtime=runtime, catalog=catalog, model=model, hubs=deps.hubs)
