"""A real MCP server for the tests, written with the SDK's FastMCP; run as a subprocess.

    python demo_server.py stdio            # over stdin / stdout
    python demo_server.py http             # streamable HTTP on 127.0.0.1, a free port
                                           # (prints "port <n>" on stdout when it listens)
    python demo_server.py fail             # exits at once with a message on stderr
                                           # (so does any mode once $DEMO_FAIL_IF_EXISTS exists)

Tools: ``add`` (read-only), ``count`` (progress), ``wait_cancel`` (blocks until cancelled) and
``cancelled`` (waits until a ``wait_cancel`` was cancelled), ``hang`` (blocks the whole server),
``die`` (kills its own process mid-call), ``grow`` (adds a tool and says the list changed),
``ask`` (sampling: asks the client's model), ``pid``, ``echo_a`` (a structured result its own
``outputSchema`` pattern may refuse, or take for ever to check with ``re``); the resource
``demo://greeting`` and the prompt ``review``.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from typing import Annotated

if __name__ == "__main__" and (sys.argv[1] == "fail" or os.path.exists(os.environ.get("DEMO_FAIL_IF_EXISTS") or "\0")):
    # Before the SDK loads: a failing start is quick.
    print("demo: cannot start: DEMO_TOKEN is not set", file=sys.stderr, flush=True)
    sys.exit(3)


import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

server = FastMCP("demo", log_level="WARNING")
_cancelled = anyio.Event()


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


@server.tool()
async def count(n: int, ctx: Context) -> str:  # type: ignore[type-arg]
    """Count to n, reporting progress at each step."""
    for i in range(n):
        await ctx.report_progress(i + 1, n, f"step {i + 1}")
    return f"counted to {n}"


@server.tool()
async def wait_cancel(ctx: Context) -> str:  # type: ignore[type-arg]
    """Say so (a progress notification), then block until the client cancels the call."""
    try:
        await ctx.report_progress(0, None, "waiting")
        await anyio.sleep_forever()
    finally:
        _cancelled.set()
    return "never"


@server.tool()
async def cancelled() -> str:
    """Answer once a wait_cancel call was cancelled (within 10 s)."""
    with anyio.fail_after(10):
        await _cancelled.wait()
    return "it was cancelled"


@server.tool()
def hang() -> str:
    """Block the whole server (a synchronous sleep in the event loop)."""
    time.sleep(3600)
    return "never"


@server.tool()
def die() -> str:
    """Kill this server in the middle of the call."""
    os.kill(os.getpid(), signal.SIGKILL)
    return "never"


@server.tool()
async def ask(question: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Ask the client's model (sampling) and return its answer."""
    from mcp.shared.exceptions import McpError
    from mcp.types import SamplingMessage

    message = SamplingMessage(role="user", content=TextContent(type="text", text=question))
    try:
        result = await ctx.session.create_message([message], max_tokens=50_000, system_prompt="Answer briefly.")
    except McpError as exc:
        return f"sampling refused: {exc.error.message}"
    return f"the model ({result.model}) said: {result.content.text}"  # type: ignore[union-attr]


@server.resource("demo://greeting", name="greeting", description="A friendly greeting.")
def greeting() -> str:
    return "hello from a resource"


@server.prompt(description="Ask for a review of some code.")
def review(code: str) -> str:
    return f"Please review: {code}"


class Echo(BaseModel):
    """``echo_a``'s result. The pattern is in the schema only (pydantic does not check it here)."""

    text: str = Field(json_schema_extra={"pattern": "(a|aa)+$"})


@server.tool()
def echo_a(n: int, bang: bool) -> Annotated[CallToolResult, Echo]:
    """n a's, then '!' if bang: the structured result breaks its own outputSchema's pattern."""
    text = "a" * n + ("!" if bang else "")
    return CallToolResult(content=[TextContent(type="text", text=text)], structuredContent={"text": text})


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool()
async def grow(ctx: Context) -> str:  # type: ignore[type-arg]
    """Add the tool 'extra' and tell the client the tool list changed."""

    def extra() -> str:
        """A tool added at run time."""
        return "extra ran"

    server.add_tool(extra, name="extra")
    await ctx.session.send_tool_list_changed()
    return "grown"


def _http() -> None:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"port {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        _http()
