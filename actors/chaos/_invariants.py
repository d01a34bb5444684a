"""The invariants of rule 5, checked against what a run shows: events, tool runs, transcripts.

One checker serves the simulator (fed after every step, with virtual time), the real
chaos runner (fed the recorded event streams and supervision events, then the stored
transcripts) and tests. It never looks inside a session; it judges what a client, the
store and the supervisor can see:

- ``ack_not_durable`` / ``user_message_count``: every acknowledged user message
  (``UserMessageSaved``) is durable when acknowledged, and in the durable transcript
  exactly once at the end.
- ``unsanitized_model_input`` / ``durable_unpaired`` / ``idle_unpaired``: every assistant
  tool call has exactly one tool result, in what a model is sent, in the store at rest, and
  in an idle session's memory (the sanitizer has nothing to add or drop).
- ``model_before_ack``: the model is called only once the turn's user message is durable.
- ``tool_ran_twice`` / ``tool_before_write_ahead``: no tool call runs twice (across crashes
  too), and none runs before the assistant message asking for it is durable.
- ``turn_started_twice`` / ``two_turns_running`` / ``terminal_count`` /
  ``spurious_recovery`` / ``turn_never_ended`` / ``deadline_missed``: each turn a session
  took (started or queued) ends exactly once, before its deadline (or, if its actor died
  before the deadline, by the recovery's verdict within ``RECOVERY_BOUND`` of the crash).
- ``hook_overran`` / ``hook_fault_decided`` (simulator): a plugin hook costs a tool call at
  most its deadline, and a skipped hook (raised, hung, flooded) decides nothing (no block).
- ``seq_gap``: every subscriber sees sequence numbers without gaps.
- ``two_live_actors`` / ``restart_intensity``: one live actor per session path; no
  supervisor restarts more children than its intensity allows.
- ``misattributed_failure`` (simulator): a turn is failed for a store error only by a
  failed write of its own. ``no_quiescence``: the run never came to rest.
- The credential pool's rules (simulator): ``lease_unanswered``, ``benched_key_granted``,
  ``usage_double_counted``, ``usage_uncounted``, ``model_key_not_leased``; see ``_pool_checks``.
- Context compression's rules (simulator): ``loaded_mixed_segments``, ``loaded_unpaired``,
  ``segment_unpaired``, ``segment_mixed``, ``summary_split_pair``, ``compressed_before_commit``,
  ``too_many_passes``, ``answered_twice``; see ``_compress_checks``.
- Background reviews' rules (simulator): ``review_overlap``, ``review_past_deadline``,
  ``review_never_ended``, ``review_delayed_turn``, ``review_in_user_transcript``; see ``_review_checks``.
- Memory providers' rules (simulator): ``memory_changed_turn``, ``prefetch_past_deadline``,
  ``memory_skip_reported``, ``memory_block_in_transcript``; see ``_memory_checks``.

Crashes are learnt from supervision events: ``ChildRestarted`` of a session's path means
its previous incarnation died; the turns it had open must then be ended by the recovery
(a ``TurnFailed`` without a turn id, or a resumed turn).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from protocols import ChatMessage, ChildExited, ChildRestarted, ChildStarted, Escalated
from protocols._session import (
    ContextCompressed,
    MemorySkipped,
    SessionEvent,
    SessionRecovered,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnQueued,
    TurnRejected,
    TurnStarted,
    UserMessageSaved,
)

from ..agent._sanitize import paired, sanitize
from ._compress_checks import CompressionChecks
from ._memory_checks import MemoryChecks
from ._pool_checks import PoolChecks
from ._review_checks import ReviewChecks

RECOVERY_BOUND = 2.0
"""Seconds from a crash to the recovery's verdict on the turn it interrupted (a restart, then
a load that may wait behind slow commits): a turn whose actor died before its deadline may
end this much after the deadline, and only as the recovery's ``TurnFailed`` (``restarted``)."""

RULES = (
    "ack_not_durable",
    "user_message_count",
    "unsanitized_model_input",
    "durable_unpaired",
    "idle_unpaired",
    "model_before_ack",
    "tool_ran_twice",
    "tool_before_write_ahead",
    "turn_started_twice",
    "two_turns_running",
    "terminal_count",
    "spurious_recovery",
    "turn_never_ended",
    "deadline_missed",
    "seq_gap",
    "hook_overran",
    "hook_fault_decided",
    "two_live_actors",
    "restart_intensity",
    "misattributed_failure",
    "no_quiescence",
    "lease_unanswered",
    "benched_key_granted",
    "usage_double_counted",
    "usage_uncounted",
    "model_key_not_leased",
    "loaded_mixed_segments",
    "loaded_unpaired",
    "segment_unpaired",
    "segment_mixed",
    "summary_split_pair",
    "compressed_before_commit",
    "too_many_passes",
    "answered_twice",
)


@dataclasses.dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant: which rule, where, when, and what was seen."""

    rule: str
    session_id: str
    detail: str
    at: float
    """Virtual seconds (simulator) or seconds since the run started (real runner)."""
    step: int = -1
    """The simulator's step index when it was seen (-1 outside the simulator)."""

    def describe(self) -> str:
        where = f" step {self.step}" if self.step >= 0 else ""
        return f"[{self.rule}] session {self.session_id} at {self.at:.3f} s{where}: {self.detail}"


class _Book:
    """What the checker knows of one session's turns."""

    __slots__ = ("acked", "crashed_at", "deadline_reported", "ended", "lost", "queued", "rejected", "resuming", "rewritable", "running", "started", "texts")

    def __init__(self) -> None:
        self.running: str | None = None
        self.started: dict[str, float] = {}
        self.queued: set[str] = set()
        self.ended: dict[str, str] = {}
        self.rejected: set[str] = set()
        self.texts: dict[str, str] = {}
        self.acked: dict[str, str] = {}
        """turn id -> user text, for every UserMessageSaved."""
        self.lost: list[str] = []
        """Turns open when the session's actor died; its recovery must end the running one."""
        self.resuming = False
        self.deadline_reported: set[str] = set()
        self.crashed_at: dict[str, float] = {}
        """Turn id -> when the actor running it crashed."""
        self.rewritable: set[str] = set()
        """Turns that ended before the process died but whose end was not committed yet: the
        next process finds them running and fails them ``interrupted`` (once)."""


class Invariants:
    """Collects :class:`Violation` records from what a run shows.

    Args:
        turn_timeout: A turn must end within this many seconds of ``TurnStarted``.
        slack: Seconds of lateness tolerated on top (message delays, thread scheduling).
        max_restarts: Restart intensity of the session supervisor: at most this many
            restarts within ``within`` seconds.
        within: The intensity window, seconds.
        lease_bound: A ``LeaseKey`` must be answered within this many seconds.
    """

    def __init__(self, *, turn_timeout: float, slack: float = 0.0, max_restarts: int = 50, within: float = 10.0, lease_bound: float = 1.0) -> None:
        self.turn_timeout = turn_timeout
        self.slack = slack
        self.max_restarts = max_restarts
        self.within = within
        self.due = math.inf
        """No deadline (a turn's, a lease's) can be missed before this moment: :meth:`advance` looks only after it."""
        self.violations: list[Violation] = []
        self.step = -1
        self._books: dict[str, _Book] = {}
        self._tool_runs: collections.Counter[tuple[str, str]] = collections.Counter()
        self._seqs: dict[object, int] = {}
        self._live: dict[str, set[int]] = {}
        self._exit_due: dict[str, int] = {}
        self._restarts: dict[str, collections.deque[float]] = {}
        self.counts: collections.Counter[str] = collections.Counter()
        """Events seen, by kind (``turns``, ``completed``, ``failed``, ``cancelled``, ``restarts``, ...)."""
        self.pool = PoolChecks(self.violate, self.counts, lease_bound)
        """The credential pool's rules (``_pool_checks``)."""

    # The rules of features a plan may leave off are made when first used (a sweep makes a
    # checker per seed, and most plans use one or none of them).

    @functools.cached_property
    def compression(self) -> CompressionChecks:
        """Context compression's rules (``_compress_checks``)."""
        return CompressionChecks(self.violate, self.counts)

    @functools.cached_property
    def reviews(self) -> ReviewChecks:
        """Background reviews' rules (``_review_checks``)."""
        return ReviewChecks(self.violate, self.counts)

    @functools.cached_property
    def memory(self) -> MemoryChecks:
        """Memory providers' rules (``_memory_checks``)."""
        return MemoryChecks(self.violate, self.counts)

    # -- reporting ---------------------------------------------------------------------------------

    def violate(self, rule: str, session_id: str, detail: str, at: float) -> None:
        self.violations.append(Violation(rule=rule, session_id=session_id, detail=detail, at=at, step=self.step))

    def book(self, session_id: str) -> _Book:
        book = self._books.get(session_id)
        if book is None:
            book = self._books[session_id] = _Book()
        return book

    # -- session events ------------------------------------------------------------------------------

    def event(self, session_id: str, event: SessionEvent, now: float, *, subscriber: object = None) -> None:
        """One event of a session's stream, as a subscriber received it."""
        if subscriber is not None:
            last = self._seqs.get(subscriber)
            if last is not None and event.seq != last + 1:
                self.violate("seq_gap", session_id, f"event {type(event).__name__} has seq {event.seq} after {last}", now)
            self._seqs[subscriber] = event.seq
        book = self._books.get(session_id) or self.book(session_id)
        turn_id = event.turn_id
        kind = type(event)  # events are final structs: one type lookup, not a class pattern per case
        if type(event) is TurnStarted:
            self.counts["turns"] += 1
            if turn_id in book.started or turn_id in book.ended:
                self.violate("turn_started_twice", session_id, f"turn {turn_id} started again", now)
            if book.running is not None:
                self.violate("two_turns_running", session_id, f"turn {turn_id} started while {book.running} runs", now)
            book.queued.discard(turn_id)
            book.started[turn_id] = now
            book.texts[turn_id] = event.text
            book.running = turn_id
        elif kind is TurnQueued:
            self.counts["queued"] += 1
            if turn_id in book.started or turn_id in book.ended or turn_id in book.queued:
                self.violate("turn_started_twice", session_id, f"turn {turn_id} queued after it was taken", now)
            book.queued.add(turn_id)
        elif kind is TurnRejected:
            self.counts["rejected"] += 1
            book.rejected.add(turn_id)
        elif kind is UserMessageSaved:
            if turn_id in book.texts:
                book.acked[turn_id] = book.texts[turn_id]
        elif type(event) is SessionRecovered:
            self.counts["recovered"] += 1
            if event.resumed:
                self.compression.resumed(session_id)
                if book.running is None and not book.lost:
                    self.violate("spurious_recovery", session_id, "the recovery resumed a turn although none was open", now)
                book.resuming = True
        elif kind is TurnFailed or kind is TurnCompleted or kind is TurnCancelled:
            self._reclaim(book, turn_id)
            self._terminal(session_id, book, event, now)
        else:
            if type(event) is ContextCompressed:
                self.compression.announced(session_id, event, now)
            elif type(event) is MemorySkipped:
                self.memory.reported_skip(session_id, event, now)
            self._reclaim(book, turn_id)
            if turn_id and book.resuming and turn_id not in book.started and turn_id not in book.ended:
                self._adopt(book, turn_id, now)
        running = book.running
        if running is not None:  # a turn that may be running from now on: its deadline is watched
            due = book.started.get(running, now) + self.turn_timeout + self.slack
            if due < self.due:
                self.due = due

    @staticmethod
    def _reclaim(book: _Book, turn_id: str) -> None:
        """A turn the crash interrupted shows up again under its own id (failed or resumed by
        the recovery, which knew it from the session's hub): it is running again."""
        if turn_id and turn_id in book.lost:
            book.lost.remove(turn_id)
            book.resuming = False
            book.running = turn_id

    def _adopt(self, book: _Book, turn_id: str, now: float) -> None:
        """The first event of a resumed turn: it carries on the turn the crash interrupted."""
        book.resuming = False
        interrupted = book.running or (book.lost[0] if book.lost else None)
        if interrupted is not None:
            book.ended[interrupted] = f"resumed as {turn_id}"
            if book.lost and book.lost[0] == interrupted:
                book.lost.pop(0)
        book.started[turn_id] = now
        book.running = turn_id

    def _terminal(self, session_id: str, book: _Book, event: SessionEvent, now: float) -> None:
        kind = type(event).__name__.removeprefix("Turn").lower()
        self.counts[kind] += 1
        turn_id = event.turn_id
        if not turn_id:
            # The recovery's verdict on the turn that was open when the actor died.
            if isinstance(event, TurnFailed) and event.kind == "restarted":
                lost = book.lost[0] if book.lost else book.running
                if lost is None:
                    self.violate("spurious_recovery", session_id, "a restarted session failed a turn although none was open", now)
                    return
                if book.lost:
                    book.lost.pop(0)
                book.ended[lost] = "failed (restarted)"
                if book.running == lost:
                    book.running = None
                return
            self.violate("terminal_count", session_id, f"{type(event).__name__} without a turn id", now)
            return
        if book.resuming and turn_id not in book.started and turn_id not in book.queued and turn_id not in book.ended:
            self._adopt(book, turn_id, now)
        if turn_id in book.rewritable and isinstance(event, TurnFailed) and event.kind == "interrupted":
            book.rewritable.discard(turn_id)
            self.counts["ends_rewritten"] += 1
            return
        if turn_id in book.ended:
            self.violate("terminal_count", session_id, f"turn {turn_id} ended twice ({book.ended[turn_id]}, then {kind})", now)
            return
        if turn_id in book.queued:
            book.queued.discard(turn_id)
            book.ended[turn_id] = kind
            return
        if turn_id not in book.started:
            self.violate("terminal_count", session_id, f"turn {turn_id} ended ({kind}) but was never started or queued", now)
            return
        book.ended[turn_id] = kind
        if book.running == turn_id:
            book.running = None
        late = now - book.started[turn_id] - self.turn_timeout
        if late > self.slack and turn_id not in book.deadline_reported:
            crashed = book.crashed_at.get(turn_id)
            in_time = crashed is not None and crashed - book.started[turn_id] - self.turn_timeout <= self.slack and now - crashed <= RECOVERY_BOUND
            if isinstance(event, TurnFailed) and event.kind == "restarted" and in_time:
                # Its actor died in time (at the deadline, say), and the next one failed it as
                # soon as it had loaded: the lateness is the restart, not a missed deadline.
                self.counts["ended_late_by_restart"] += 1
                return
            self.violate("deadline_missed", session_id, f"turn {turn_id} ended {late:.3f} s after its deadline", now)

    def crashed(self, session_id: str, now: float) -> None:
        """The session's actor died abnormally: its open turns wait for the recovery's verdict."""
        self.counts["restarts"] += 1
        book = self.book(session_id)
        if book.running is not None:
            book.lost.append(book.running)
            book.crashed_at[book.running] = now
            book.running = None
        # Queued turns lived only in the dead actor's memory; nothing will end them unless
        # the recovery does, so they stay open (and are reported if they never end).
        book.resuming = False

    def process_died(self, session_id: str, stored: dict[str, str], now: float) -> None:
        """The whole process died (``stored``: the store's turn statuses at that moment).

        A turn the store shows running must be ended by the next process (failed,
        ``interrupted``), even one whose end this process had already shown (its end was not
        committed: the one known window). A turn that is not running in the store was never
        acknowledged (its user message was not committed) or its end is durable: nothing
        more is owed for it, and a client may send it again.
        """
        self.counts["process_deaths"] += 1
        book = self.book(session_id)
        self.pool.sender_died(session_id)
        open_turns = [t for t in (book.running, *book.lost) if t is not None] + sorted(book.queued)
        book.running, book.lost, book.resuming = None, [], False
        book.queued.clear()
        for turn_id in dict.fromkeys(open_turns):
            if stored.get(turn_id) == "running":
                book.lost.append(turn_id)
            elif stored.get(turn_id) is None:
                book.started.pop(turn_id, None)  # never stored: forgotten, as the next process forgets it
            else:
                book.ended[turn_id] = f"{stored[turn_id]} (in the store)"
        book.rewritable = {t for t, kind in book.ended.items() if stored.get(t) == "running" and t not in book.lost}

    def advance(self, now: float) -> None:
        """Report running turns that passed their deadline (the simulator calls it as time moves)."""
        if now <= self.due and now <= self.pool.next_due:
            return
        self.pool.advance(now)
        due = math.inf
        limit = self.turn_timeout + self.slack
        for session_id, book in self._books.items():
            turn_id = book.running
            if turn_id is None or turn_id in book.deadline_reported:
                continue
            started = book.started[turn_id]
            if now - started > limit:
                book.deadline_reported.add(turn_id)
                self.violate("deadline_missed", session_id, f"turn {turn_id} still runs {now - started:.3f} s after it started", now)
            else:
                due = min(due, started + limit)
        self.due = due

    # -- model calls, tools and transcripts ---------------------------------------------------------------

    def model_called(self, session_id: str, messages: Sequence[ChatMessage], now: float) -> None:
        """What a model is sent (system messages first) must need no sanitizing."""
        body = [m for m in messages if m.role != "system"]
        if paired(body):  # what sanitize would leave as it is (nearly every call): no copy made
            return
        fixed, added = sanitize(body)
        if added or len(fixed) != len(body):
            self.violate(
                "unsanitized_model_input", session_id, f"a model was sent {added} unanswered call(s) / {len(body) - len(fixed) + added} stray result(s)", now
            )

    def user_message_durable(
        self, session_id: str, turn_id: str, durable_texts: Iterable[str] | collections.Counter[str], now: float, *, rule: str = "ack_not_durable"
    ) -> None:
        """At an acknowledgement (or a model call): the turn's user message must be stored."""
        text = self.book(session_id).texts.get(turn_id)
        if text is not None and text not in durable_texts:
            what = "acknowledged" if rule == "ack_not_durable" else "sent to the model"
            self.violate(rule, session_id, f"the user message of turn {turn_id} was {what} before it was durable", now)

    def tool_ran(self, session_id: str, call_id: str, now: float, *, write_ahead: bool = True) -> None:
        """A tool call started; ``write_ahead`` says whether its assistant message was durable."""
        key = (session_id, call_id)
        self._tool_runs[key] += 1
        self.counts["tool_runs"] += 1
        if self._tool_runs[key] == 2:
            self.violate("tool_ran_twice", session_id, f"tool call {call_id} ran twice", now)
        if not write_ahead:
            self.violate("tool_before_write_ahead", session_id, f"tool call {call_id} ran before its call was durable", now)

    def hook_called(self, session_id: str, call_id: str, cost_s: float, deadline_s: float, skipped: str | None, blocked: str | None, now: float) -> None:
        """A tool call's plugin hook: what it cost, why it was skipped, whether it blocked."""
        if cost_s > deadline_s:
            self.violate("hook_overran", session_id, f"the hook of {call_id} cost {cost_s:.3f} s, past its {deadline_s:g} s deadline", now)
        if skipped is not None and blocked is not None:
            self.violate("hook_fault_decided", session_id, f"the hook of {call_id} was skipped ({skipped}) yet blocked the call", now)

    def idle_transcript(self, session_id: str, transcript: Sequence[ChatMessage], now: float) -> None:
        """An idle session's transcript (in memory) is settled."""
        if paired(transcript):
            return
        fixed, added = sanitize(transcript)
        if added or len(fixed) != len(transcript):
            self.violate("idle_unpaired", session_id, f"an idle session has {added} unanswered call(s)", now)

    def durable_transcript(
        self,
        session_id: str,
        messages: Sequence[ChatMessage],
        now: float,
        *,
        originals: Sequence[ChatMessage] | None = None,
        users: Mapping[str, int] | None = None,
    ) -> None:
        """The stored transcript at rest: calls paired with results, acknowledged messages once each.

        ``messages`` is what a load reads (the newest segment); ``originals`` (when compressions
        copied messages into new segments) every message stored once, which user messages are
        counted in. ``users``: those counts by text, when the caller keeps them as it stores
        (the simulated store does): then they are not counted again here.
        """
        fixed, added = sanitize(messages)
        if added or len(fixed) != len(messages):
            stray = len(messages) - len(fixed) + added
            self.violate(
                "durable_unpaired", session_id, f"the stored transcript has {added} call(s) without a result and {stray} stray or repeated result(s)", now
            )
        if users is None:
            users = collections.Counter(m.content for m in (messages if originals is None else originals) if m.role == "user" and m.content is not None)
        for turn_id, text in self.book(session_id).acked.items():
            if users.get(text, 0) != 1:
                self.violate("user_message_count", session_id, f"the acknowledged message of turn {turn_id} is stored {users.get(text, 0)} times", now)

    # -- supervision ------------------------------------------------------------------------------------

    def supervision(self, event: Any, now: float) -> None:
        """A supervision event (as ``Runtime.subscribe`` delivers them, in order)."""
        kind = type(event)  # final structs: by exact type, as in ``event``
        if kind is ChildStarted or kind is ChildRestarted:
            path, incarnation = event.path, event.incarnation
            self._check_exit_due(path, None, now)
            live = self._live.setdefault(path, set())
            if live:
                # The kernel publishes ChildRestarted before the ChildExited that caused it.
                if live == {incarnation - 1} and kind is ChildRestarted:
                    self._exit_due[path] = incarnation - 1
                else:
                    self.violate("two_live_actors", _session_of(path), f"{path} incarnation {incarnation} started while {sorted(live)} run", now)
            live.add(incarnation)
            if kind is ChildRestarted:
                self._note_restart(path, now)
                session_id = _session_of(path)
                if session_id:
                    self.crashed(session_id, now)
        elif kind is ChildExited:
            self._check_exit_due(event.path, event.incarnation, now)
            self._live.get(event.path, set()).discard(event.incarnation)
        elif kind is Escalated:
            self.counts["escalations"] += 1
            self._restarts.pop(event.path, None)

    def _check_exit_due(self, path: str, incarnation: int | None, now: float) -> None:
        due = self._exit_due.pop(path, None)
        if due is not None and due != incarnation:
            self.violate("two_live_actors", _session_of(path), f"{path} incarnation {due} did not exit before its successor ran", now)

    def _note_restart(self, path: str, now: float) -> None:
        parent = path.rsplit("/", 1)[0] or "/"
        times = self._restarts.setdefault(parent, collections.deque())
        times.append(now)
        while times and now - times[0] > self.within:
            times.popleft()
        if len(times) > self.max_restarts:
            self.violate(
                "restart_intensity", _session_of(path), f"{parent} restarted {len(times)} children within {self.within:g} s (limit {self.max_restarts})", now
            )

    # -- the end -----------------------------------------------------------------------------------------

    def finish(self, now: float) -> list[Violation]:
        """Liveness at the end of a run: every turn taken has ended. Returns all violations."""
        self.advance(now)
        for session_id, book in self._books.items():
            open_turns = [t for t in book.started if t not in book.ended] + sorted(book.queued) + book.lost
            for turn_id in dict.fromkeys(open_turns):
                if turn_id in book.deadline_reported:
                    continue
                how = "was lost when its session crashed" if turn_id in book.lost else "never ended"
                if turn_id in book.queued:
                    how = "was queued and " + how
                self.violate("turn_never_ended", session_id, f"turn {turn_id} {how}", now)
        for path, due in self._exit_due.items():
            self.violate("two_live_actors", _session_of(path), f"{path} incarnation {due} never reported its exit", now)
        self.pool.finish(now)
        made = self.__dict__  # rules never used have nothing to finish
        if "reviews" in made:
            self.reviews.finish(now)
        if "memory" in made:
            self.memory.finish(now)
        return self.violations


def _session_of(path: str) -> str:
    """``/sessions/abc`` -> ``abc``; other paths -> empty."""
    parts = path.strip("/").split("/")
    return parts[1] if len(parts) == 2 and parts[0] == "sessions" else ""
