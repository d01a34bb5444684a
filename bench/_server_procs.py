"""The child processes of ``bench_server.py`` (the model server, the server under test) and
how the bench watches them (CPU, memory, listen overflows). Split out of ``bench_server.py``.
"""

from __future__ import annotations

import contextlib
import cProfile
import gc
import json
import logging
import os
import re
import resource
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


KEY = "hk-bench-key-0123456789abcdef"
"""The API key of the server under test."""
MODEL_LATENCY = 0.2
"""Seconds the model waits before each reply."""
TEXT = "ok: the noop tool answered."
"""The scripted answer of every turn's second round trip."""
START_TIMEOUT = 60.0
NOOP_SCHEMA = {"type": "object", "properties": {}}
CLK_TCK = os.sysconf("SC_CLK_TCK")


def raise_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# -- the model process (--model-server) ---------------------------------------------------------


def model_main() -> int:
    from actors.chaos import ModelServer, Reply, ScriptedCall, TextReply, ToolCallsReply

    raise_nofile()
    logging.basicConfig(level=logging.WARNING)
    turn: list[Reply] = [
        ToolCallsReply(calls=(ScriptedCall(name="noop", arguments="{}"),), latency=MODEL_LATENCY),
        TextReply(content=TEXT, latency=MODEL_LATENCY),
    ]
    TODO_CALL = ToolCallsReply(calls=(ScriptedCall(name="todo", arguments='{"action": "list"}'),), latency=MODEL_LATENCY)
    server = ModelServer(seed=0).start()
    gc.collect()
    gc.freeze()  # test infrastructure: its collections must not stall the model's answers
    print(server.base_url, flush=True)
    for line in sys.stdin:  # the control channel; EOF (or a kill of the group) ends it
        words = line.split()
        if words[:1] == ["script"]:  # script PREFIX COUNT TURNS [TOOL]: TOOL (todo) instead of noop
            prefix, count, turns = words[1], int(words[2]), int(words[3])
            scripted = turn if words[4:5] != ["todo"] else [TODO_CALL, turn[1]]
            for index in range(count):
                server.script(scripted * turns, session=f"{prefix}{index}")
            print("ok", flush=True)
        elif words[:1] == ["stats"]:  # optionally only the requests of sessions starting with PREFIX
            prefix = words[1] if len(words) > 1 else ""
            mine = [r for r in server.requests if (r.session or "").startswith(prefix)]
            connections = len({r.connection for r in mine})
            print(json.dumps({"requests": len(mine), "connections": connections, "internal_errors": len(server.internal_errors)}), flush=True)
    server.stop()
    return 0


# -- the server process (--sut) ------------------------------------------------------------------


def sut_main(workdir: str, model_url: str, backlog: int | None, profile: str | None) -> int:
    from actors.agent import (
        HubRegistry,
        MachineConfig,
        ModelClients,
        ModelSettings,
        SessionDeps,
        ToolOutput,
        ToolSpec,
        ToolTraits,
        agent_specs,
        reader_opener,
    )
    from actors.platforms import ApiServer, ServerSettings
    from supervisor import ChildSpec, Runtime, Supervisor

    raise_nofile()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if backlog is not None:  # diagnostic only: hypercorn re-listens the socket with Config.backlog
        import hypercorn.config

        hypercorn.config.Config.backlog = backlog

    async def noop(arguments: dict[str, Any], call: Any) -> ToolOutput:
        return ToolOutput(content="ok")

    home = Path(workdir)
    store = home / "state.db"
    tools = {"noop": ToolSpec("noop", "Do nothing and answer ok.", NOOP_SCHEMA, noop, ToolTraits(read_only=True))}
    hubs = HubRegistry()
    deps = SessionDeps(
        hubs=hubs,
        open_reader=reader_opener(store),
        model=ModelSettings(model="test-model", base_url=model_url, api_key="bench-key"),
        clients=ModelClients(),
        tools=tools,
        config=MachineConfig(traits={name: spec.traits for name, spec in tools.items()}, max_attempts=1),
        idle_timeout=0,
        store_file=store,
        home=home / "home",
        workdir=home,
    )
    settings = ServerSettings(port=0, key=KEY, model_name="hermes-bench", store_file=store, max_concurrent=1_000_000)
    api = ChildSpec(id="api", actor=ApiServer, args=(settings, hubs))
    runtime = Runtime([*agent_specs(store, deps), ChildSpec(id="platforms", actor=Supervisor, args=((api,),))])
    runtime.reactor.at_stop(deps.clients.aclose)
    runtime.start()
    port = runtime.lookup("/platforms/api").ask("port", timeout=START_TIMEOUT)
    gc.collect()
    gc.freeze()  # as hermes serve does once it listens
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:  # diagnostic: enable() is per thread, so call it in the reactor thread
        in_reactor(runtime, profiler.enable)
    print(f"port {port}", flush=True)
    for line in sys.stdin:  # the control channel
        if line.strip() == "stop":
            break
        if line.strip() == "stats":
            health = runtime.reactor.statistics()
            # The reactor keeps its worst heartbeat lag since it started (the first model
            # call, which imports the SDK, is in it); reset it so each reading covers one round.
            runtime.reactor._lag_max = 0.0
            print(json.dumps({"threads": thread_cpu(), "lag_max_ms": health.lag_max_ms}), flush=True)
    if profiler is not None and profile:
        in_reactor(runtime, profiler.disable)
        profiler.dump_stats(profile)
    stopped = runtime.stop(timeout=60)
    print(f"stopped {stopped}", flush=True)
    return 0 if stopped else 1


def in_reactor(runtime: Any, fn: Any) -> None:
    """Run ``fn()`` in the reactor thread and wait until it ran."""
    ran = threading.Event()

    def call() -> None:
        fn()
        ran.set()

    runtime.reactor.call_soon(call)
    ran.wait(START_TIMEOUT)


def thread_cpu() -> dict[str, float]:
    """CPU seconds so far of this process's live threads, summed by name (numbers dropped)."""
    groups: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        with contextlib.suppress(OSError, ProcessLookupError):
            seconds = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            name = "trio-workers" if thread.name.startswith("Trio thread") else re.sub(r"[-_ ]?\d+$", "", thread.name)
            groups[name] = groups.get(name, 0.0) + seconds
    return groups


# -- child processes ------------------------------------------------------------------------------


class Child:
    """A child interpreter in its own process group, driven over stdin/stdout."""

    def __init__(self, argv: list[str], log_file: Path) -> None:
        self.log_file = log_file
        self._log = log_file.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve().with_name("bench_server.py")), *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            cwd=ROOT,
            start_new_session=True,
        )
        self.pid = self.process.pid

    def readline(self, timeout: float = START_TIMEOUT) -> str:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline().decode() if ready else ""
        if not line:
            tail = self.log_file.read_text(errors="replace")[-2000:]
            msg = f"child {self.process.args!r} said nothing within {timeout} s (exit {self.process.poll()}); stderr:\n{tail}"
            raise RuntimeError(msg)
        return line.strip()

    def command(self, line: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()
        return self.readline()

    def close(self, *, stop_line: str | None = None, timeout: float = 60.0) -> str:
        """Ask it to stop (``stop_line``, then EOF); kill the whole group if it lingers."""
        said = ""
        try:
            if self.process.poll() is None and self.process.stdin is not None:
                with contextlib.suppress(OSError):
                    if stop_line is not None:
                        self.process.stdin.write(stop_line.encode() + b"\n")
                        self.process.stdin.flush()
                        with contextlib.suppress(RuntimeError):
                            said = self.readline(timeout)
                    self.process.stdin.close()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(10)
        finally:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(5)
                    break
            self._log.close()
        return said

    def errors_logged(self) -> list[str]:
        return [line for line in self.log_file.read_text(errors="replace").splitlines() if " ERROR " in line or "Traceback" in line]


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of every thread of ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as file:
        fields = file.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as file:
        return dict(line.split(":", 1) for line in file if ":" in line)


def listen_overflows() -> int:
    """The host's TcpExt ListenOverflows counter (a full accept queue drops a connection)."""
    with open("/proc/net/netstat") as file:
        lines = file.read().splitlines()
    for header, values in zip(lines[::2], lines[1::2], strict=False):
        if header.startswith("TcpExt:"):
            return int(dict(zip(header.split()[1:], values.split()[1:], strict=True)).get("ListenOverflows", 0))
    return 0
