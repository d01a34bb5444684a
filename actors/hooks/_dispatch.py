"""``Hooks``: the one dispatcher of plugin, gateway and shell hooks (it runs in the reactor).

A call goes to every plugin subscribed to the event at once: the plugins that have always
answered well as one job on the shared lane (one thread, their callbacks one after the other),
each other plugin on its own actor's lane (``_lane``; which lane: ``_placement``). It waits for
their answers up to the call's deadline (blocking the reactor at most ``QUICK_WAIT`` for plugins
that answer quickly, then as a trio wait the last answer wakes; while it waits it watches the
shared lane: a callback that holds it past the shared budget gets the lane handed over, the
others go on at once on a fresh shared lane), then runs the matching shell hooks one after
the other. The answers come back in dispatch order (plugins alphabetically, then shell hooks
in config order) for the pure rules of ``_decide``. A plugin that raises, misses the deadline
or floods is skipped for that call, reported (log, the session's event stream as
``HookSkipped``, ``statistics()`` for /health/detailed) and restarted: its actor imports it
afresh on a fresh lane (``ReloadPlugin``).

Invariant: a hook costs a call at most its deadline; no hook failure fails the call.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import trio

from actors import Address, HermesError, Registry
from actors._reactor import Reactor
from protocols._hooks import ReloadPlugin
from protocols._session import HookSkipped
from supervisor import ChildSpec, DynamicSupervisor, Intensity, Restart, start_child

from ._actor import HookActor
from ._decide import Answer, first_block, skip_reason
from ._lane import Gather, Lane, SharedJob, SharedLane
from ._names import gateway_matches
from ._placement import Place, Standing, after_fault, budget_for, place, stalled, still_behaved
from ._shell import ShellHook, payload, run_shell_hook
from ._unit import Unit, UnitSource

log = logging.getLogger("hermes.hooks")

HOOKS_PATH = "/hooks"
PLUGIN_DEADLINE = 10.0
"""Seconds a plugin's callbacks may take for one call before they are skipped (and the plugin replaced)."""
QUICK_WAIT = 0.001
"""Seconds the reactor blocks (the GIL released) for the answers of plugins that answered quickly
before; past that it awaits them like any wait. The most one call stalls the reactor."""
MAX_IN_FLIGHT = 32
"""Calls one plugin may have unanswered; past that it is skipped as busy (a flood of calls)."""

Publish = Callable[[Any], object]


def hooks_spec() -> ChildSpec:
    """The ``/hooks`` supervisor: a dynamic one, the dispatcher starts each hook's actor."""
    template = ChildSpec(id="hook", actor=HookActor, restart=Restart.TRANSIENT, shutdown=1.0)
    return ChildSpec(id="hooks", actor=DynamicSupervisor, args=(template,), kwargs={"intensity": Intensity(max_restarts=100, within=10.0)})


@dataclasses.dataclass
class _Slot:
    source: UnitSource
    name: str = dataclasses.field(init=False, default="")
    generation: int = 0
    address: Address[Any] | None = None
    lane: Lane | None = None
    events: frozenset[str] | None = None
    """What it registered; None until its actor has loaded it."""
    load_error: str | None = None
    in_flight: int = 0
    quick: bool = True
    """Its last call was answered within ``QUICK_WAIT``: the next one is waited for by blocking briefly."""
    calls: int = 0
    faults: int = 0
    restarts: int = 0
    last_fault: str = ""
    unit: Unit | None = None
    """What its actor loaded (the shared lane runs it); None until loaded."""
    behaved: bool = True
    """Never slow, faulty or late: it runs on the shared lane (see ``_placement``)."""
    disabled: str | None = None
    held: threading.Thread | None = None
    """The retired shared lane's thread its callback kept running in (this call)."""
    stuck: list[threading.Thread] = dataclasses.field(default_factory=list)
    """Threads abandoned in a hung callback of it (those still alive count against the cap)."""

    place: Place = "own"
    """Where its calls run (``_placement.place``, kept up to date by ``restand``)."""

    def restand(self) -> None:
        """After a change of its unit, behaviour or state: where its calls run now."""
        self.place = place(Standing(gateway=self.source.kind == "gateway", loaded=self.unit is not None, behaved=self.behaved, disabled=self.disabled))

    def stuck_alive(self) -> int:
        self.stuck = [t for t in self.stuck if t.is_alive()]
        return len(self.stuck)

    def __post_init__(self) -> None:
        self.name = self.source.name  # read several times per call: no property chain

    def child_id(self) -> str:
        return self.name.replace("/", "_")


def _subscribed(slot: _Slot, event: str) -> bool:
    """Whether ``slot`` takes ``event`` (before its load: every event of its kind)."""
    gateway = slot.source.kind == "gateway"
    if slot.disabled is not None:
        return False
    if slot.events is None:
        return gateway == (":" in event)
    if gateway:
        return any(gateway_matches(pattern, event) for pattern in slot.events)
    return event in slot.events


class Hooks:
    """Every hook of a runtime. ``bind`` it to the running runtime, then ``call`` from the reactor."""

    def __init__(
        self,
        plugins: list[UnitSource],
        shell: list[ShellHook],
        *,
        deadline: float = PLUGIN_DEADLINE,
        env: Mapping[str, str] | None = None,
        problems: list[str] | None = None,
    ) -> None:
        self.slots = [_Slot(source) for source in plugins]
        self.shell = shell
        self.deadline = deadline
        self.env = dict(os.environ if env is None else env)
        self.problems = list(problems or ())
        self.shell_stats: dict[str, dict[str, Any]] = {f"{h.event}: {h.command}": {"calls": 0, "faults": 0, "last_fault": ""} for h in shell}
        self.registry: Registry | None = None
        self.reactor: Reactor | None = None
        self.ready = trio.Event()
        self.loaded = trio.Event()
        """Set (in the reactor) once every plugin's first load is done, well or not."""
        self.calls = 0
        self.shared: SharedLane | None = None
        """The lane well-behaved plugins share (in the reactor; made at first use, anew after a hand-over)."""
        self._stopping = False

    # -- lifecycle (from the thread that started the runtime) --------------------------------

    def bind(self, registry: Registry, reactor: Reactor) -> None:
        """Start every hook's actor under ``/hooks`` (the runtime must hold ``hooks_spec()``)."""
        self.registry, self.reactor = registry, reactor
        for slot in self.slots:
            self._start(slot)
        reactor.at_stop(self._close_shared)
        reactor.call_soon(self.ready.set)
        if not self.slots:
            reactor.call_soon(self.loaded.set)

    def _start(self, slot: _Slot) -> None:
        assert self.registry is not None
        supervisor = self.registry.lookup(HOOKS_PATH)
        lane = Lane(slot.name)

        def current() -> tuple[Lane | None, int]:  # read by an incarnation its supervisor restarted
            return slot.lane, slot.generation

        slot.address = start_child(self.registry, supervisor, slot.child_id(), slot.source, slot.generation, self._loaded, lane, current)
        slot.lane = lane

    def _loaded(self, name: str, generation: int, unit: Unit | None, warnings: tuple[str, ...], error: str | None) -> None:
        """From a hook actor's thread: what its load gave."""
        if self.reactor is not None:
            try:
                self.reactor.call_soon(self._note_loaded, name, generation, unit, error)
            except HermesError:
                pass

    def _note_loaded(self, name: str, generation: int, unit: Unit | None, error: str | None) -> None:
        for slot in self.slots:
            if slot.name == name and slot.generation == generation:
                slot.events = unit.events() if unit is not None else frozenset()
                slot.unit, slot.load_error = unit, error
                slot.restand()
        if all(slot.events is not None for slot in self.slots):
            self.loaded.set()

    async def _close_shared(self) -> None:
        """When the reactor stops: the shared lane's thread ends. Not when the hook actors stop:
        one that crashes is restarted, and the others' calls still need the lane."""
        self._stopping = True
        if self.shared is not None:
            self.shared.close()

    def _shared_lane(self) -> SharedLane | None:
        """The shared lane (in the reactor), made if needed; None once the reactor stopped."""
        if self.shared is None and not self._stopping:
            self.shared = SharedLane()
        return self.shared

    # -- what is subscribed ----------------------------------------------------------------------

    @property
    def empty(self) -> bool:
        return not self.slots and not self.shell

    def wants(self, event: str, tool_name: str | None = None) -> bool:
        """Whether anything may answer ``event`` (cheap: called on every tool and model call)."""
        if any(_subscribed(slot, event) for slot in self.slots):
            return True
        return any(h.event == event and (h.matcher is None or (tool_name is not None and h.matcher.fullmatch(tool_name))) for h in self.shell)

    # -- calling -------------------------------------------------------------------------------------

    async def call(
        self,
        event: str,
        kwargs: dict[str, Any],
        *,
        session_id: str = "",
        cwd: str = "",
        tool_name: str | None = None,
        tool_input: Any = None,
        publish: Publish | None = None,
        stop_at_block: bool = False,
        shell: bool = True,
    ) -> list[Answer]:
        """Every subscribed hook's answers to ``event``, in dispatch order (in the reactor); a
        plugin callback's None (no decision) is no answer."""
        answers = await self._call_plugins(event, kwargs, publish)
        if shell and not (stop_at_block and first_block(answers) is not None):
            answers += await self._call_shell(event, kwargs, session_id, cwd, tool_name, tool_input, publish, stop_at_block)
        return answers

    async def _call_plugins(self, event: str, kwargs: dict[str, Any], publish: Publish | None) -> list[Answer]:
        assert self.reactor is not None or not self.slots
        if not self.slots:
            return []
        if not self.ready.is_set():
            with trio.move_on_after(self.deadline):
                await self.ready.wait()
        targets = [s for s in self.slots if s.lane is not None and _subscribed(s, event)]
        if not targets:
            return []
        self.calls += 1
        sent: list[_Slot] = []
        for slot in targets:
            if slot.in_flight >= MAX_IN_FLIGHT:
                self._fault(slot, event, "busy", f"{slot.in_flight} calls unanswered", publish, replace=False)
                continue
            sent.append(slot)
        if not sent:
            return []
        gather = Gather(trio.lowlevel.current_trio_token().run_sync_soon, len(sent))
        started = time.perf_counter()
        together: list[tuple[str, Unit]] = []
        for slot in sent:
            assert slot.lane is not None
            slot.in_flight += 1
            slot.calls += 1
            if slot.place == "shared" and slot.unit is not None:
                together.append((slot.name, slot.unit))
            else:
                slot.lane.submit(event, kwargs, gather)
        if together:
            self._submit_shared(event, kwargs, gather, together)
        done = gather.wait_briefly(QUICK_WAIT) if all(slot.quick for slot in sent) else gather.park()
        unreached: set[str] = set()
        if not done:
            unreached = await self._await(gather, started + self.deadline)
        for job in gather.jobs:
            job.lane.open.discard(job)
        quick = time.perf_counter() - started <= QUICK_WAIT
        budget = budget_for(self.deadline)
        answers: list[Answer] = []
        for slot in sent:  # alphabetical: the slots are sorted by name
            slot.in_flight -= 1
            slot.quick = quick
            answer = gather.answers.get(slot.name)
            reason = skip_reason(answer)
            if slot.behaved and slot.name not in unreached and not still_behaved(True, reason, gather.took.get(slot.name, 0.0), budget):
                slot.behaved = False
                slot.restand()
            if answer is None and slot.name in unreached:  # a plugin before it hung: not its fault
                self._report(slot, event, "timeout", "not reached in time: another plugin held the shared lane", publish)
            elif answer is None:
                self._fault(slot, event, "timeout", f"no answer within {self.deadline:g} s", publish)
            elif reason is not None:
                self._fault(slot, event, reason, answer[1] or "an answer past the size limit", publish)
            else:
                answers += [Answer(slot.name, value) for value in answer[0] if value is not None]
            slot.held = None
        return answers

    def _submit_shared(self, event: str, kwargs: dict[str, Any], gather: Gather, members: list[tuple[str, Unit]]) -> None:
        lane = self._shared_lane()
        if lane is None:  # stopping: each on its own (closed) lane, answered empty
            for name, _ in members:
                own = self._slot(name).lane
                if own is not None:
                    own.submit(event, kwargs, gather)
            return
        lane.submit(SharedJob(lane, event, kwargs, gather, members))

    async def _await(self, gather: Gather, end: float) -> set[str]:
        """Await the answers until ``end`` (``time.perf_counter``), handing the shared lane over
        whenever a callback holds it past the budget; the members not reached by ``end``."""
        budget = budget_for(self.deadline)
        while not gather.done.is_set():
            now = time.perf_counter()
            if now >= end:
                break
            wait = end - now
            lane = self.shared
            if lane is not None and lane.open:
                running = lane.running()
                if running is not None and stalled(now - running[1], budget):
                    self._hand_over(lane)
                    continue
                wait = min(wait, (running[1] if running is not None else now) + budget - now)
            with trio.move_on_after(max(wait, 0.0)):
                await gather.done.wait()
        unreached: set[str] = set()
        if not gather.done.is_set():
            for job in gather.jobs:  # the deadline: what of this call is still on the shared lane stops
                if job.lane is self.shared and job in job.lane.open:
                    holder, rest = job.hand_over()
                    unreached.update(name for name, _ in rest)
                    if holder is not None and holder not in gather.answers:
                        self._hand_over(job.lane)
        return unreached

    def _hand_over(self, lane: SharedLane) -> None:
        """``lane`` is held by a callback past the budget: that plugin keeps the lane's thread
        (and leaves the shared lane for good); every other job goes on a fresh shared lane."""
        self.shared = None
        stuck, moved = lane.retire()
        if stuck is not None:
            slot = self._slot(stuck)
            slot.behaved, slot.held = False, lane.thread
            slot.restand()
            log.warning("plugin %s held the shared hook lane past %g s: it runs on a lane of its own from now on", stuck, budget_for(self.deadline))
        for job, rest in moved:
            together = [(name, unit) for name, unit in rest if name != stuck]
            for name, _ in rest:
                own = self._slot(name).lane
                if name == stuck and own is not None:
                    own.submit(job.event, job.kwargs, job.gather)
            if together:
                self._submit_shared(job.event, job.kwargs, job.gather, together)

    def _slot(self, name: str) -> _Slot:
        return next(slot for slot in self.slots if slot.name == name)

    async def _call_shell(
        self,
        event: str,
        kwargs: dict[str, Any],
        session_id: str,
        cwd: str,
        tool_name: str | None,
        tool_input: Any,
        publish: Publish | None,
        stop_at_block: bool,
    ) -> list[Answer]:
        answers: list[Answer] = []
        body: bytes | None = None
        for hook in self.shell:
            if hook.event != event or (hook.matcher is not None and (tool_name is None or not hook.matcher.fullmatch(tool_name))):
                continue
            if body is None:
                body = payload(event, kwargs, session_id=session_id, cwd=cwd, tool_name=tool_name, tool_input=tool_input)
            stats = self.shell_stats[f"{hook.event}: {hook.command}"]
            stats["calls"] += 1
            outcome = await run_shell_hook(hook, body, cwd=cwd or None, env=self.env)
            if outcome.problem is not None:
                stats["faults"] += 1
                stats["last_fault"] = f"{outcome.reason}: {outcome.problem}"
                log.warning("shell hook %s %r skipped: %s", event, hook.command, outcome.problem)
                if publish is not None:
                    publish(HookSkipped(hook=hook.command, event=event, reason=outcome.reason, detail=outcome.problem[:300]))
                continue
            if outcome.value is not None:
                answers.append(Answer(hook.command, outcome.value))
                if stop_at_block and first_block(answers[-1:]) is not None:
                    break
        return answers

    def fire_soon(self, event: str, kwargs: dict[str, Any], **where: Any) -> None:
        """Call ``event``'s hooks in the background, answers ignored (from any thread)."""
        if self.reactor is None or not self.wants(event, where.get("tool_name")):
            return
        try:
            self.reactor.call_soon(trio.lowlevel.spawn_system_task, self._fire, event, kwargs, where)
        except HermesError:
            pass  # stopping: an observer's event is dropped

    def fire_soon_in_order(self, calls: Sequence[tuple[str, dict[str, Any], dict[str, Any]]]) -> None:
        """Several ``(event, kwargs, where)`` as :meth:`fire_soon` does, each after the one before
        has ended (two ``fire_soon`` calls are two tasks: either may run first)."""
        wanted = [call for call in calls if self.wants(call[0], call[2].get("tool_name"))]
        if self.reactor is None or not wanted:
            return
        try:
            self.reactor.call_soon(trio.lowlevel.spawn_system_task, self._fire_all, wanted)
        except HermesError:
            pass  # stopping: an observer's event is dropped

    async def _fire_all(self, calls: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> None:
        for event, kwargs, where in calls:
            await self._fire(event, kwargs, where)

    async def _fire(self, event: str, kwargs: dict[str, Any], where: dict[str, Any]) -> None:
        try:
            await self.call(event, kwargs, **where)
        except Exception:  # an exception in a system task would end the reactor
            log.exception("hook %s failed", event)

    # -- faults ------------------------------------------------------------------------------------------

    def _report(self, slot: _Slot, event: str, reason: str, detail: str, publish: Publish | None) -> None:
        log.warning("plugin %s skipped for %s (%s): %s", slot.name, event, reason, detail)
        if publish is not None:
            publish(HookSkipped(hook=slot.name, event=event, reason=reason, detail=detail[:300]))

    def _fault(self, slot: _Slot, event: str, reason: str, detail: str, publish: Publish | None, *, replace: bool = True) -> None:
        slot.faults += 1
        slot.last_fault = f"{event} {reason}: {detail}"[:300]
        self._report(slot, event, reason, detail, publish)
        if not replace:
            return
        if reason == "timeout":  # its thread is stuck in the callback: abandoned
            thread = slot.held if slot.held is not None else slot.lane.thread if slot.lane is not None else None
            if thread is not None and thread not in slot.stuck:
                slot.stuck.append(thread)
        action, why = after_fault(reason == "timeout", slot.stuck_alive())
        if action == "disable":
            slot.disabled = why
            slot.restand()
            log.error("plugin %s %s", slot.name, why)
            return
        self._replace(slot)

    def _replace(self, slot: _Slot) -> None:
        """A fresh import on a fresh lane for ``slot`` (its actor is told; the old lane is closed or abandoned)."""
        if slot.address is None:
            return
        slot.generation += 1
        slot.restarts += 1
        slot.in_flight = 0
        slot.unit = None
        slot.restand()
        lane = Lane(slot.name)
        try:
            slot.address.tell(ReloadPlugin(lane=lane, generation=slot.generation))
        except HermesError:
            slot.address = slot.lane = None  # the tree is stopping
            return
        slot.lane = lane

    def statistics(self) -> dict[str, Any]:
        """For /health/detailed and ``hermes hooks``."""
        return {
            "plugins": [
                {
                    "name": s.name,
                    "kind": s.source.kind,
                    "events": sorted(s.events) if s.events is not None else None,
                    "load_error": s.load_error,
                    "calls": s.calls,
                    "faults": s.faults,
                    "restarts": s.restarts,
                    "last_fault": s.last_fault,
                    "lane": s.place,
                    "stuck_threads": s.stuck_alive(),
                    "disabled": s.disabled,
                }
                for s in self.slots
            ],
            "shell": [{"hook": key, **value} for key, value in self.shell_stats.items()],
            "problems": self.problems,
            "at": time.time(),
        }
