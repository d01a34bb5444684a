"""Fault plans as files, the named presets, and the seeded dice every fault decision comes from.

:class:`Dice` gives each concern (model, tools, store, messages, crashes, workload) its own
``random.Random`` stream derived from the run's seed, so masking one injected fault (to
find the fewest faults that still break an invariant) leaves the other streams' draws
where they were. Every injected fault gets an id (``"store:busy#3"``: stream, kind and the
stream's decision number); a run with a mask skips exactly the faults it names.
"""

from __future__ import annotations

import _random
import hashlib
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal, TypeVar

import msgspec

from protocols._base import from_json, to_json
from protocols._faults import (
    CrashFaults,
    FaultPlan,
    HookFaults,
    KeyFaults,
    MessageFaults,
    ModelFaults,
    ProviderFaults,
    ReviewFaults,
    StoreFaults,
    ToolFaults,
    Workload,
)

from .._errors import UsageError

PlanFormat = Literal["json", "yaml"]
T = TypeVar("T")


# -- presets ----------------------------------------------------------------------------------


def calm_plan() -> FaultPlan:
    """No faults at all: the workload alone (busy policies, cancels, tool batches)."""
    return FaultPlan(name="calm")


DEFAULT_KEY_FAULTS = (KeyFaults(key_id="key-1", rate_limit=0.04),)
"""The first key (the one ``fill_first`` uses while it works) is rate limited now and then."""


def default_plan() -> FaultPlan:
    """Every fault the runtime is built to survive today, at rates that make each seed eventful.

    Left out (see ``storm_plan``): session crashes and passivation, store write failures,
    duplicated or dropped client messages. Included: one process death (``kill -9``) in a
    tenth of the runs, a rate-limited first key, and a credential pool that crashes now and then.
    """
    return FaultPlan(
        name="default",
        messages=MessageFaults(delay=0.05, duplicate=0.05, reorder=0.1, drop=0.02),
        model=ModelFaults(
            http_error=0.12,
            latency=0.1,
            stall=0.04,
            cut=0.04,
            malformed_tool_calls=0.15,
            http_statuses=(429, 500, 503, 529, 401, 400),
            key_faults=DEFAULT_KEY_FAULTS,
        ),
        tools=ToolFaults(error=0.08, hang=0.04, huge_output=0.03, huge_output_chars=200_000, slow=0.1),
        store=StoreFaults(slow_commit=0.1, slow_commit_max_s=0.5),
        crashes=CrashFaults(process=0.1, pool=0.01, pool_save_lost=0.3),
        workload=Workload(cancel=0.15, mid_turn=0.35),
    )


def crash_plan() -> FaultPlan:
    """The default faults plus session crashes (recovery policy ``fail``) and more pool crashes."""
    base = default_plan()
    return msgspec.structs.replace(base, name="crash", crashes=CrashFaults(session=0.03, max_per_session=2, process=0.1, pool=0.03, pool_save_lost=0.5))


def storm_plan() -> FaultPlan:
    """Everything, including the faults whose handling is a known finding."""
    base = default_plan()
    keys = (KeyFaults(key_id="key-1", rate_limit=0.08, auth=0.03), KeyFaults(key_id="key-2", rate_limit=0.1, billing=0.02))
    return msgspec.structs.replace(
        base,
        name="storm",
        messages=msgspec.structs.replace(base.messages, channels=("user", "cancel", "store_reply", "model_reply", "tool_result")),
        model=msgspec.structs.replace(base.model, key_faults=keys),
        crashes=CrashFaults(session=0.04, max_per_session=3, passivate=0.3, process=0.1, pool=0.03, pool_save_lost=0.5),
        store=StoreFaults(busy=0.03, slow_commit=0.1, slow_commit_max_s=0.5, crash_after_commit=0.02),
    )


def keys_plan() -> FaultPlan:
    """The default faults with most keys bad and a pool that crashes often, for two sessions sharing it
    (one or two messages each: a seed costs about what one session of the default plan does).

    The first key is refused (401) or rate limited, the second rate limited (with or without
    a reset hint) or out of credit (402), the third rate limited now and then: turns rotate
    keys, find every key benched and wait for a rate limit to pass or fail at once. The pool
    crashes up to three times a run, and half the time its last save is lost with it; now and
    then a session crashes with a lease in flight.
    """
    base = default_plan()
    keys = (
        KeyFaults(key_id="key-1", auth=0.25, rate_limit=0.15),
        KeyFaults(key_id="key-2", rate_limit=0.4, billing=0.05),
        KeyFaults(key_id="key-3", rate_limit=0.1, reset_hint=0.9),
    )
    return msgspec.structs.replace(
        base,
        name="keys",
        model=msgspec.structs.replace(base.model, key_faults=keys),
        crashes=CrashFaults(session=0.01, process=0.1, pool=0.1, max_per_pool=3, pool_save_lost=0.5),
        workload=msgspec.structs.replace(base.workload, sessions=2, max_messages=2),  # two sharing the pool, kept as cheap as one
    )


def process_death_plan() -> FaultPlan:
    """The default faults, and in every run the whole process dies once (as ``kill -9``) and starts again."""
    return msgspec.structs.replace(default_plan(), name="process-death", crashes=CrashFaults(process=1.0))


def passivate_plan() -> FaultPlan:
    """The default faults plus idle sessions passivated and rehydrated (no crash at all)."""
    return msgspec.structs.replace(default_plan(), name="passivate", crashes=CrashFaults(passivate=0.5, process=0.1))


def store_busy_plan() -> FaultPlan:
    """The default faults plus store writes that fail (database busy); no duplicated messages."""
    base = default_plan()
    return msgspec.structs.replace(base, name="store-busy", store=StoreFaults(busy=0.05), messages=msgspec.structs.replace(base.messages, duplicate=0.0))


def client_retries_plan() -> FaultPlan:
    """The default workload with clients that send a StartTurn twice (same turn id): retries."""
    return msgspec.structs.replace(default_plan(), name="client-retries", messages=MessageFaults(duplicate=0.3, channels=("user",)))


def long_plan() -> FaultPlan:
    """Long sessions that compress their context again and again, under the default faults.

    A context window of 8,000 tokens, tool results of 1,200-2,400 characters and answers of up
    to 800: a session of 6-10 messages compresses several times (each pass asks the summary
    model, then commits the compressed conversation as the next segment). Summary calls fail
    as any call does (HTTP errors, cuts, stalls past the timeout, context overflows) and now
    and then a call overflows a window it fits. Crashes are aimed at compression: a session
    crashes while a summary call is in flight or before its segment write commits; the
    process dies in a third of the runs, over the sessions' whole life; commits are often slow
    and sometimes refused or answered as failed after they committed.
    """
    base = default_plan()
    return msgspec.structs.replace(
        base,
        name="long",
        model=msgspec.structs.replace(base.model, overflow=0.02),
        tools=msgspec.structs.replace(base.tools, huge_output=0.01),
        crashes=CrashFaults(session=0.003, compressing=0.08, max_per_session=3, process=0.3, process_window_s=15.0, pool=0.01, pool_save_lost=0.3),
        store=StoreFaults(busy=0.005, slow_commit=0.2, slow_commit_max_s=0.5, crash_after_commit=0.005),
        workload=msgspec.structs.replace(
            base.workload, min_messages=6, max_messages=10, mid_turn=0.2, tool_calls=0.6, context_length=6_000, result_chars=4_000, answer_chars=2_400
        ),
    )


def hooks_plan() -> FaultPlan:
    """The default faults plus a plugin ``pre_tool_call`` hook that raises, hangs, answers garbage or is slow."""
    return msgspec.structs.replace(default_plan(), name="hooks", hooks=HookFaults(raises=0.05, hang=0.03, garbage=0.06, slow=0.08))


def review_plan() -> FaultPlan:
    """The default faults plus background reviews after qualifying turns (some crash, hang past their deadline or
    fail their model call) and an external memory provider whose prefetches and syncs answer late, hang, raise or crash."""
    base = default_plan()
    reviews = ReviewFaults(enabled=True, crash=0.1, hang=0.1, model_error=0.1)
    providers = ProviderFaults(enabled=True, late=0.08, hang=0.03, raises=0.08, crash=0.08)
    workload = msgspec.structs.replace(base.workload, min_messages=2, max_messages=3)
    return msgspec.structs.replace(base, name="review", reviews=reviews, providers=providers, workload=workload)


PRESETS = {
    "calm": calm_plan,
    "default": default_plan,
    "crash": crash_plan,
    "storm": storm_plan,
    "passivate": passivate_plan,
    "store-busy": store_busy_plan,
    "client-retries": client_retries_plan,
    "process-death": process_death_plan,
    "keys": keys_plan,
    "long": long_plan,
    "hooks": hooks_plan,
    "review": review_plan,
}
"""Named plans. Every one keeps every invariant: CI sweeps seeds 0-15,999 of each
(``tests/chaos/test_sweeps.py``); ``hermes chaos sim --all-presets`` sweeps more by hand."""


# -- files --------------------------------------------------------------------------------------


def dump_plan(plan: FaultPlan, fmt: PlanFormat = "json") -> str:
    """The plan as text (JSON pretty-printed, or YAML), every field written out."""
    if fmt == "yaml":
        return msgspec.yaml.encode(plan).decode()
    return msgspec.json.format(to_json(plan).decode(), indent=2)


def parse_plan(text: str | bytes, fmt: PlanFormat = "json") -> FaultPlan:
    """Decode a plan; fields left out take their defaults (so ``{}`` is the calm plan).

    Raises:
        UsageError: the text is not a valid plan (the message names the field).
    """
    try:
        if fmt == "yaml":
            return msgspec.yaml.decode(text, type=FaultPlan)
        return from_json(text, FaultPlan)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        msg = f"not a valid fault plan: {exc}"
        raise UsageError(msg) from exc


def load_plan(source: str | Path) -> FaultPlan:
    """A preset by name (see :data:`PRESETS`) or a ``.json`` / ``.yaml`` file."""
    if isinstance(source, str) and source in PRESETS:
        return PRESETS[source]()
    path = Path(source)
    try:
        text = path.read_text()
    except OSError as exc:
        msg = f"cannot read the fault plan {str(path)!r} ({exc}); give a preset ({', '.join(PRESETS)}) or a file"
        raise UsageError(msg) from exc
    fmt: PlanFormat = "yaml" if path.suffix in (".yaml", ".yml") else "json"
    return parse_plan(text, fmt)


# -- dice ---------------------------------------------------------------------------------------


def _seeded(text: str) -> random.Random:
    """``random.Random(text)``: the same state (``Random.seed``'s version 2 for a str: the text and
    its SHA-512 as one int), without the Python-level checks of ``Random.seed`` (a run opens a
    stream per concern, and a sweep thousands of runs)."""
    rng = random.Random.__new__(random.Random)
    raw = text.encode()
    _random.Random.seed(rng, int.from_bytes(raw + hashlib.sha512(raw).digest()))
    rng.gauss_next = None  # type: ignore[attr-defined]
    return rng


class _Stream:
    """One named stream of a run's decisions."""

    __slots__ = ("count", "random", "rng")

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.random = rng.random
        self.count = 0
        """Decisions taken from it that have a fault id (``fault``, ``pick``)."""


class _Streams(dict[str, _Stream]):
    """Stream name -> its stream, opened (seeded) on first use: ``streams[name]`` is one subscript
    per decision (every step draws several), not a ``get`` call and a test."""

    __slots__ = ("seed",)

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.seed = seed

    def __missing__(self, name: str) -> _Stream:
        entry = self[name] = _Stream(_seeded(f"{self.seed}/{name}"))
        return entry


class Dice:
    """Seeded decisions, one stream per concern; faults can be masked by id.

    Args:
        seed: The run's seed; stream ``name`` is ``random.Random(f"{seed}/{name}")``.
        mask: Ids of faults not to inject (the draws still happen, so later decisions of
            the same stream do not move).
    """

    __slots__ = ("_draws", "injected", "mask", "seed")

    def __init__(self, seed: int, mask: Iterable[str] = ()) -> None:
        self.seed = seed
        self.mask = frozenset(mask)
        self._draws = _Streams(seed)
        """Stream name -> the stream and its count of decisions."""
        self.injected: list[str] = []
        """Ids of the faults injected so far, in order."""

    def stream(self, name: str) -> random.Random:
        return self._draws[name].rng

    def fault(self, stream: str, kind: str, rate: float) -> bool:
        """True when fault ``kind`` is injected at this decision (one draw, unless ``rate`` is 0)."""
        if rate <= 0.0:
            return False
        entry = self._draws[stream]
        entry.count += 1
        if entry.random() >= rate:
            return False
        fault_id = f"{stream}:{kind}#{entry.count}"
        if fault_id in self.mask:
            return False
        self.injected.append(fault_id)
        return True

    def message(self, faults: MessageFaults) -> tuple[float, float] | None:
        """The drop, delay and reorder faults of one delivery, drawn from stream ``messages`` exactly as
        ``fault`` and ``uniform`` would draw them, in one call (every delivery on a faulty channel draws
        them): None when the message is dropped, else (the delay it gets, its reorder jitter)."""
        entry = self._draws["messages"]
        draw = entry.random
        delay = jitter = 0.0
        if faults.drop > 0.0:
            entry.count += 1
            if draw() < faults.drop and self._inject(f"messages:drop#{entry.count}"):
                return None
        if faults.delay > 0.0:
            entry.count += 1
            if draw() < faults.delay and self._inject(f"messages:delay#{entry.count}"):
                delay = faults.delay_max_s * draw()
        if faults.reorder > 0.0:
            entry.count += 1
            if draw() < faults.reorder and self._inject(f"messages:reorder#{entry.count}"):
                delay += faults.reorder_window_s * draw()
                jitter = -1.0 + 2.0 * draw()
        return delay, jitter

    def _inject(self, fault_id: str) -> bool:
        """A drawn fault: injected (and recorded) unless the mask names it."""
        if fault_id in self.mask:
            return False
        self.injected.append(fault_id)
        return True

    def pick(self, stream: str, kinds: Sequence[tuple[str, float]]) -> str | None:
        """Which of ``kinds`` (name, chance; chances summing to at most 1) is injected at this
        decision, if any: one draw, one fault id (``"keys:auth#4"``)."""
        entry = self._draws[stream]
        draw = entry.random()
        entry.count += 1
        number = entry.count
        for kind, rate in kinds:
            if draw < rate:
                fault_id = f"{stream}:{kind}#{number}"
                if fault_id in self.mask:
                    return None
                self.injected.append(fault_id)
                return kind
            draw -= rate
        return None

    def uniform(self, stream: str, low: float, high: float) -> float:
        entry = self._draws[stream]
        return low + (high - low) * entry.random()  # random.Random.uniform's own formula, one call fewer

    def choice(self, stream: str, options: Sequence[T]) -> T:
        """``options[below(stream, len(options))]``: the same draw, without a second call."""
        n = len(options)
        if n <= 0:
            raise ValueError("empty range for below()")
        getrandbits = self._draws[stream].rng.getrandbits
        k = n.bit_length()
        r: int = getrandbits(k)
        while r >= n:
            r = getrandbits(k)
        return options[r]

    def below(self, stream: str, n: int) -> int:
        """An int in [0, n): the draw ``random.Random.randrange(n)`` makes (its ``_randbelow``), without its argument checks."""
        if n <= 0:
            raise ValueError("empty range for below()")
        entry = self._draws[stream]
        getrandbits = entry.rng.getrandbits
        k = n.bit_length()
        r: int = getrandbits(k)
        while r >= n:
            r = getrandbits(k)
        return r
