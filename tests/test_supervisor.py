"""OTP semantics of supervisor.py: strategies, restart types, intensity, shutdown."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from actors import ActorCrashed, AddressClosed, UsageError
from protocols import ChildExited, ChildRestarted, Escalated, NodeSnapshot, RefreshSettings, ReplaceTemplate, TerminateChild, TreeSnapshot, from_json, to_json
from supervisor import (
    Backoff,
    ChildSpec,
    DynamicSupervisor,
    Intensity,
    Restart,
    Runtime,
    Strategy,
    Supervisor,
    supervisor_spec,
)
from tests.conftest import DEADLINE, CrashingActor, EchoActor, Probe, SlowActor

StartRuntime = Callable[..., Runtime]


def incarnations(runtime: Runtime, *paths: str) -> list[int]:
    return [runtime.lookup(p).ask("incarnation", timeout=DEADLINE) for p in paths]


def crash(runtime: Runtime, path: str) -> None:
    with pytest.raises(ActorCrashed, match="asked to crash"):
        runtime.lookup(path).ask("crash", timeout=DEADLINE)


def specs(*ids: str, **options: Any) -> list[ChildSpec]:
    return [ChildSpec(id=i, actor=EchoActor, **options) for i in ids]


def test_one_for_one_restarts_only_the_child_that_crashed(start_runtime: StartRuntime) -> None:
    runtime = start_runtime(specs("a", "b"), strategy=Strategy.ONE_FOR_ONE)
    crash(runtime, "/a")
    assert incarnations(runtime, "/a", "/b") == [2, 1]


def test_one_for_all_restarts_every_child_when_one_crashes(start_runtime: StartRuntime) -> None:
    runtime = start_runtime(specs("a", "b", "c"), strategy=Strategy.ONE_FOR_ALL)
    crash(runtime, "/b")
    # The crashed child answers only after the whole group restarted, so ask it first.
    assert incarnations(runtime, "/b", "/a", "/c") == [2, 2, 2]


def test_rest_for_one_restarts_the_crashed_child_and_those_started_after_it(start_runtime: StartRuntime) -> None:
    runtime = start_runtime(specs("a", "b", "c"), strategy=Strategy.REST_FOR_ONE)
    crash(runtime, "/b")
    assert incarnations(runtime, "/b", "/a", "/c") == [2, 1, 2]


def test_group_restart_stops_siblings_in_reverse_order_and_starts_them_in_order(start_runtime: StartRuntime) -> None:
    journal: list[Any] = []
    children = [ChildSpec(id=i, actor=EchoActor, args=(None, journal)) for i in ("a", "b", "c")]
    runtime = start_runtime(children, strategy=Strategy.ONE_FOR_ALL)
    assert incarnations(runtime, "/a", "/b", "/c") == [1, 1, 1]
    journal.clear()
    crash(runtime, "/a")
    assert incarnations(runtime, "/a", "/b", "/c") == [2, 2, 2]
    stops = [entry for entry in journal if entry[0] == "stop"]
    assert stops == [("stop", "/c"), ("stop", "/b")]
    starts = [entry[1] for entry in journal if entry[0] == "start"]
    assert sorted(starts) == ["/a", "/b", "/c"]


def test_permanent_child_is_restarted_after_a_normal_stop(start_runtime: StartRuntime) -> None:
    runtime = start_runtime(specs("p", restart=Restart.PERMANENT))
    runtime.lookup("/p").ask("stop", timeout=DEADLINE)
    assert incarnations(runtime, "/p") == [2]


def test_transient_child_is_restarted_after_a_crash_but_not_after_a_normal_stop(
    start_runtime: StartRuntime,
) -> None:
    runtime = start_runtime(specs("t", restart=Restart.TRANSIENT))
    crash(runtime, "/t")
    assert incarnations(runtime, "/t") == [2]
    address = runtime.lookup("/t")
    address.ask("stop", timeout=DEADLINE)
    runtime.stop(timeout=DEADLINE)
    with pytest.raises(AddressClosed, match="stopped for good"):
        address.tell("anyone there?")


def test_temporary_child_is_never_restarted_and_its_address_closes(start_runtime: StartRuntime, probe: Probe) -> None:
    runtime = start_runtime([ChildSpec(id="tmp", actor=EchoActor, args=(probe,), restart=Restart.TEMPORARY), *specs("other")])
    events = Probe()
    runtime.subscribe(events.put)
    address = runtime.lookup("/tmp")
    address.tell("crash")
    assert probe.get() == "crash"
    events.get_matching(lambda e: isinstance(e, ChildExited) and e.path == "/tmp")
    with pytest.raises(AddressClosed):
        address.tell("hello")
    paths = [child.path for child in runtime.snapshot().root.children]
    assert paths == ["/other"]


def test_failure_in_started_is_detected_and_the_child_restarted(start_runtime: StartRuntime) -> None:
    failures = ["first start fails"]
    runtime = start_runtime([ChildSpec(id="flaky", actor=CrashingActor, args=(failures,))])
    assert incarnations(runtime, "/flaky") == [2]
    assert failures == []


class ExplodingConstructor(EchoActor):
    constructed = 0

    def __init__(self) -> None:
        type(self).constructed += 1
        if type(self).constructed == 1:
            raise ValueError("constructor failed once")
        super().__init__()


def test_failure_in_the_constructor_is_treated_as_a_failed_start(start_runtime: StartRuntime) -> None:
    runtime = start_runtime([ChildSpec(id="ctor", actor=ExplodingConstructor)])
    assert incarnations(runtime, "/ctor") == [2]


def test_system_exit_in_a_handler_restarts_only_that_actor(start_runtime: StartRuntime, probe: Probe) -> None:
    runtime = start_runtime([ChildSpec(id="quitter", actor=EchoActor, args=(probe,)), *specs("bystander")])
    runtime.lookup("/quitter").tell("exit")
    assert probe.get() == "exit"
    assert incarnations(runtime, "/quitter", "/bystander") == [2, 1]


def test_exceeding_restart_intensity_escalates_to_the_parent_supervisor(start_runtime: StartRuntime) -> None:
    inner = supervisor_spec("inner", specs("w"), intensity=Intensity(max_restarts=2, within=60))
    runtime = start_runtime([inner, *specs("sibling")])
    for _ in range(2):
        crash(runtime, "/inner/w")
    assert incarnations(runtime, "/inner/w") == [3]
    events = Probe()
    runtime.subscribe(events.put)
    crash(runtime, "/inner/w")  # the third restart within the window: /inner gives up
    escalated = events.get_matching(lambda e: isinstance(e, Escalated))
    assert escalated.path == "/inner"
    assert "/inner/w failed 3 times within 60 s" in escalated.reason
    restarted = events.get_matching(lambda e: isinstance(e, ChildRestarted) and e.path == "/inner")
    assert restarted.restarts == 1
    # The new /inner starts its child afresh; the address is the same, its count goes on.
    assert incarnations(runtime, "/inner/w") == [4]
    tree = runtime.snapshot().root
    inner_node = next(child for child in tree.children if child.path == "/inner")
    assert inner_node.restarts == 1
    assert incarnations(runtime, "/sibling") == [1]


def test_root_giving_up_ends_the_runtime_with_a_clear_reason(start_runtime: StartRuntime) -> None:
    runtime = start_runtime(specs("doomed"), intensity=Intensity(max_restarts=1, within=60))
    crash(runtime, "/doomed")
    crash(runtime, "/doomed")
    assert runtime.wait(DEADLINE), "the runtime did not end after the root gave up"
    assert runtime.failed
    assert runtime.exit_reason is not None
    assert "/doomed failed 2 times within 60 s" in runtime.exit_reason
    assert "gave up" in runtime.exit_reason


def test_messages_sent_while_an_actor_restarts_reach_the_next_incarnation(start_runtime: StartRuntime) -> None:
    received: list[Any] = []

    class Recorder(EchoActor):
        def terminated(self, kind: str) -> None:
            restarting.set()

        def receive(self, message: Any) -> Any:
            if isinstance(message, int):
                received.append((message, self.context.incarnation if self.context else 0))
                return None
            return super().receive(message)

    restarting = threading.Event()
    runtime = start_runtime([ChildSpec(id="rec", actor=Recorder)], backoff=Backoff(initial=0.3))
    address = runtime.lookup("/rec")
    address.tell("crash")
    assert restarting.wait(DEADLINE)
    assert address.state == "restarting"
    for n in range(100):
        address.tell(n)
    assert address.statistics().mailbox == 100
    assert address.ask("incarnation", timeout=DEADLINE) == 2
    assert received == [(n, 2) for n in range(100)]


def test_unread_messages_of_a_crashed_incarnation_go_to_the_next_one_in_order(start_runtime: StartRuntime, probe: Probe) -> None:
    release = threading.Event()
    runtime = start_runtime([ChildSpec(id="slow", actor=SlowActor, args=(release, probe))])
    address = runtime.lookup("/slow")
    address.tell("block_then_crash")
    assert probe.get() == "blocked"
    for n in range(5):
        address.tell(n)  # queued behind the handler that will crash
    release.set()
    assert [probe.get() for _ in range(5)] == [0, 1, 2, 3, 4]
    assert address.ask("incarnation", timeout=DEADLINE) == 2


def test_a_full_restart_buffer_refuses_with_a_counted_error_and_keeps_what_it_holds(start_runtime: StartRuntime, probe: Probe) -> None:
    from actors import MailboxOverflow

    gone = threading.Event()

    class Gone(EchoActor):
        def terminated(self, kind: str) -> None:
            gone.set()

    runtime = start_runtime([ChildSpec(id="busy", actor=Gone, args=(probe,))], buffer_limit=3, backoff=Backoff(initial=0.3))
    address = runtime.lookup("/busy")
    address.tell("crash")
    assert gone.wait(DEADLINE)
    for n in range(3):
        address.tell(n)
    with pytest.raises(MailboxOverflow, match="already holds 3 messages"):
        address.tell(3)
    assert address.statistics().dropped == 1
    assert probe.get() == "crash"
    assert [probe.get() for _ in range(3)] == [0, 1, 2]
    assert address.ask("incarnation", timeout=DEADLINE) == 2


def test_shutdown_stops_children_in_reverse_start_order_depth_first(start_runtime: StartRuntime) -> None:
    journal: list[Any] = []

    def spec(i: str) -> ChildSpec:
        return ChildSpec(id=i, actor=EchoActor, args=(None, journal))

    runtime = start_runtime([spec("a"), supervisor_spec("sup", [spec("x"), spec("y")]), spec("c")])
    incarnations(runtime, "/a", "/sup/x", "/sup/y", "/c")
    assert runtime.stop(timeout=DEADLINE)
    assert [e for e in journal if e[0] == "stop"] == [
        ("stop", "/c"),
        ("stop", "/sup/y"),
        ("stop", "/sup/x"),
        ("stop", "/a"),
    ]
    assert runtime.exit_reason == "stopped"
    assert not runtime.failed


def test_a_child_stuck_past_its_shutdown_timeout_is_abandoned_and_shutdown_completes(start_runtime: StartRuntime, probe: Probe) -> None:
    release = threading.Event()
    runtime = start_runtime([*specs("first"), ChildSpec(id="stuck", actor=SlowActor, args=(release, probe), shutdown=0.1)])
    runtime.lookup("/stuck").tell("block")
    assert probe.get() == "blocked"
    events = Probe()
    runtime.subscribe(events.put)
    try:
        # The stop completes, but reports that a thread had to be abandoned.
        assert runtime.stop(timeout=DEADLINE) is False
        assert runtime.exit_reason == "stopped"
        abandoned = events.get_matching(lambda e: isinstance(e, ChildExited) and e.kind == "abandoned")
        assert abandoned.path == "/stuck"
    finally:
        release.set()  # let the abandoned thread finish so no thread is left behind


def test_dynamic_supervisor_starts_one_actor_per_id_even_under_concurrent_requests(
    start_runtime: StartRuntime,
) -> None:
    built: list[int] = []

    class Counted(EchoActor):
        def __init__(self, name: str) -> None:
            super().__init__()
            built.append(1)
            self.name = name

        def receive(self, message: Any) -> Any:
            if message == "name":
                return self.name
            return super().receive(message)

    sessions = ChildSpec(id="sessions", actor=DynamicSupervisor, args=(ChildSpec(id="t", actor=Counted),))
    runtime = start_runtime([sessions])
    go = threading.Barrier(8)
    found: list[Any] = []

    def request() -> None:
        go.wait(DEADLINE)
        found.append(runtime.start_child("/sessions", "s1", "alice"))

    threads = [threading.Thread(target=request) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
    assert len({id(address) for address in found}) == 1
    assert found[0].ask("name", timeout=DEADLINE) == "alice"
    runtime.lookup("/sessions").ask("barrier", timeout=DEADLINE)
    assert len(built) == 1


def test_dynamic_child_that_ends_for_good_frees_its_id_for_a_new_one(start_runtime: StartRuntime) -> None:
    sessions = ChildSpec(
        id="sessions",
        actor=DynamicSupervisor,
        args=(ChildSpec(id="t", actor=EchoActor, restart=Restart.TRANSIENT),),
    )
    runtime = start_runtime([sessions])
    events = Probe()
    runtime.subscribe(events.put)
    first = runtime.start_child("/sessions", "s1")
    first.ask("stop", timeout=DEADLINE)
    exited = events.get_matching(lambda e: isinstance(e, ChildExited) and e.path == "/sessions/s1")
    assert exited.kind == "normal"
    with pytest.raises(AddressClosed):
        first.tell("late")
    second = runtime.start_child("/sessions", "s1")
    assert second is not first
    assert second.ask("incarnation", timeout=DEADLINE) == 1


def test_snapshot_reports_paths_states_restarts_and_encodes_as_json(start_runtime: StartRuntime) -> None:
    runtime = start_runtime([*specs("a"), supervisor_spec("tools", specs("shell"))])
    crash(runtime, "/tools/shell")
    incarnations(runtime, "/a", "/tools/shell")
    snapshot = runtime.snapshot()
    root = snapshot.root
    assert (root.path, root.kind, root.state) == ("/", "supervisor", "running")
    by_path: dict[str, NodeSnapshot] = {}

    def walk(node: NodeSnapshot) -> None:
        by_path[node.path] = node
        for child in node.children:
            walk(child)

    walk(root)
    assert sorted(by_path) == ["/", "/a", "/tools", "/tools/shell"]
    assert by_path["/tools/shell"].restarts == 1
    assert by_path["/tools/shell"].incarnation == 2
    assert by_path["/tools"].kind == "supervisor"
    assert all(node.state == "running" for node in by_path.values())
    assert snapshot.reactor_lag_ms >= 0
    assert from_json(to_json(snapshot), TreeSnapshot) == snapshot


def test_ask_from_inside_a_handler_is_refused_instead_of_blocking(start_runtime: StartRuntime) -> None:
    class Asker(EchoActor):
        def receive(self, message: Any) -> Any:
            if message == "ask-other":
                assert self.context is not None
                try:
                    self.context.registry.lookup("/other").ask("hi")
                except UsageError as exc:
                    return str(exc)
            return super().receive(message)

    runtime = start_runtime([*specs("other"), ChildSpec(id="asker", actor=Asker)])
    answer = runtime.lookup("/asker").ask("ask-other", timeout=DEADLINE)
    assert "would block an actor handler" in answer


def test_child_specs_with_bad_ids_or_duplicate_ids_are_refused_with_clear_errors() -> None:
    with pytest.raises(UsageError, match="without '/'"):
        ChildSpec(id="a/b", actor=EchoActor)
    with pytest.raises(UsageError, match="subclass of actors.Actor"):
        ChildSpec(id="x", actor=object)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="repeated: dup"):
        Runtime(specs("dup", "dup"))


class FragileSupervisor(Supervisor):
    """A supervisor with a bug: it crashes on "boom"."""

    def receive(self, message: Any) -> Any:
        if message == "boom":
            raise RuntimeError("supervisor bug")
        return super().receive(message)


def test_a_crashed_supervisor_takes_its_children_down_and_is_restarted_with_them(start_runtime: StartRuntime) -> None:
    journal: list[Any] = []
    children = [ChildSpec(id=i, actor=EchoActor, args=(None, journal)) for i in ("x", "y")]
    runtime = start_runtime([ChildSpec(id="fragile", actor=FragileSupervisor, args=(tuple(children),))])
    assert incarnations(runtime, "/fragile/x", "/fragile/y") == [1, 1]
    events = Probe()
    runtime.subscribe(events.put)
    runtime.lookup("/fragile").tell("boom")
    restarted = events.get_matching(lambda e: isinstance(e, ChildRestarted) and e.path == "/fragile")
    assert restarted.incarnation == 2
    assert incarnations(runtime, "/fragile/x", "/fragile/y") == [2, 2]
    assert ("stop", "/fragile/y") in journal and ("stop", "/fragile/x") in journal


def test_terminate_child_stops_a_child_for_good(start_runtime: StartRuntime) -> None:
    runtime = start_runtime(specs("keep", "drop"))
    events = Probe()
    runtime.subscribe(events.put)
    dropped = runtime.lookup("/drop")
    runtime.root.tell(TerminateChild(child_id="drop"))
    exited = events.get_matching(lambda e: isinstance(e, ChildExited) and e.path == "/drop")
    assert exited.kind == "normal"
    runtime.root.ask("barrier", timeout=DEADLINE)  # the stop sequence has finished
    with pytest.raises(AddressClosed):
        dropped.tell("hello")
    assert incarnations(runtime, "/keep") == [1]


def test_a_terminate_during_another_terminate_keeps_both_follow_ups(start_runtime: StartRuntime, probe: Probe) -> None:
    release = threading.Event()
    runtime = start_runtime([ChildSpec(id="slow", actor=SlowActor, args=(release, probe)), *specs("other")])
    slow, other = runtime.lookup("/slow"), runtime.lookup("/other")
    slow.tell("block")
    assert probe.get() == "blocked"
    runtime.root.tell(TerminateChild(child_id="slow"))  # its stop waits for the blocked handler
    runtime.root.tell(TerminateChild(child_id="other"))  # queued behind it
    runtime.root.ask("barrier", timeout=DEADLINE)
    release.set()
    events = Probe()
    runtime.subscribe(events.put)
    for path in ("/slow", "/other"):
        events.get_matching(lambda e, p=path: isinstance(e, ChildExited) and e.path == p)
    runtime.root.ask("barrier", timeout=DEADLINE)
    # Both children are gone for good: the first terminate's step was not overwritten by the second's.
    for address in (slow, other):
        with pytest.raises(AddressClosed):
            address.tell("hello")


def test_a_terminate_during_a_shutdown_does_not_stop_the_shutdown_from_finishing(start_runtime: StartRuntime, probe: Probe) -> None:
    release = threading.Event()
    runtime = start_runtime([*specs("other"), ChildSpec(id="slow", actor=SlowActor, args=(release, probe))])
    runtime.lookup("/slow").tell("block")
    assert probe.get() == "blocked"
    stopped: list[bool] = []
    stopper = threading.Thread(target=lambda: stopped.append(runtime.stop(timeout=DEADLINE)))
    stopper.start()
    runtime.root.tell(TerminateChild(child_id="other"))  # arrives while the shutdown waits for /slow
    release.set()
    stopper.join(DEADLINE)
    assert stopped == [True]
    assert runtime.exit_reason == "stopped"


def test_backoff_delays_the_restart(start_runtime: StartRuntime) -> None:
    runtime = start_runtime(specs("b"), backoff=Backoff(initial=0.2))
    events = Probe()
    runtime.subscribe(events.put)
    asked_at = time.monotonic()  # the restart timer starts after this, so this is a lower bound
    crash(runtime, "/b")
    events.get_matching(lambda e: isinstance(e, ChildRestarted) and e.path == "/b")
    assert time.monotonic() - asked_at >= 0.2
    assert incarnations(runtime, "/b") == [2]


def test_a_replaced_template_starts_new_children_and_restarts_with_its_arguments_and_notifies_running_ones(start_runtime: StartRuntime) -> None:
    class Labelled(EchoActor):
        def __init__(self, label: str, name: str) -> None:
            super().__init__()
            self.label = label
            self.name = name
            self.told: list[Any] = []

        def receive(self, message: Any) -> Any:
            if message == "who":
                return (self.label, self.name, self.told)
            if isinstance(message, RefreshSettings):
                self.told.append("refresh")
                return None
            return super().receive(message)

    sessions = ChildSpec(id="sessions", actor=DynamicSupervisor, args=(ChildSpec(id="t", actor=Labelled, args=("old",)),))
    runtime = start_runtime([sessions])
    running = runtime.start_child("/sessions", "s1", "first")
    assert running.ask("who", timeout=DEADLINE) == ("old", "first", [])
    runtime.lookup("/sessions").tell(ReplaceTemplate(args=("new",), notify=RefreshSettings()))
    runtime.lookup("/sessions").ask("barrier", timeout=DEADLINE)
    assert running.ask("who", timeout=DEADLINE) == ("old", "first", ["refresh"])  # told, and keeps its arguments until it restarts
    assert runtime.start_child("/sessions", "s2", "second").ask("who", timeout=DEADLINE) == ("new", "second", [])
    crash(runtime, "/sessions/s1")
    assert runtime.lookup("/sessions/s1").ask("who", timeout=DEADLINE) == ("new", "first", [])
