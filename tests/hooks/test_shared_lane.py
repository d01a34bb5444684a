"""Well-behaved plugins share one lane (one thread, one hand-off per call); a plugin that hangs
in it is skipped within the deadline while the others answer, the same call and the next, and
it goes on a lane of its own, reloaded; a plugin that hangs on every call is disabled once its
stuck threads reach the cap, so it cannot leak a thread per call."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.hooks import Hooks, hooks_spec
from actors.hooks._placement import MAX_STUCK_LANES
from actors.hooks._plugins import discover
from actors.hooks._unit import UnitSource
from supervisor import Runtime
from tests.conftest import DEADLINE

ANSWER = "import threading\n\ndef register(ctx):\n    ctx.register_hook('pre_llm_call', lambda **kw: {'context': f'{NAME} {threading.get_ident()}'})\n"


def _hangs_once(marker: Path, fd: int) -> str:
    """Hangs on its first call in the process (reads a pipe the test writes at the end), then answers."""
    return (
        f"import os, threading\nMARKER = {str(marker)!r}\n\n"
        "def hook(**kw):\n"
        "    if not os.path.exists(MARKER):\n"
        "        open(MARKER, 'w').close()\n"
        f"        os.read({fd}, 1)\n"
        "    return {'context': f'{NAME} {threading.get_ident()}'}\n\n"
        "def register(ctx):\n    ctx.register_hook('pre_llm_call', hook)\n"
    )


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    """A pipe hung plugins read from; written at the end so every stuck thread ends."""
    read, write = os.pipe()
    try:
        yield read, write
    finally:
        os.write(write, b"x" * 64)
        os.close(write)


def _start(home: Path, plugins: dict[str, str], deadline: float) -> tuple[Runtime, Hooks]:
    for name, code in plugins.items():
        (home / "plugins" / name).mkdir(parents=True)
        (home / "plugins" / name / "plugin.yaml").write_text(f"name: {name}\n")
        (home / "plugins" / name / "__init__.py").write_text(f"NAME = {name!r}\n" + code)
    manifests, problems = discover(home)
    assert problems == []
    hooks = Hooks([UnitSource("plugin", m) for m in manifests], [], deadline=deadline, env={})
    runtime = Runtime([hooks_spec()]).start()
    hooks.bind(runtime.registry, runtime.reactor)
    _in_reactor(runtime, hooks.loaded.wait)
    return runtime, hooks


def _in_reactor(runtime: Runtime, work: Any) -> Any:
    out: queue.Queue[Any] = queue.Queue()

    async def run() -> None:
        with trio.fail_after(DEADLINE):
            out.put(await work())

    runtime.reactor.call_soon(trio.lowlevel.spawn_system_task, run)
    return out.get(timeout=DEADLINE)


def _call(runtime: Runtime, hooks: Hooks, published: list[Any]) -> dict[str, int]:
    """One pre_llm_call: each answering plugin's thread, by name (answers in alphabetical order)."""
    answers = _in_reactor(runtime, lambda: hooks.call("pre_llm_call", {"session_id": "s"}, publish=published.append))
    names = [a.source for a in answers]
    assert names == sorted(names)
    return {a.source: int(a.value["context"].split()[1]) for a in answers}


def _lanes(hooks: Hooks) -> dict[str, str]:
    return {p["name"]: p["lane"] for p in hooks.statistics()["plugins"]}


def test_five_well_behaved_plugins_answer_from_one_shared_thread(tmp_path: Path) -> None:
    runtime, hooks = _start(tmp_path, {f"p{n}": ANSWER for n in range(5)}, deadline=DEADLINE)
    try:
        assert set(_lanes(hooks).values()) == {"shared"}
        published: list[Any] = []
        threads = _call(runtime, hooks, published)
        assert sorted(threads) == [f"p{n}" for n in range(5)] and published == []
        assert len(set(threads.values())) == 1  # one thread: one hand-off for the five
        assert threads["p0"] != threading.get_ident()
        assert _call(runtime, hooks, published) == threads  # the same lane the next call
    finally:
        runtime.stop(timeout=DEADLINE)
    assert hooks.shared is not None
    hooks.shared.thread.join(timeout=DEADLINE)  # the reactor's stop closed it
    assert not hooks.shared.thread.is_alive()


def test_a_hook_actor_that_crashes_is_restarted_and_every_plugin_still_answers_on_the_shared_lane(tmp_path: Path) -> None:
    from protocols import ChildRestarted, InjectCrash

    runtime, hooks = _start(tmp_path, {"only": ANSWER}, deadline=DEADLINE)
    restarted = threading.Event()
    runtime.subscribe(lambda e: restarted.set() if isinstance(e, ChildRestarted) and e.path == "/hooks/only" else None)
    try:
        published: list[Any] = []
        before = _call(runtime, hooks, published)
        runtime.lookup("/hooks/only").tell(InjectCrash())
        assert restarted.wait(DEADLINE)
        runtime.lookup("/hooks/only").ask("barrier", timeout=DEADLINE)  # its load is reported
        # The only hook actor stopping (it crashed) did not end the shared lane for good.
        assert _call(runtime, hooks, published) == before and published == []
    finally:
        runtime.stop(timeout=DEADLINE)


def test_a_plugin_hanging_in_the_shared_lane_is_skipped_the_others_answer_and_it_moves_out(tmp_path: Path, pipe: tuple[int, int]) -> None:
    plugins = {name: ANSWER for name in ("a", "b", "d", "e")} | {"c-hangs": _hangs_once(tmp_path / "hung", pipe[0])}
    runtime, hooks = _start(tmp_path, plugins, deadline=1.0)
    try:
        published: list[Any] = []
        # The same call: c-hangs holds the shared lane; d and e (after it) go on a fresh shared lane.
        first = _call(runtime, hooks, published)
        assert sorted(first) == ["a", "b", "d", "e"]  # answered while c-hangs's thread is still stuck
        assert first["a"] == first["b"] and first["d"] == first["e"] and first["a"] != first["d"]
        assert [(e.hook, e.reason) for e in published] == [("c-hangs", "timeout")]
        stats = {p["name"]: p for p in hooks.statistics()["plugins"]}
        assert (stats["c-hangs"]["lane"], stats["c-hangs"]["faults"], stats["c-hangs"]["restarts"], stats["c-hangs"]["stuck_threads"]) == ("own", 1, 1, 1)
        assert {n: (p["lane"], p["faults"]) for n, p in stats.items() if n != "c-hangs"} == {n: ("shared", 0) for n in "abde"}
        # The next call does not wait for the stuck thread: the four share the fresh lane, and
        # c-hangs, reloaded on a lane of its own, answers there.
        published.clear()
        _in_reactor(runtime, hooks.loaded.wait)
        second = _call(runtime, hooks, published)
        assert sorted(second) == ["a", "b", "c-hangs", "d", "e"] and published == []
        assert len({second[n] for n in "abde"}) == 1 and second["a"] == first["d"]
        assert second["c-hangs"] not in (second["a"], first["a"])
    finally:
        runtime.stop(timeout=DEADLINE)


def test_a_plugin_hanging_on_every_call_is_disabled_at_the_cap_of_stuck_threads(tmp_path: Path, pipe: tuple[int, int]) -> None:
    hangs = f"import os\n\ndef register(ctx):\n    ctx.register_hook('pre_llm_call', lambda **kw: os.read({pipe[0]}, 1))\n"
    runtime, hooks = _start(tmp_path, {"a-fine": ANSWER, "z-hangs": hangs}, deadline=0.3)
    try:
        published: list[Any] = []
        for call in range(MAX_STUCK_LANES):
            assert sorted(_call(runtime, hooks, published)) == ["a-fine"]
            assert [(e.hook, e.reason) for e in published] == [("z-hangs", "timeout")] * (call + 1)
        stats = {p["name"]: p for p in hooks.statistics()["plugins"]}["z-hangs"]
        assert (stats["lane"], stats["stuck_threads"], stats["restarts"]) == ("off", MAX_STUCK_LANES, MAX_STUCK_LANES - 1)
        assert "disabled" in stats["disabled"] and "restart hermes" in stats["disabled"]
        stuck = [t for t in threading.enumerate() if t.name in ("hook-lane-shared", "hook-lane-z-hangs")]
        # Disabled: no more calls, no more threads (its stuck ones, the shared lane a-fine uses, and the idle own lane of its last load).
        assert len(stuck) <= MAX_STUCK_LANES + 2
        assert sorted(_call(runtime, hooks, published)) == ["a-fine"] and len(published) == MAX_STUCK_LANES
        assert _lanes(hooks) == {"a-fine": "shared", "z-hangs": "off"}
    finally:
        runtime.stop(timeout=DEADLINE)


def test_a_slow_plugin_gets_the_shared_lane_handed_over_and_runs_on_its_own_lane_after(tmp_path: Path, pipe: tuple[int, int]) -> None:
    # b-waits blocks until c-frees, after it alphabetically, has run: only a hand-over lets it.
    waits = f"import os, threading\n\ndef register(ctx):\n    ctx.register_hook('pre_llm_call', lambda **kw: os.read({pipe[0]}, 1) and {{'context': f'{{NAME}} {{threading.get_ident()}}'}})\n"
    frees = (
        f"import os, threading\n\ndef frees(**kw):\n    os.write({pipe[1]}, b'y')\n    return {{'context': f'{{NAME}} {{threading.get_ident()}}'}}\n\n"
        "def register(ctx):\n    ctx.register_hook('pre_llm_call', frees)\n"
    )
    runtime, hooks = _start(tmp_path, {"a": ANSWER, "b-waits": waits, "c-frees": frees}, deadline=DEADLINE)
    try:
        published: list[Any] = []
        first = _call(runtime, hooks, published)
        assert sorted(first) == ["a", "b-waits", "c-frees"] and published == []  # slow is no fault
        assert first["a"] == first["b-waits"] != first["c-frees"]
        assert _lanes(hooks) == {"a": "shared", "b-waits": "own", "c-frees": "shared"}
        second = _call(runtime, hooks, published)
        assert sorted(second) == ["a", "b-waits", "c-frees"] and published == []
        assert second["a"] == second["c-frees"] == first["c-frees"] != second["b-waits"]
        assert {p["name"]: (p["faults"], p["restarts"]) for p in hooks.statistics()["plugins"]} == {n: (0, 0) for n in ("a", "b-waits", "c-frees")}
    finally:
        runtime.stop(timeout=DEADLINE)


def test_a_plugin_on_a_lane_of_its_own_still_answers_after_its_actor_crashed_and_was_restarted(tmp_path: Path) -> None:
    from protocols import ChildRestarted, InjectCrash

    raises_once = (
        f"import os, threading\nMARKER = {str(tmp_path / 'raised')!r}\n\n"
        "def hook(**kw):\n"
        "    if not os.path.exists(MARKER):\n"
        "        open(MARKER, 'w').close()\n"
        "        raise RuntimeError('first call')\n"
        "    return {'context': f'{NAME} {threading.get_ident()}'}\n\n"
        "def register(ctx):\n    ctx.register_hook('pre_llm_call', hook)\n"
    )
    runtime, hooks = _start(tmp_path, {"own": raises_once}, deadline=DEADLINE)
    restarted = threading.Event()
    runtime.subscribe(lambda e: restarted.set() if isinstance(e, ChildRestarted) and e.path == "/hooks/own" else None)
    try:
        published: list[Any] = []
        assert _call(runtime, hooks, published) == {}  # it raised: skipped, and it leaves the shared lane
        assert _lanes(hooks) == {"own": "own"}
        assert "own" in _call(runtime, hooks, published)  # answered on its own lane
        runtime.lookup("/hooks/own").tell(InjectCrash())
        assert restarted.wait(DEADLINE)
        runtime.lookup("/hooks/own").ask("barrier", timeout=DEADLINE)  # its load is reported
        after = _call(runtime, hooks, published)
        assert "own" in after and after["own"] != threading.get_ident()  # the restarted actor's lane answers
    finally:
        runtime.stop(timeout=DEADLINE)
