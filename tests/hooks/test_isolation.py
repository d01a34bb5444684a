"""Plugins that raise, hang or flood are skipped for the call, reported and replaced by a
fresh actor (a fresh import); the others' answers still come back, in alphabetical order."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

import trio

from actors.hooks import Hooks, first_block, hooks_spec, joined_context
from actors.hooks._plugins import discover
from actors.hooks._unit import UnitSource
from supervisor import Runtime
from tests.conftest import DEADLINE

PLUGINS = {
    "a-good": 'def register(ctx):\n    ctx.register_hook("pre_llm_call", lambda **kw: {"context": "from a"})\n'
    '    ctx.register_hook("pre_tool_call", lambda tool_name, **kw: {"action": "block", "message": "a says no"} if tool_name == "terminal" else None)\n',
    "b-raises": "COUNT = 0\ndef boom(**kw):\n    raise RuntimeError('plugin bug')\ndef register(ctx):\n    ctx.register_hook(\"pre_llm_call\", boom)\n",
    "c-hangs": "import threading\nRELEASE = threading.Event()\nCALLS = []\n"
    "def hang(**kw):\n    CALLS.append(1)\n    if len(CALLS) == 1:\n        RELEASE.wait(30)\n    return 'after the hang'\n"
    'def register(ctx):\n    ctx.register_hook("pre_llm_call", hang)\n',
    "d-floods": 'def register(ctx):\n    ctx.register_hook("pre_llm_call", lambda **kw: "x" * 200_000)\n',
    "e-blocks-too": 'def register(ctx):\n    ctx.register_hook("pre_tool_call", lambda **kw: {"action": "block", "message": "e says no"})\n',
}


def _call(runtime: Runtime, hooks: Hooks, event: str, kwargs: dict[str, Any], published: list[Any]) -> Any:
    out: queue.Queue[Any] = queue.Queue()

    async def run() -> None:
        out.put(await hooks.call(event, kwargs, publish=published.append))

    runtime.reactor.call_soon(trio.lowlevel.spawn_system_task, run)
    return out.get(timeout=DEADLINE)


def test_a_raising_a_hanging_and_a_flooding_plugin_are_skipped_reported_and_restarted(tmp_path: Path) -> None:
    for name, code in PLUGINS.items():
        (tmp_path / "plugins" / name).mkdir(parents=True)
        (tmp_path / "plugins" / name / "plugin.yaml").write_text(f"name: {name}\n")
        (tmp_path / "plugins" / name / "__init__.py").write_text(code)
    manifests, problems = discover(tmp_path)
    assert problems == []
    hooks = Hooks([UnitSource("plugin", m) for m in manifests], [], deadline=0.5, env={})
    runtime = Runtime([hooks_spec()]).start()
    try:
        hooks.bind(runtime.registry, runtime.reactor)
        published: list[Any] = []
        answers = _call(runtime, hooks, "pre_llm_call", {"session_id": "s"}, published)
        assert joined_context(answers) == "from a"
        skipped = sorted((e.hook, e.reason) for e in published)
        assert skipped == [("b-raises", "raised"), ("c-hangs", "timeout"), ("d-floods", "flood")]
        stats = {p["name"]: p for p in hooks.statistics()["plugins"]}
        assert {n: (p["faults"], p["restarts"]) for n, p in stats.items()} == {
            "a-good": (0, 0),
            "b-raises": (1, 1),
            "c-hangs": (1, 1),
            "d-floods": (1, 1),
            "e-blocks-too": (0, 0),
        }
        # The restarted hanging plugin is a fresh import: its first call hangs again; the
        # next call reaches a third incarnation, whose first call hangs too: always skipped in time.
        published.clear()
        answers = _call(runtime, hooks, "pre_llm_call", {"session_id": "s"}, published)
        assert joined_context(answers) == "from a"
        assert ("c-hangs", "timeout") in [(e.hook, e.reason) for e in published]
        # First block wins, alphabetically.
        block = first_block(_call(runtime, hooks, "pre_tool_call", {"tool_name": "terminal"}, []))
        assert block is not None and (block.source, block.value) == ("a-good", "a says no")
        block = first_block(_call(runtime, hooks, "pre_tool_call", {"tool_name": "read_file"}, []))
        assert block is not None and (block.source, block.value) == ("e-blocks-too", "e says no")
    finally:
        runtime.stop(timeout=DEADLINE)
