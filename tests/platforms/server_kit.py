"""A running API server over the store and sessions, against the test model server."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from actors.agent import agent_specs
from actors.chaos import ModelServer
from actors.platforms import ApiServer, ServerSettings
from supervisor import ChildSpec, Runtime, Supervisor
from tests.agent.session_kit import Intervals, make_tools
from tests.conftest import DEADLINE

KEY = "hk-test-key-0123456789abcdef"


@dataclasses.dataclass
class ServerKit:
    runtime: Runtime
    model: ModelServer
    base_url: str
    store_file: Path

    clients: list[openai.OpenAI] = dataclasses.field(default_factory=list)

    def client(self, **options: Any) -> openai.OpenAI:
        """An SDK client, closed by :meth:`stop` (an unclosed one leaks its sockets)."""
        client = openai.OpenAI(base_url=self.base_url + "/v1", api_key=KEY, max_retries=0, timeout=DEADLINE, **options)
        self.clients.append(client)
        return client

    def stop(self) -> bool:
        for client in self.clients:
            client.close()
        return self.runtime.stop(timeout=DEADLINE)

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, headers={"Authorization": f"Bearer {KEY}"}, timeout=DEADLINE)


def guarded_tool(marker: Path) -> Any:
    """A dangerous tool: it asks for approval, and creates ``marker`` only when allowed."""
    from actors.agent import ToolContext, ToolOutput, ToolSpec
    from actors.agent._approvals import ALLOWING

    async def run(args: dict[str, Any], call: ToolContext) -> ToolOutput:
        assert call.workspace.approvals is not None
        decision = await call.workspace.approvals.request(
            turn_id=call.turn_id, call_id=call.call_id, command="touch marker", reasons=("test danger",), keys=("test",), timeout=float(args.get("timeout", 30))
        )
        if decision not in ALLOWING:
            return ToolOutput(content=f"[denied] {decision}", ok=False)
        marker.write_text("ran")
        return ToolOutput(content="done")

    return ToolSpec("guarded", "Does something dangerous.", {"type": "object"}, run)


class SSE:
    """Reads server-sent events from an httpx streaming response."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.iter_lines()

    def next(self) -> dict[str, str]:
        event: dict[str, str] = {}
        for line in self.lines:
            if not line:
                if event:
                    return event
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            event[name] = value
        raise AssertionError("the stream ended")


def start_server(tmp_path: Path, model: ModelServer, **settings: Any) -> ServerKit:
    from actors.agent import HubRegistry, MachineConfig, ModelClients, ModelSettings, SessionDeps, reader_opener

    store = tmp_path / "state.db"
    tools = {**make_tools(Intervals()), "guarded": guarded_tool(tmp_path / "marker")}
    hubs = HubRegistry()
    deps = SessionDeps(
        hubs=hubs,
        open_reader=reader_opener(store),
        model=ModelSettings(model="test-model", base_url=model.base_url, api_key="test-key"),
        clients=ModelClients(),
        tools=tools,
        config=MachineConfig(traits={n: t.traits for n, t in tools.items()}, retry_base=0.01, turn_timeout=60.0),
        idle_timeout=0,
        store_file=store,
        home=tmp_path / "home",
    )
    server = ServerSettings(
        **{"port": 0, "key": KEY, "model_name": "hermes-test", "store_file": store, "upstream": deps.model, "clients": deps.clients, **settings}
    )
    children = [*agent_specs(store, deps), ChildSpec(id="platforms", actor=Supervisor, args=((ChildSpec(id="api", actor=ApiServer, args=(server, hubs)),),))]
    runtime = Runtime(children)
    runtime.reactor.at_stop(deps.clients.aclose)
    runtime.start()
    port = runtime.lookup("/platforms/api").ask("port", timeout=DEADLINE)
    return ServerKit(runtime, model, f"http://127.0.0.1:{port}", store)


@pytest.fixture
def api(tmp_path: Path, model_server: ModelServer) -> Iterator[ServerKit]:
    kit = start_server(tmp_path, model_server)
    try:
        yield kit
    finally:
        assert kit.stop()
