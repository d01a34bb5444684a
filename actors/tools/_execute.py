"""``execute_code``: run a Python script in a subprocess that can call the session's tools.

The script is judged first as the terminal judges ``python3 -c SCRIPT`` (blocked never runs,
dangerous waits for approval), and its output is redacted as terminal output is. It runs in
its own process group with a timeout (the group is killed on timeout
or cancel). A module ``hermes_tools`` is importable from it: ``call_tool(name, **args)``
sends the call over a Unix socket to this tool, which runs it with the session's own
tools (never execute_code, delegate_task or clarify) and sends back the result.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import msgspec
import trio

from actors import run_process
from actors.agent import ToolContext, ToolOutput, ToolTraits
from protocols import ProcessResult

from ._command_approval import judged
from ._registry import tool
from ._terminal_output import redact

NOT_FROM_CODE = frozenset({"execute_code", "delegate_task", "clarify"})
MAX_REQUEST = 1 << 20
MAX_TIMEOUT = 300

CLIENT = '''"""Call the agent's tools from a script: call_tool("read_file", path="x.txt")."""
import json, os, socket


class ToolError(Exception):
    pass


def call_tool(name, **arguments):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as channel:
        channel.connect(os.environ["HERMES_TOOLS_SOCKET"])
        channel.sendall(json.dumps({"tool": name, "arguments": arguments}).encode() + b"\\n")
        data = b""
        while not data.endswith(b"\\n"):
            chunk = channel.recv(65536)
            if not chunk:
                break
            data += chunk
    reply = json.loads(data)
    if not reply["ok"]:
        raise ToolError(reply["content"])
    return reply["content"]
'''


class ExecuteArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    code: Annotated[str, msgspec.Meta(min_length=1, description="A Python 3 script. `from hermes_tools import call_tool` calls your tools.")]
    timeout: Annotated[int, msgspec.Meta(ge=1, le=MAX_TIMEOUT, description="Seconds before the script is killed.")] = 60


async def _serve_calls(stream: trio.SocketStream, context: ToolContext, counter: list[int]) -> None:
    async with stream:
        data = b""
        while not data.endswith(b"\n") and len(data) <= MAX_REQUEST:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            data += chunk
        try:
            request = json.loads(data)
            name, arguments = str(request["tool"]), request.get("arguments") or {}
            if not isinstance(arguments, dict):
                raise ValueError("arguments must be an object")
        except (ValueError, KeyError, TypeError) as exc:
            reply: dict[str, Any] = {"ok": False, "content": f"bad request: {exc}"}
        else:
            spec = context.tools.get(name)
            if spec is None or name in NOT_FROM_CODE:
                allowed = sorted(n for n in context.tools if n not in NOT_FROM_CODE)
                reply = {"ok": False, "content": f"tool {name!r} cannot be called from code; available: {', '.join(allowed)}"}
            else:
                counter[0] += 1
                inner = dataclasses.replace(context, call_id=f"{context.call_id}.code-{counter[0]}")
                output = await spec.run(arguments, inner)
                reply = {"ok": output.ok, "content": output.content}
        await stream.send_all(json.dumps(reply).encode() + b"\n")


@tool(
    name="execute_code",
    toolset="code_execution",
    description=(
        "Run a Python script (for loops over many files, data processing, several tool calls in one step). "
        "Print what you want to see. Inside it, `from hermes_tools import call_tool` then `call_tool('read_file', path='x')`."
    ),
    traits=ToolTraits(exclusive=True),
)
async def execute_code(context: ToolContext, args: ExecuteArgs) -> ToolOutput:
    # The script is judged as the inline code it is, as `python3 -c` in the terminal would be:
    # what it hands a shell, what it deletes or writes, a socket given a shell.
    refusal = await judged(context, f"python3 -c {shlex.quote(args.code)}", context.workspace.cwd)
    if refusal is not None:
        return refusal
    folder = Path(await trio.to_thread.run_sync(tempfile.mkdtemp, None, "hermes-code-"))
    try:
        await trio.to_thread.run_sync((folder / "hermes_tools.py").write_text, CLIENT)
        await trio.to_thread.run_sync((folder / "script.py").write_text, args.code)
        socket_path = str(folder / "tools.sock")
        listener = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await listener.bind(socket_path)
        listener.listen(16)
        env = {**os.environ, "HERMES_TOOLS_SOCKET": socket_path, "PYTHONPATH": str(folder), "PYTHONUNBUFFERED": "1"}
        counter = [0]
        result = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, lambda s: _serve_calls(s, context, counter), [trio.SocketListener(listener)])
            with trio.move_on_after(args.timeout):
                result = await run_process([sys.executable, str(folder / "script.py")], cwd=context.workspace.cwd, env=env, grace=1.0)
            nursery.cancel_scope.cancel()
        if result is None:
            return ToolOutput(content=f"[error] the script ran longer than {args.timeout} s and was killed (with everything it started)", ok=False)
        return await trio.to_thread.run_sync(_shown, result)  # redacting takes milliseconds: not on the reactor
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(shutil.rmtree, folder, True)


def _shown(result: ProcessResult) -> ToolOutput:
    """What the model sees of a finished script: its exit code and its output, secrets redacted."""
    parts = [f"exit code {result.returncode}"]
    if result.stdout:
        parts.append(redact(result.stdout.decode(errors="replace")))
    if result.stderr:
        parts.append("[stderr]\n" + redact(result.stderr.decode(errors="replace")))
    if result.truncated:
        parts.append("[output was cut at the size limit]")
    return ToolOutput(content="\n".join(parts), ok=result.returncode == 0)
