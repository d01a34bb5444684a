"""A started agent runtime (store + sessions) against the test model server, plus test tools."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from actors import Address, run_process
from actors.agent import (
    HubRegistry,
    MachineConfig,
    ModelClients,
    ModelSettings,
    SessionDeps,
    ToolContext,
    ToolOutput,
    ToolSpec,
    ToolTraits,
    reader_opener,
    session_address,
    start_agent_runtime,
)
from actors.chaos import ModelServer
from actors.store import StoreReader
from protocols import ChatMessage
from protocols._session import StartTurn, Subscribe
from protocols._store import GetStoreStatistics
from supervisor import Runtime
from tests.conftest import DEADLINE, Probe


class Intervals:
    """When each tool call ran, to check what overlapped."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: dict[str, tuple[float, float]] = {}

    def record(self, key: str, start: float, end: float) -> None:
        with self.lock:
            self.spans[key] = (start, end)

    def overlap(self, a: str, b: str) -> bool:
        (a0, a1), (b0, b1) = self.spans[a], self.spans[b]
        return a0 < b1 and b0 < a1


def make_tools(intervals: Intervals) -> dict[str, ToolSpec]:
    async def slow_read(args: dict[str, Any], _call: ToolContext) -> ToolOutput:
        start = time.monotonic()
        await trio.sleep(float(args.get("seconds", 0.2)))
        intervals.record(f"read:{args['path']}", start, time.monotonic())
        return ToolOutput(content=f"contents of {args['path']}")

    async def slow_write(args: dict[str, Any], _call: ToolContext) -> ToolOutput:
        start = time.monotonic()
        await trio.sleep(float(args.get("seconds", 0.2)))
        intervals.record(f"write:{args['path']}:{args.get('content', '')}", start, time.monotonic())
        return ToolOutput(content=f"wrote {args['path']}")

    async def terminal(args: dict[str, Any], _call: ToolContext) -> ToolOutput:
        result = await run_process(["bash", "-c", str(args["command"])], grace=0.5)
        return ToolOutput(content=result.stdout.decode(errors="replace"), ok=result.returncode == 0)

    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    return {
        "read_file": ToolSpec("read_file", "Read a file.", schema, slow_read, ToolTraits(read_only=True, path_argument="path")),
        "write_file": ToolSpec("write_file", "Write a file.", schema, slow_write, ToolTraits(path_argument="path")),
        "terminal": ToolSpec("terminal", "Run a shell command.", {"type": "object"}, terminal, ToolTraits()),
    }


class AgentKit:
    def __init__(self, runtime: Runtime, server: ModelServer, store_file: Path, intervals: Intervals, hubs: HubRegistry | None = None) -> None:
        self.runtime = runtime
        self.hubs = hubs or HubRegistry()
        """The sessions' hubs (they outlive the session actors)."""
        self.server = server
        self.store_file = store_file
        self.intervals = intervals

    def session(self, session_id: str) -> Address[Any]:
        return session_address(self.runtime.registry, self.runtime.lookup("/sessions"), session_id)

    def subscribe(self, session_id: str, after_seq: int = 0, *, observer: bool = False) -> Probe:
        probe = Probe()
        self.session(session_id).tell(Subscribe(subscriber=probe, after_seq=after_seq, observer=observer))
        return probe

    def start_turn(self, session_id: str, text: str, **options: Any) -> None:
        self.session(session_id).tell(StartTurn(text=text, **options))

    def flush_store(self) -> None:
        """Barrier: everything told to the store so far is committed."""
        self.runtime.lookup("/store").ask(GetStoreStatistics(), timeout=DEADLINE)

    def transcript(self, session_id: str) -> list[ChatMessage]:
        self.flush_store()
        with StoreReader(self.store_file) as reader:
            return reader.load_messages(session_id)


def until(probe: Probe, kinds: type | tuple[type, ...], timeout: float = DEADLINE) -> list[Any]:
    """Collect events until one of ``kinds`` arrives; return them all (that one last)."""
    seen = []
    while True:
        event = probe.get(timeout)
        seen.append(event)
        if isinstance(event, kinds):
            return seen


def start_kit(store_file: Path, server: ModelServer, *, extra: Sequence[Any] = (), **overrides: Any) -> AgentKit:
    """Start the store and sessions against ``server``; ``overrides`` replace SessionDeps fields; ``extra``: more children of the root."""
    intervals = Intervals()
    tools = make_tools(intervals)
    deps = SessionDeps(
        hubs=HubRegistry(),
        open_reader=reader_opener(store_file),
        model=ModelSettings(model="test-model", base_url=server.base_url, api_key="test-key"),
        clients=ModelClients(),
        tools=tools,
        config=MachineConfig(traits={name: spec.traits for name, spec in tools.items()}, retry_base=0.01, turn_timeout=60.0),
        idle_timeout=0,
    )
    deps = dataclasses.replace(deps, **overrides)
    return AgentKit(start_agent_runtime(store_file, deps, extra=extra), server, store_file, intervals, deps.hubs)


@pytest.fixture
def agent(tmp_path: Path, model_server: ModelServer) -> Iterator[AgentKit]:
    kit = start_kit(tmp_path / "state.db", model_server)
    try:
        yield kit
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def seqs(events: Sequence[Any]) -> list[int]:
    return [e.seq for e in events]


def fifo(path: Path) -> int:
    os.mkfifo(path)
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK)
