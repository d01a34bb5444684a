"""Delegation: child sessions under a parent, their answers back, and cancel cascading down."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from actors.agent import MachineConfig
from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.store import StoreReader
from actors.tools import REGISTRY
from protocols import CancelTurn, ToolFinished, ToolStarted, TurnCancelled, TurnCompleted
from tests.agent.session_kit import Intervals, make_tools, start_kit, until
from tests.conftest import DEADLINE
from tests.processes import live_processes_with, wait_for_line


def delegating_kit(tmp_path: Path, model_server: ModelServer):  # type: ignore[no-untyped-def]
    tools = {**make_tools(Intervals()), "delegate_task": REGISTRY.get("delegate_task").spec()}
    config = MachineConfig(traits={n: t.traits for n, t in tools.items()}, retry_base=0.01, turn_timeout=60.0)
    return start_kit(tmp_path / "state.db", model_server, tools=tools, config=config)


def delegate(*goals: str) -> ToolCallsReply:
    arguments = json.dumps({"tasks": [{"goal": g} for g in goals]})
    return ToolCallsReply(calls=(ScriptedCall(name="delegate_task", arguments=arguments),))


def test_children_run_in_parallel_and_only_their_answers_return_to_the_parent(tmp_path: Path, model_server: ModelServer) -> None:
    kit = delegating_kit(tmp_path, model_server)
    try:
        model_server.script([delegate("find A", "find B"), TextReply(content="Both found.")], session="d1")
        model_server.script([TextReply(content="A is 1", latency=0.1)], session="d1.child-1")
        model_server.script([TextReply(content="B is 2", latency=0.1)], session="d1.child-2")
        probe = kit.subscribe("d1")
        kit.start_turn("d1", "find A and B")
        events = until(probe, TurnCompleted)
        finished = next(e for e in events if isinstance(e, ToolFinished))
        assert finished.ok and "A is 1" in finished.preview and "B is 2" in finished.preview
        assert events[-1].text == "Both found."
        child_request = next(r for r in model_server.requests if r.session == "d1.child-1")
        assert [t["function"]["name"] for t in child_request.body.get("tools", [])] == ["read_file", "write_file", "terminal"]
        kit.flush_store()
        with StoreReader(kit.store_file) as reader:
            assert reader.get_session("d1.child-1").parent_session_id == "d1"
            assert [m.content for m in reader.load_messages("d1.child-2")] == ["find B", "B is 2"]
            assert all("B is 2" not in (m.content or "") or m.role == "tool" for m in reader.load_messages("d1"))
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_cancelling_the_parent_cancels_every_child_and_kills_their_process_groups(tmp_path: Path, model_server: ModelServer) -> None:
    kit = delegating_kit(tmp_path, model_server)
    markers = [f"50.{os.getpid()}{i}" for i in range(3)]
    fifos = []
    try:
        model_server.script([delegate("one", "two", "three")], session="p")
        for i, marker in enumerate(markers):
            ready = tmp_path / f"ready-{i}"
            os.mkfifo(ready)
            fifos.append(os.open(ready, os.O_RDONLY | os.O_NONBLOCK))
            command = f"echo go > {ready}; sleep {marker}"
            model_server.script(
                [ToolCallsReply(calls=(ScriptedCall(name="terminal", arguments=json.dumps({"command": command})),))], session=f"p.child-{i + 1}"
            )
        children = [kit.subscribe(f"p.child-{i + 1}") for i in range(3)]
        probe = kit.subscribe("p")
        kit.start_turn("p", "do three things")
        for fd in fifos:
            assert wait_for_line(fd, DEADLINE) == b"go\n"
        for child in children:
            until(child, ToolStarted)
        asked = time.monotonic()
        kit.session("p").tell(CancelTurn(reason="stop everything"))
        until(probe, TurnCancelled)
        for child in children:
            assert until(child, TurnCancelled)[-1].reason == "the parent task was cancelled"
        latency = time.monotonic() - asked
        assert kit.runtime.stop(timeout=DEADLINE)
        assert all(live_processes_with(f"sleep {m}") == [] for m in markers)
        print(f"parent cancel -> all 3 children cancelled in {latency * 1000:.1f} ms")
    finally:
        for fd in fifos:
            os.close(fd)
        kit.runtime.stop(timeout=DEADLINE)
