"""The hook points of a tool's own pipeline, through a real session: the terminal's
``transform_terminal_output``, the approval gate's ``pre_approval_request`` /
``post_approval_response``, delegation's ``subagent_stop``; and a background hook that raises
(``on_session_end``) reported on the session's stream like the others."""

from __future__ import annotations

import json
from pathlib import Path

from actors.agent import MachineConfig
from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.hooks import Hooks, hooks_spec
from actors.hooks._plugins import discover
from actors.hooks._unit import UnitSource
from actors.tools import REGISTRY
from protocols import ApprovalRequested, ResolveApproval, TurnCompleted
from protocols._session import HookSkipped
from tests.agent.session_kit import AgentKit, Intervals, make_tools, start_kit, until
from tests.conftest import DEADLINE

RECORDER = """
import json

LOG = {log!r}

def record(event):
    def callback(**kwargs):
        with open(LOG, "a") as f:
            f.write(json.dumps({{"event": event, **kwargs}}, default=str) + "\\n")
    return callback

def shout(command, output, exit_code, **kwargs):
    record("transform_terminal_output")(command=command, output=output, exit_code=exit_code, **kwargs)
    return "[transformed] " + output.strip() + " sk-" + "Z9" * 20 if "removed" in output else None

def boom(**kwargs):
    raise RuntimeError("the end hook broke")

def register(ctx):
    for event in ("pre_approval_request", "post_approval_response", "subagent_stop"):
        ctx.register_hook(event, record(event))
    ctx.register_hook("transform_terminal_output", shout)
    ctx.register_hook("on_session_end", boom)
"""


def _kit(tmp_path: Path, model_server: ModelServer) -> tuple[AgentKit, Path]:
    log = tmp_path / "hooks.jsonl"
    plugin = tmp_path / "home" / "plugins" / "recorder"
    plugin.mkdir(parents=True)
    (plugin / "plugin.yaml").write_text("name: recorder\n")
    (plugin / "__init__.py").write_text(RECORDER.format(log=str(log)))
    manifests, problems = discover(tmp_path / "home")
    assert problems == []
    hooks = Hooks([UnitSource("plugin", m) for m in manifests], [], env={})
    tools = {**make_tools(Intervals()), "terminal": REGISTRY.get("terminal").spec(), "delegate_task": REGISTRY.get("delegate_task").spec()}
    config = MachineConfig(traits={n: t.traits for n, t in tools.items()}, retry_base=0.01, turn_timeout=60.0)
    kit = start_kit(
        tmp_path / "state.db", model_server, extra=(hooks_spec(),), tools=tools, config=config, workdir=tmp_path, home=tmp_path / "home", hooks=hooks
    )
    hooks.bind(kit.runtime.registry, kit.runtime.reactor)
    return kit, log


def test_terminal_approval_and_subagent_hooks_fire_and_a_raising_end_hook_is_reported(tmp_path: Path, model_server: ModelServer) -> None:
    (tmp_path / "build").mkdir()
    command = "rm -rf build && echo removed"
    model_server.script(
        [
            ToolCallsReply(calls=(ScriptedCall(name="terminal", arguments=json.dumps({"command": command})),)),
            ToolCallsReply(calls=(ScriptedCall(name="delegate_task", arguments=json.dumps({"tasks": [{"goal": "find A"}]})),)),
            TextReply(content="all done"),
        ],
        session="hp",
    )
    model_server.script([TextReply(content="A is 1")], session="hp.child-1")
    kit, log = _kit(tmp_path, model_server)
    try:
        probe = kit.subscribe("hp")
        kit.start_turn("hp", "clean up, then ask a child")
        request = until(probe, ApprovalRequested)[-1]
        kit.session("hp").tell(ResolveApproval(request_id=request.request_id, choice="once"))
        events = until(probe, TurnCompleted)
        skipped = until(probe, HookSkipped)[-1]  # on_session_end runs after the turn, in the background
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)
    assert events[-1].text == "all done"
    assert (skipped.hook, skipped.event, skipped.reason) == ("recorder", "on_session_end", "raised")
    assert "the end hook broke" in skipped.detail
    # The model saw the transformed output, redacted like the command's own.
    tool_results = [m for r in model_server.requests if r.session == "hp" for m in r.body["messages"] if m["role"] == "tool"]
    assert tool_results[0]["content"].startswith("[transformed] removed")
    assert "Z9Z9" not in json.dumps(tool_results)
    # The lane ran the plugin's calls in order; the end hook's fault came after them all.
    records = [json.loads(line) for line in log.read_text().splitlines()]
    by_event = {r["event"]: r for r in records}
    assert [r["event"] for r in records] == ["pre_approval_request", "post_approval_response", "transform_terminal_output", "subagent_stop"]
    asked = by_event["pre_approval_request"]
    assert command in asked["command"] and asked["pattern_keys"] and asked["pattern_key"] == asked["pattern_keys"][0]
    assert (asked["session_key"], asked["surface"]) == ("hp", "gateway") and asked["description"]
    assert by_event["post_approval_response"]["choice"] == "once"
    terminal = by_event["transform_terminal_output"]
    assert (terminal["command"], terminal["output"].strip(), terminal["exit_code"], terminal["cwd"]) == (command, "removed", 0, str(tmp_path))
    child = by_event["subagent_stop"]
    assert (child["parent_session_id"], child["child_status"], child["child_summary"], child["child_role"]) == ("hp", "completed", "A is 1", None)
    assert isinstance(child["duration_ms"], int) and child["duration_ms"] >= 0
