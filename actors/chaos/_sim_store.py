"""The simulated store writer: one write at a time, in arrival order, replies after the commit.

What ``actors.store`` keeps, kept here in memory: every message a session ever stored, in
order; the ``turns`` table; and the session's segments (schema 6). A write that carries a
``SegmentStart`` (a compression's result) starts the session's next segment with its messages,
all or nothing, in the one commit that stores them; a load reads the newest segment only,
and the older messages stay. The fault plan's store faults hit a segment write as any other:
refused (busy, fenced: nothing of it is stored), slow (the old segment is the newest until it
commits), lost with the process (never committed), or committed and answered as failed.

In plans that compress, every commit is also told to the checker
(``Invariants.compression.committed``): its own record of what was committed, which loads are
compared with.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

from protocols import ChatMessage, Token
from protocols._store import MessagesPersisted, SegmentStart, SessionCreated, StoreFailed, TurnMark

if TYPE_CHECKING:
    from ._sim_supervisor import Incarnation
    from ._sim_world import World


class SimStore:
    """The store writer: one write at a time, in arrival order; replies after the commit."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.durable: dict[str, list[ChatMessage]] = {}
        """Every message each session stored, in order: every segment, the old ones included."""
        self.live: dict[str, int] = {}
        """session id -> index in ``durable`` where its newest segment starts (absent: 0, never compressed)."""
        self.copied: dict[str, list[tuple[int, int]]] = {}
        """session id -> the ``durable`` ranges that segment writes stored (head, summary, tail:
        copies of earlier messages, and the summary)."""
        self.user_texts: dict[str, collections.Counter[str]] = {}
        self.call_ids: dict[str, set[str]] = {}
        self.records: dict[str, str] = {}
        """session id -> stored system prompt."""
        self.turns: dict[str, dict[str, str]] = {}
        """session id -> turn id -> status (``running``, or how it ended): the turns table."""
        self.free_at = 0.0
        self.fenced: set[str] = set()
        """As StoreWriter: sessions whose transcript write was refused (until ``reopen``)."""
        self.writes = 0
        self.epoch = 0
        """Bumped when the process dies: commits scheduled before never happen."""
        self.ack_before_commit = False
        """A planted bug (tests only): acknowledge on arrival, commit later."""
        self.half_segments = False
        """A planted bug (tests only): a segment write commits its first half, the rest a moment later."""
        self.checked = world.plan.workload.context_length > 0
        """Tell the checker every commit (plans that compress: what its segment rules need)."""

    def idle(self) -> bool:
        return self.free_at <= self.world.now

    def submit(
        self,
        session_id: str,
        messages: tuple[ChatMessage, ...] | None,
        token: Token | str,
        reply_to: Incarnation | None,
        prompt: str = "",
        mark: TurnMark | None = None,
        segment: SegmentStart | None = None,
    ) -> None:
        """``AppendMessages`` (``messages``) or ``CreateSession`` (``messages`` None) arrives."""
        world = self.world
        faults = world.plan.store
        commit = world.plan.workload.commit_s
        if world.dice.fault("store", "slow_commit", faults.slow_commit):
            commit += world.dice.uniform("store", 0.0, faults.slow_commit_max_s)
        done = max(world.now, self.free_at) + commit
        self.free_at = done
        if self.ack_before_commit and reply_to is not None and messages is not None:
            self.reply(reply_to, MessagesPersisted(session_id=session_id, token=token))
            reply_to = None
        world.at(done, self._commit, self.epoch, session_id, messages, token, reply_to, prompt, mark, segment)

    def reopen(self, session_id: str) -> None:
        """``ReopenWrites``: taken in order with the writes (after every one submitted before)."""
        self.world.at(max(self.world.now, self.free_at), self.fenced.discard, session_id)

    def _commit(
        self,
        epoch: int,
        session_id: str,
        messages: tuple[ChatMessage, ...] | None,
        token: Token | str,
        reply_to: Incarnation | None,
        prompt: str,
        mark: TurnMark | None,
        segment: SegmentStart | None,
    ) -> None:
        world = self.world
        if epoch != self.epoch:
            if segment is not None:
                world.checker.counts["segment_writes_lost"] += 1
            return  # the process died before this commit: the write is lost
        faults = world.plan.store
        self.writes += 1
        reply: Any
        if messages is not None and session_id in self.fenced:
            reply = StoreFailed(token=token, error="an earlier write of this session was refused", session_id=session_id)
        elif faults.busy > 0 and world.dice.fault("store", "busy", faults.busy):  # (no draw at 0: only the call is saved)
            world.note(f"fault: store busy, write {token!r} of {session_id} failed")
            reply = StoreFailed(token=token, error="database is locked", session_id=session_id, retryable=True)
        elif messages is None:
            self.records.setdefault(session_id, prompt)
            reply = SessionCreated(session_id=session_id, token=token)
        elif session_id not in self.records:
            reply = StoreFailed(token=token, error="FOREIGN KEY constraint failed", session_id=session_id)
        elif mark is not None and mark.event == "started" and mark.turn_id in self.turns.get(session_id, {}):
            reply = StoreFailed(token=token, error=f"turn {mark.turn_id!r} was already started", session_id=session_id)
        else:
            if self.checked:
                world.checker.compression.committed(session_id, messages, token, segment is not None, mark, world.now)
            if segment is not None and self.half_segments:
                self._commit_half(session_id, messages)
            else:
                self._apply(session_id, messages, segment is not None)
            if mark is not None:
                self._mark(session_id, mark)
            reply = MessagesPersisted(session_id=session_id, token=token)
            if faults.crash_after_commit > 0 and world.dice.fault("store", "crash_after_commit", faults.crash_after_commit):
                world.note(f"fault: store crashed after committing {token!r} of {session_id}")
                if self.checked:
                    world.checker.compression.refused_after_commit(session_id, messages)
                reply = StoreFailed(token=token, error="the store writer stopped before committing it; send it again", session_id=session_id, retryable=True)
                self.free_at = max(self.free_at, world.now + 0.005)  # the writer restarts
        if type(reply) is StoreFailed:
            self.fenced.add(session_id)
        if reply_to is not None:
            self.reply(reply_to, reply, now=True)

    def _commit_half(self, session_id: str, messages: tuple[ChatMessage, ...]) -> None:
        """The planted bug ``half_segment``: two transactions where the real store has one."""
        half = len(messages) // 2
        self.world.note(f"planted bug: {session_id}'s segment write commits {half} of {len(messages)} messages now, the rest later")
        self._apply(session_id, messages[:half], True)
        self.world.at(self.world.now + 0.5, self._commit_rest, self.epoch, session_id, messages[half:])

    def _commit_rest(self, epoch: int, session_id: str, messages: tuple[ChatMessage, ...]) -> None:
        if epoch == self.epoch:
            self._apply(session_id, messages, False)

    def _apply(self, session_id: str, messages: tuple[ChatMessage, ...], segment: bool = False) -> None:
        durable = self.durable.get(session_id)
        if durable is None:  # first write of the session (setdefault would build three empties every time)
            durable = self.durable[session_id] = []
            self.user_texts[session_id] = collections.Counter()
            self.call_ids[session_id] = set()
        if segment:  # the newest segment starts with these messages (in this same commit)
            self.live[session_id] = len(durable)
            self.copied.setdefault(session_id, []).append((len(durable), len(durable) + len(messages)))
        durable.extend(messages)
        texts, calls = self.user_texts[session_id], self.call_ids[session_id]
        for message in messages:
            if message.role == "user" and message.content is not None:
                texts[message.content] += 1
            for call in message.tool_calls:
                calls.add(call.id)

    def commit_now(self, session_id: str, messages: tuple[ChatMessage, ...]) -> None:
        """A write of a session the simulator runs as no ``SimSession`` (a review's child session):
        committed at once, answered to no one."""
        self._apply(session_id, messages)

    def _mark(self, session_id: str, mark: TurnMark) -> None:
        turns = self.turns.setdefault(session_id, {})
        if mark.event == "started":
            turns[mark.turn_id] = "running"
        elif turns.get(mark.turn_id, "running") == "running":
            turns[mark.turn_id] = mark.event

    def settled(self, session_id: str, results: list[ChatMessage]) -> None:
        """The next process's settle stored ``results`` (outside the writer, before it starts)."""
        if results and self.checked:
            self.world.checker.compression.committed(session_id, tuple(results), "settle", False, None, self.world.now)
        if results:
            self._apply(session_id, tuple(results))

    def reply(self, incarnation: Incarnation, reply: Any, *, now: bool = False) -> None:
        self.world.deliver("store_reply", 0.0, incarnation.session.on_message, incarnation, reply, now=now)

    def segment(self, session_id: str) -> list[ChatMessage]:
        """The session's newest segment (what a load reads)."""
        durable = self.durable.get(session_id, [])
        start = self.live.get(session_id, 0)
        return durable[start:] if start else list(durable)

    def originals(self, session_id: str) -> list[ChatMessage]:
        """Every message the session stored except what segment writes copied (each message once)."""
        durable = self.durable.get(session_id, [])
        out: list[ChatMessage] = []
        at = 0
        for start, end in self.copied.get(session_id, ()):
            out += durable[at:start]
            at = end
        return out + durable[at:]

    def load(self, session_id: str) -> tuple[str | None, list[ChatMessage], dict[str, str]]:
        """What a store reader sees now: the session's system prompt (None: no row), its newest segment and turns."""
        return self.records.get(session_id), self.segment(session_id), dict(self.turns.get(session_id, {}))
