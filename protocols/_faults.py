"""Fault plans: what ``hermes chaos`` breaks, how often, and the workload it breaks it under.

A plan is data. It is written as JSON or YAML, printed, stored next to a failing seed and
replayed: the simulator and the real chaos runner draw every decision ("drop this store
reply?", "does this tool hang?") from a ``random.Random`` seeded by the run's seed, so one
plan and one seed give one run.

Every rate is a probability in [0, 1] applied per opportunity: per message for message
faults and session and pool crashes, per model call (per call made with the key, for a
key's faults), per tool call, per store write. A plan with
every rate at 0 (the default) injects nothing.

The tree::

    FaultPlan
    ├── messages   MessageFaults   drop / delay / duplicate / reorder, per channel
    ├── crashes    CrashFaults     session actor crashes (InjectCrash), process death, credential pool crashes
    ├── model      ModelFaults     HTTP errors, latency, stalls, cut streams, malformed tool calls
    │   └── key_faults  KeyFaults  per API key: 429 (with or without a reset hint), 401, 402
    ├── tools      ToolFaults      raise, hang past the timeout, huge output, slow
    ├── hooks      HookFaults      a plugin's pre_tool_call hook raises, hangs, answers garbage, is slow
    ├── reviews    ReviewFaults    background reviews (nudges) in the workload: crash, hang, failed model call
    ├── providers  ProviderFaults  an external memory provider in the workload: late, hang, raise, crash (prefetch and sync)
    ├── store      StoreFaults     busy, slow commit, crash between write and ack
    └── workload   Workload        sessions, user messages, busy policies, cancels, limits
"""

from __future__ import annotations

import math
from typing import Literal

import msgspec

from ._base import Message
from ._session import BusyPolicy

Channel = Literal["user", "cancel", "store_reply", "model_reply", "tool_result", "timer"]
"""Which messages to a session a message fault may hit.

``user`` (``StartTurn``) and ``cancel`` (``CancelTurn``) come from clients; ``store_reply``
(``MessagesPersisted`` / ``StoreFailed``), ``model_reply`` and ``tool_result`` (reactor
outcomes) and ``timer`` (the turn deadline, retry backoff) come from inside the runtime.
"""

RecoveryPolicy = Literal["fail", "resume"]

ALL_CHANNELS: tuple[Channel, ...] = ("user", "cancel", "store_reply", "model_reply", "tool_result", "timer")


def _check_rates(struct: msgspec.Struct, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(struct, name)
        if not (0.0 <= value <= 1.0):
            msg = f"{type(struct).__name__}.{name} is a probability and must be within [0, 1], not {value!r}"
            raise ValueError(msg)


def _check_seconds(struct: msgspec.Struct, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(struct, name)
        if not (value >= 0 and math.isfinite(value)):
            msg = f"{type(struct).__name__}.{name} must be a finite number of seconds >= 0, not {value!r}"
            raise ValueError(msg)


class MessageFaults(Message, frozen=True, kw_only=True):
    """Faults on messages delivered to a session actor."""

    drop: float = 0.0
    """The message is lost."""
    delay: float = 0.0
    """The message arrives up to ``delay_max_s`` late."""
    delay_max_s: float = 0.5
    duplicate: float = 0.0
    """The message arrives twice (the copy up to ``reorder_window_s`` later)."""
    reorder: float = 0.0
    """The message may overtake, or be overtaken by, others within ``reorder_window_s``."""
    reorder_window_s: float = 0.02
    channels: tuple[Channel, ...] = ("store_reply", "model_reply", "tool_result")
    """Which messages these faults may hit (see :data:`Channel`)."""

    def __post_init__(self) -> None:
        _check_rates(self, ("drop", "delay", "duplicate", "reorder"))
        _check_seconds(self, ("delay_max_s", "reorder_window_s"))


class CrashFaults(Message, frozen=True, kw_only=True):
    """Actors crash on purpose and are restarted by their supervisor: session actors
    (``InjectCrash``), the credential pool, or the whole process at once."""

    session: float = 0.0
    """Per message a session actor is about to handle: it crashes instead (the message
    stays in the inbox for the next incarnation)."""
    max_per_session: int = 2
    """At most this many crashes per session, so a plan never exceeds restart intensity
    by accident; raise it to test escalation."""
    compressing: float = 0.0
    """Per summary call and per segment write of a context compression: the session crashes
    (``InjectCrash``) while that call is in flight or before that write commits. Counted
    against ``max_per_session``."""
    passivate: float = 0.0
    """Per idle moment: the session is passivated (stops normally) and is rehydrated from
    the store by the next message."""
    process: float = 0.0
    """Per run: the whole process dies once (every actor and the reactor at once, as a
    SIGKILL does) at a moment within ``process_window_s``; the store keeps only what it
    committed. The next process settles what was left open, then serves again."""
    process_window_s: float = 3.0
    process_down_s: float = 0.2
    """How long the process stays down; messages sent meanwhile reach the next one."""
    pool: float = 0.0
    """Per message the credential pool actor is about to handle (``LeaseKey``, ``ReportKey``):
    it crashes instead and is restarted; the message, and those sent while it restarts, wait
    in its address for the next incarnation, which starts from the pool's saved state."""
    max_per_pool: int = 3
    """At most this many pool crashes per run (the ``/credentials`` supervisor allows 3 in 5 s)."""
    pool_save_lost: float = 0.0
    """Per pool crash: the last save its exit sends is lost too (the store refused it), so
    the next incarnation starts from the save before: grants, reports and benches made since
    are forgotten."""

    def __post_init__(self) -> None:
        _check_rates(self, ("session", "compressing", "passivate", "process", "pool", "pool_save_lost"))
        for name in ("max_per_session", "max_per_pool"):
            if getattr(self, name) < 0:
                msg = f"CrashFaults.{name} must be >= 0, not {getattr(self, name)}"
                raise ValueError(msg)


class KeyFaults(Message, frozen=True, kw_only=True):
    """Faults of one API key, per model call made with it (drawn before the model's own faults).

    The simulator applies them; ``hermes chaos run`` (one key, the real runtime) says so and
    leaves them out, as it does pool crashes.

    At most one of them per call: ``auth + billing + rate_limit`` must not exceed 1.
    """

    key_id: str
    """The key's id in its pool (the simulator's provider has ``key-1``, ``key-2``, ``key-3``)."""
    rate_limit: float = 0.0
    """The call is answered 429: the key is benched until the limit resets."""
    reset_hint: float = 0.5
    """Of the 429s, the share that say when the limit resets (in up to ``reset_max_s``); the
    others bench the key for the classifier's default (60 s)."""
    reset_max_s: float = 2.0
    auth: float = 0.0
    """The call is answered 401: the provider refuses the key (benched 300 s)."""
    billing: float = 0.0
    """The call is answered 402: the account has no credit (benched 3600 s)."""

    def __post_init__(self) -> None:
        _check_rates(self, ("rate_limit", "reset_hint", "auth", "billing"))
        _check_seconds(self, ("reset_max_s",))
        if not self.key_id:
            msg = "KeyFaults.key_id must name a key"
            raise ValueError(msg)
        total = self.rate_limit + self.auth + self.billing
        if total > 1.0:
            msg = f"KeyFaults of {self.key_id}: rate_limit + auth + billing is the chance of one failure per call and must not exceed 1, not {total:g}"
            raise ValueError(msg)


class ModelFaults(Message, frozen=True, kw_only=True):
    """Faults of the model endpoint, per model call."""

    http_error: float = 0.0
    """The call is answered with an HTTP error, its status drawn from ``http_statuses``."""
    http_statuses: tuple[int, ...] = (429, 500, 503, 529, 401, 400)
    latency: float = 0.0
    """The reply starts up to ``latency_max_s`` late."""
    latency_max_s: float = 2.0
    stall: float = 0.0
    """The stream stops mid-way for ``stall_s`` seconds (past the model timeout unless
    the plan says otherwise)."""
    stall_s: float = 3600.0
    cut: float = 0.0
    """The connection is cut mid-stream (a transport failure)."""
    malformed_tool_calls: float = 0.0
    """A tool-calling reply is broken: arguments that are not JSON, an unknown tool, a
    missing or repeated call id."""
    key_faults: tuple[KeyFaults, ...] = ()
    """Keys that fail on their own (a revoked key, an account out of credit, a low rate
    limit), each drawn when a call runs with that key; keys not named have none."""
    overflow: float = 0.0
    """The call is answered 400 ``context_length_exceeded`` although it fits (providers count
    tokens their own way). Drawn only when the workload sets ``context_length``: a request that
    does not fit the window is refused so always."""

    def __post_init__(self) -> None:
        _check_rates(self, ("http_error", "latency", "stall", "cut", "malformed_tool_calls", "overflow"))
        _check_seconds(self, ("latency_max_s", "stall_s"))
        bad = [s for s in self.http_statuses if not 400 <= s <= 599]
        if bad or not self.http_statuses:
            msg = f"ModelFaults.http_statuses must be a non-empty list of 4xx/5xx statuses, not {list(self.http_statuses)}"
            raise ValueError(msg)
        ids = [k.key_id for k in self.key_faults]
        if len(set(ids)) != len(ids):
            msg = f"ModelFaults.key_faults names a key more than once: {ids}"
            raise ValueError(msg)


class ToolFaults(Message, frozen=True, kw_only=True):
    """Faults of tool calls, per call."""

    error: float = 0.0
    """The tool raises."""
    hang: float = 0.0
    """The tool never returns (it is stopped by the tool timeout)."""
    huge_output: float = 0.0
    """The tool returns ``huge_output_chars`` characters."""
    huge_output_chars: int = 1_000_000
    slow: float = 0.0
    """The tool takes up to ``slow_max_s`` seconds."""
    slow_max_s: float = 30.0

    def __post_init__(self) -> None:
        _check_rates(self, ("error", "hang", "huge_output", "slow"))
        _check_seconds(self, ("slow_max_s",))
        if self.huge_output_chars < 0:
            msg = f"ToolFaults.huge_output_chars must be >= 0, not {self.huge_output_chars}"
            raise ValueError(msg)


class HookFaults(Message, frozen=True, kw_only=True):
    """Faults of an in-process plugin's ``pre_tool_call`` hook, per tool call.

    The hook runs inside the tool call's wait, before the tool, under its own deadline
    (``deadline_s``, the dispatcher's ``PLUGIN_DEADLINE``). With every rate at 0 no hook runs.
    """

    raises: float = 0.0
    """The callback raises (skipped as ``raised``)."""
    hang: float = 0.0
    """The callback never returns (skipped as ``timeout`` at the deadline)."""
    garbage: float = 0.0
    """The callback answers a value that is no decision; half of them past the size limit (``flood``)."""
    slow: float = 0.0
    """The callback answers after up to ``slow_max_s`` seconds (past the deadline: skipped as ``timeout``)."""
    slow_max_s: float = 15.0
    deadline_s: float = 10.0

    def __post_init__(self) -> None:
        _check_rates(self, ("raises", "hang", "garbage", "slow"))
        _check_seconds(self, ("slow_max_s", "deadline_s"))

    @property
    def active(self) -> bool:
        """Whether the plan runs a hook at all."""
        return self.raises + self.hang + self.garbage + self.slow > 0


class ReviewFaults(Message, frozen=True, kw_only=True):
    """Background reviews in the workload, and their faults, per review.

    With ``enabled`` a session counts its turns as the runtime does (the real nudge planner,
    at these intervals) and forks a review when one is due; the review runs beside the user's
    session until it ends or its deadline (``deadline_s``) stops it.
    """

    enabled: bool = False
    memory_interval: int = 2
    """User turns between memory reviews (``memory.nudge_interval``; small, so short sessions review)."""
    min_turns: int = 1
    skill_interval: int = 3
    """Model calls between skill reviews (``skills.creation_nudge_interval``)."""
    work_max_s: float = 2.0
    """Longest normal review, seconds."""
    deadline_s: float = 5.0
    crash: float = 0.0
    """The review's child session crashes part way (ends ``ok=False``)."""
    hang: float = 0.0
    """The review never ends by itself (its deadline stops it)."""
    model_error: float = 0.0
    """The review's model call fails (ends ``ok=False`` at once)."""

    def __post_init__(self) -> None:
        _check_rates(self, ("crash", "hang", "model_error"))
        _check_seconds(self, ("work_max_s", "deadline_s"))
        for name in ("memory_interval", "min_turns", "skill_interval"):
            if getattr(self, name) < 0:
                msg = f"ReviewFaults.{name} must be >= 0, not {getattr(self, name)}"
                raise ValueError(msg)


class ProviderFaults(Message, frozen=True, kw_only=True):
    """An external memory provider (``memory.provider``) in the workload, and its faults, per operation.

    With ``enabled`` the runtime has one external provider actor: each turn's first model call
    first asks its prefetch, waiting at most ``deadline_s`` (``memory.prefetch_timeout``), and a
    turn that answered tells it ``sync_turn``. The actor does one operation at a time, so a late
    or hung one holds those behind it. Each rate applies per operation (a prefetch or a sync).
    """

    enabled: bool = False
    deadline_s: float = 0.5
    answer_max_s: float = 0.1
    """Longest normal operation, seconds."""
    late: float = 0.0
    """The operation answers ``deadline_s`` to ``deadline_s + late_max_s`` seconds after it starts."""
    late_max_s: float = 2.0
    hang: float = 0.0
    """The provider's thread is stuck for ``hang_s`` seconds (every ask behind it waits)."""
    hang_s: float = 30.0
    raises: float = 0.0
    """The provider raises ``ProviderError``: answered as an error."""
    crash: float = 0.0
    """The provider raises anything else: answered as an error, then its actor crashes and is restarted."""
    restart_s: float = 0.01
    """Time ``/memory`` takes to restart a crashed provider actor."""

    def __post_init__(self) -> None:
        _check_rates(self, ("late", "hang", "raises", "crash"))
        _check_seconds(self, ("deadline_s", "answer_max_s", "late_max_s", "hang_s", "restart_s"))
        if self.late + self.hang + self.raises + self.crash > 1.0:
            msg = "ProviderFaults: late + hang + raises + crash is the chance of one fault per operation and must be at most 1"
            raise ValueError(msg)


class StoreFaults(Message, frozen=True, kw_only=True):
    """Faults of the store writer, per write."""

    busy: float = 0.0
    """The write fails (database locked) and is answered ``StoreFailed``; nothing is stored."""
    slow_commit: float = 0.0
    """The commit takes up to ``slow_commit_max_s`` seconds (later writes wait behind it)."""
    slow_commit_max_s: float = 1.0
    crash_after_commit: float = 0.0
    """The writer crashes between commit and acknowledgement: the write is durable but is
    answered ``StoreFailed``; the writer restarts."""

    def __post_init__(self) -> None:
        _check_rates(self, ("busy", "slow_commit", "crash_after_commit"))
        _check_seconds(self, ("slow_commit_max_s",))


class Workload(Message, frozen=True, kw_only=True):
    """What the simulated (or real) clients do, and the session limits they meet."""

    sessions: int = 1
    """Sessions per seed (the simulator) or in total (the real runner)."""
    min_messages: int = 1
    max_messages: int = 4
    """User messages per session, drawn uniformly from [min_messages, max_messages]."""
    mid_turn: float = 0.3
    """A message is sent while the previous turn may still run (the busy policy decides)."""
    policies: tuple[BusyPolicy | None, ...] = (None, "queue", "reject", "interrupt")
    """Busy policies a message may carry (None: the session's default, queue)."""
    cancel: float = 0.1
    """Per message: a cancel follows it at a random moment."""
    tool_calls: float = 0.5
    """A model reply calls tools (else it answers with text)."""
    max_calls: int = 3
    """Tool calls per tool-calling reply, at most."""
    tool_s: float = 0.5
    """Longest normal tool run, seconds."""
    model_s: float = 0.3
    """Longest normal model reply time, seconds."""
    commit_s: float = 0.002
    """Normal store commit time, seconds."""
    turn_timeout_s: float = 120.0
    model_timeout_s: float = 30.0
    tool_timeout_s: float = 20.0
    max_iterations: int = 6
    max_attempts: int = 3
    queue_limit: int = 2
    recovery: RecoveryPolicy = "fail"
    """What a restarted session does with the turn it finds open (as ``SessionDeps.recovery``)."""
    context_length: int = 0
    """The model's context window, in tokens. 0: context compression is off and the model takes
    any request. Above 0: sessions compress (the runtime's defaults, fitted to this window), the
    model reports prompt tokens as a provider counts them and refuses a request that does not fit."""
    result_chars: int = 0
    """Tool results run up to this many characters (at least half of it; 0: a short line)."""
    answer_chars: int = 0
    """Text replies run up to this many characters (at least half of it; 0: a short line)."""

    def __post_init__(self) -> None:
        _check_rates(self, ("mid_turn", "cancel", "tool_calls"))
        for name in ("context_length", "result_chars", "answer_chars"):
            if getattr(self, name) < 0:
                msg = f"Workload.{name} must be >= 0, not {getattr(self, name)}"
                raise ValueError(msg)
        _check_seconds(self, ("tool_s", "model_s", "commit_s", "turn_timeout_s", "model_timeout_s", "tool_timeout_s"))
        if not 1 <= self.min_messages <= self.max_messages:
            msg = f"Workload needs 1 <= min_messages <= max_messages, not {self.min_messages}..{self.max_messages}"
            raise ValueError(msg)
        for name in ("sessions", "max_calls", "max_iterations", "max_attempts"):
            if getattr(self, name) < 1:
                msg = f"Workload.{name} must be >= 1, not {getattr(self, name)}"
                raise ValueError(msg)
        if not self.policies:
            msg = "Workload.policies must name at least one busy policy (null for the session's default)"
            raise ValueError(msg)


class FaultPlan(Message, frozen=True, kw_only=True):
    """A whole chaos run: the faults to inject and the workload they hit."""

    name: str = "plan"
    messages: MessageFaults = msgspec.field(default_factory=MessageFaults)
    crashes: CrashFaults = msgspec.field(default_factory=CrashFaults)
    model: ModelFaults = msgspec.field(default_factory=ModelFaults)
    tools: ToolFaults = msgspec.field(default_factory=ToolFaults)
    hooks: HookFaults = msgspec.field(default_factory=HookFaults)
    reviews: ReviewFaults = msgspec.field(default_factory=ReviewFaults)
    providers: ProviderFaults = msgspec.field(default_factory=ProviderFaults)
    store: StoreFaults = msgspec.field(default_factory=StoreFaults)
    workload: Workload = msgspec.field(default_factory=Workload)
