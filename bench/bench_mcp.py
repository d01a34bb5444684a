"""An MCP tool call through the runtime against the same call made directly with the SDK client.

Two copies of one FastMCP server (the official ``mcp`` SDK, a read-only ``echo`` tool that
returns its argument) run as stdio subprocesses: one behind the runtime, one behind a bare SDK
client.

- ``runtime``: the runtime's path for a session's tool call. A ``Runtime`` holds the MCP
  subtree (``/tools/mcp/bench``: the server's actor, its link in the reactor) and a small
  caller actor. Timed from the main thread: a message told to the caller, which starts the
  tool's ``ToolSpec.run`` as a reactor wait (as a session does: ``LiveTools`` lookup,
  ``call_tool`` with its timeout, progress callback and cancel handling, the result as text),
  the ``WaitFinished`` back in the caller, which puts the text on a queue the main thread reads.
- ``sdk`` (baseline): ``ClientSession.call_tool`` on the SDK's own ``stdio_client``, in a trio
  thread of its own, called from the main thread with ``trio.from_thread.run`` (the same two
  thread hops as the runtime's path).
- ``sdk_in_thread`` (for reference): the same SDK call timed inside its trio thread (no hops).

Calls alternate (runtime first on even rounds, SDK first on odd ones) after a warm-up.
Reported: median / p90 / p99 in microseconds, the ratio of medians (goal <= 1.2).

Run from the repository root: ``python bench/bench_mcp.py [--quick] [--json]``
"""

from __future__ import annotations

import math
import queue
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import trio
from _common import latency_row, parse_options, print_header, print_json, versions
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from actors import Actor
from actors.agent import ToolContext, Workspace
from actors.config import McpServer
from actors.tools.mcp import McpCatalog, live_tools, mcp_settings, mcp_tree
from protocols import Message, WaitFinished
from supervisor import ChildSpec, Runtime

SERVER = """
from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

server = FastMCP("bench", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    \"\"\"Return the text.\"\"\"
    return text


server.run("stdio")
"""
ARGUMENTS = {"text": "hello from the bench"}


class CallMcp(Message, frozen=True, kw_only=True):
    """Bench only: call the MCP tool once."""

    tool: str


class Caller(Actor[CallMcp | WaitFinished]):
    def __init__(self, catalog: McpCatalog, done: queue.SimpleQueue[Any]) -> None:
        super().__init__()
        self.catalog = catalog
        self.done = done
        self.tool_context = ToolContext(session_id="bench", turn_id="t", call_id="c", home=Path("."), workspace=Workspace(Path(".")))

    def receive(self, message: CallMcp | WaitFinished) -> None:
        match message:
            case CallMcp(tool=tool):
                self.start_wait(self.catalog.tools()[tool].run, ARGUMENTS, self.tool_context, tag="call", timeout=30.0)
            case WaitFinished(value=value):
                self.done.put(value)


class SdkThread:
    """The baseline: a bare SDK client in a trio thread of its own."""

    def __init__(self, script: Path) -> None:
        self.script = script
        self.ready = threading.Event()
        self.stop: trio.Event | None = None
        self.token: trio.lowlevel.TrioToken | None = None
        self.session: ClientSession | None = None
        self.thread = threading.Thread(target=trio.run, args=(self._main,), daemon=True)

    async def _main(self) -> None:
        params = StdioServerParameters(command=sys.executable, args=[str(self.script)])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            self.session, self.token, self.stop = session, trio.lowlevel.current_trio_token(), trio.Event()
            self.ready.set()
            await self.stop.wait()

    def start(self) -> None:
        self.thread.start()
        if not self.ready.wait(60):
            raise SystemExit("the baseline SDK client did not connect within 60 s")

    def call(self) -> str:
        assert self.session is not None
        result = trio.from_thread.run(self.session.call_tool, "echo", ARGUMENTS, trio_token=self.token)
        return str(result.content[0].text)  # type: ignore[union-attr]

    def call_timed_inside(self) -> float:
        async def timed() -> float:
            assert self.session is not None
            start = time.perf_counter()
            await self.session.call_tool("echo", ARGUMENTS)
            return time.perf_counter() - start

        return float(trio.from_thread.run(timed, trio_token=self.token))

    def close(self) -> None:
        if self.stop is not None:
            trio.from_thread.run_sync(self.stop.set, trio_token=self.token)
        self.thread.join(10)


def main() -> int:
    options = parse_options(__doc__)
    rounds = 40 if options.quick else 400
    info = versions("mcp", "trio", "pykka")
    print_header("bench_mcp", info, options.json, f"bench_mcp: {rounds} calls each way, stdio server, echo tool", rounds=rounds)
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "bench_server.py"
        script.write_text(SERVER)
        tools, catalog = live_tools({}, mcp_settings({"bench": McpServer(command=sys.executable, args=[str(script)])}))
        done: queue.SimpleQueue[Any] = queue.SimpleQueue()
        runtime = Runtime([mcp_tree(catalog), ChildSpec(id="caller", actor=Caller, args=(catalog, done))]).start()
        sdk = SdkThread(script)
        try:
            if not catalog.wait_for(lambda c: c.entry("bench").state.phase == "ready", 60):
                raise SystemExit(f"the MCP server did not start: {catalog.entry('bench').status()}")
            sdk.start()
            caller = runtime.lookup("/caller")
            name = "mcp_bench_echo"
            assert name in tools

            def through_runtime() -> float:
                start = time.perf_counter()
                caller.tell(CallMcp(tool=name))
                output = done.get(timeout=30)
                elapsed = time.perf_counter() - start
                if output.content != ARGUMENTS["text"]:
                    raise SystemExit(f"unexpected result through the runtime: {output}")
                return elapsed

            def direct() -> float:
                start = time.perf_counter()
                text = sdk.call()
                elapsed = time.perf_counter() - start
                if text != ARGUMENTS["text"]:
                    raise SystemExit(f"unexpected result from the SDK: {text}")
                return elapsed

            for _ in range(max(10, rounds // 10)):  # warm-up
                through_runtime(), direct()
            ours: list[float] = []
            theirs: list[float] = []
            inside: list[float] = []
            for i in range(rounds):
                if i % 2 == 0:
                    ours.append(through_runtime())
                    theirs.append(direct())
                else:
                    theirs.append(direct())
                    ours.append(through_runtime())
                inside.append(sdk.call_timed_inside())
        finally:
            sdk.close()
            runtime.stop(timeout=30)
    us = [x * 1e6 for x in ours]
    base = [x * 1e6 for x in theirs]
    rows = [
        latency_row(
            "bench_mcp",
            "tool_call",
            us,
            base,
            target_us=None,
            note="runtime path (tell -> reactor wait -> WaitFinished -> queue) vs SDK call_tool from the main thread",
        ),
        latency_row(
            "bench_mcp",
            "sdk_in_thread",
            [x * 1e6 for x in inside],
            base,
            target_us=None,
            note="the SDK call timed inside its trio thread, against the baseline",
        ),
    ]
    rows[0]["goal_ratio"] = 1.2
    rows[0]["meets_goal"] = rows[0]["ratio"] <= 1.2
    if options.json:
        print_json(rows)
    else:
        for row in rows:
            print(
                f"{row['metric']:>14}: median {row['median_us']:.0f} us  p90 {row['p90_us']:.0f}  p99 {row['p99_us']:.0f}  baseline {row['baseline_median_us']:.0f} us  ratio {row['ratio']}"
            )
    return 0 if math.isfinite(rows[0]["ratio"]) else 1


if __name__ == "__main__":
    sys.exit(main())
