"""The invariants of context compression, as the simulator sees them: segments, loads, summaries.

A compression pass asks the summary model about the middle of the conversation, then commits
head + summary + tail as the session's next segment in one write, then says
``ContextCompressed``. The checker keeps its own record of what the store committed (every
write, whole: the newest segment as it must be) and holds each session to it:

- ``loaded_mixed_segments``: a load (after a crash, a restart, a passivation, a process death)
  reads exactly the newest committed segment: the old one if the segment write did not
  commit, the new one whole if it did, never half of each.
- ``loaded_unpaired``: once loaded (and recovered), every tool call in the session's
  transcript has exactly one result.
- ``segment_unpaired`` / ``segment_mixed``: a committed segment is paired; with a summary,
  its tail is the end of the segment it replaces and its head that segment's start; without
  one (a pass that only pruned) it is that segment message for message (the
  pass compressed what was committed, nothing else; pruned tool results and call arguments
  aside, message for message).
- ``summary_split_pair``: a summary request never holds a call without its results or a
  result without its call.
- ``compressed_before_commit``: ``ContextCompressed`` follows the commit of its pass's
  segment, once per pass.
- ``too_many_passes``: at most ``max_passes`` passes (summary calls) a turn.
- ``answered_twice``: no turn's answer is committed twice.

Coverage is counted (``summary_calls``, ``segments``, ``compressions``, ``summary_failed``,
``crash_compressing``, ``crash_persisting_segment``, ``segment_writes_lost``), so a sweep
shows the faults really landed inside compression.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Callable, Sequence

from protocols import ChatMessage, Token
from protocols._session import ContextCompressed
from protocols._store import TurnMark

from ..agent._compress import SUMMARY_PREFIX, CompressionSettings
from ..agent._sanitize import sanitize

MAX_PASSES = CompressionSettings().max_passes

_CALL = re.compile(r"^\[calls [^\],]*, call ([^\]]*)\]", re.MULTILINE)
_RESULT = re.compile(r"^\[result of [^\]]*, call ([^\]]*)\]$", re.MULTILINE)
"""How the summary request names a call and a result (``_compress._serialize``)."""

Violate = Callable[[str, str, str, float], None]


class CompressionChecks:
    """Collects the compression rules' violations through ``violate`` (the checker's)."""

    def __init__(self, violate: Violate, counts: collections.Counter[str], *, max_passes: int = MAX_PASSES) -> None:
        self.violate = violate
        self.counts = counts
        self.max_passes = max_passes
        self.live: dict[str, list[ChatMessage]] = {}
        """session id -> its newest segment as committed (every committed write applied whole)."""
        self.pending: collections.Counter[tuple[str, str, int]] = collections.Counter()
        """(session, turn, pass) -> segment commits not announced yet."""
        self.passes: dict[tuple[str, str], set[Token]] = {}
        self.answered: set[tuple[str, str]] = set()
        self.unacknowledged: dict[str, list[ChatMessage]] = {}
        """session id -> messages committed but answered as failed (the writer crashed in between):
        a session that handles the refusal in place (its user message) believes them not stored."""

    # -- the store's commits ---------------------------------------------------------------------

    def committed(self, session_id: str, messages: tuple[ChatMessage, ...], token: Token | str, segment: bool, mark: TurnMark | None, now: float) -> None:
        """A write committed, whole (the store's word): ``segment`` ones start the newest segment."""
        live = self.live.get(session_id)
        if live is None:
            live = self.live[session_id] = []
        if segment:
            self.counts["segments"] += 1
            self._check_segment(session_id, live, messages, now)
            self.live[session_id] = list(messages)
            if type(token) is Token:
                self.pending[(session_id, token.turn_id, token.attempt)] += 1
        else:
            live.extend(messages)
        if mark is not None and mark.event == "completed":
            key = (session_id, mark.turn_id)
            if key in self.answered:
                self.violate("answered_twice", session_id, f"the answer of turn {mark.turn_id} was committed twice", now)
            self.answered.add(key)

    def refused_after_commit(self, session_id: str, messages: tuple[ChatMessage, ...]) -> None:
        """The store committed ``messages`` but answered the write as failed."""
        if messages:
            self.unacknowledged.setdefault(session_id, []).extend(messages)

    def _check_segment(self, session_id: str, old: list[ChatMessage], new: tuple[ChatMessage, ...], now: float) -> None:
        fixed, added = sanitize(new)
        if added or len(fixed) != len(new):
            self.violate("segment_unpaired", session_id, f"a committed segment has {added} call(s) without a result or stray result(s)", now)
        before, _ = sanitize(old)
        limbo = self.unacknowledged.get(session_id)
        views = [before, tuple(m for m in before if m not in limbo)] if limbo else [before]  # what the session may believe is stored
        problems = [_made_of(fixed, view) for view in views]
        if all(problems):
            self.violate("segment_mixed", session_id, f"a committed segment of {len(new)} messages {problems[0]}", now)

    # -- what sessions read and send -------------------------------------------------------------

    def loaded(self, session_id: str, messages: Sequence[ChatMessage], now: float) -> None:
        """A session loaded ``messages``: they must be the newest committed segment, exactly."""
        expected = self.live.get(session_id, [])
        if list(messages) == expected:  # element by element, identity first (in C)
            return
        same = next((i for i, (a, b) in enumerate(zip(messages, expected, strict=False)) if a != b), min(len(messages), len(expected)))
        summaries = sum(1 for m in messages if (m.content or "").startswith(SUMMARY_PREFIX))
        self.violate(
            "loaded_mixed_segments",
            session_id,
            f"a load read {len(messages)} messages ({summaries} summaries) where the newest committed segment has {len(expected)}; they differ from message {same}",
            now,
        )

    def recovered(self, session_id: str, transcript: Sequence[ChatMessage], now: float) -> None:
        """The transcript a session holds once loaded and recovered: every call has one result."""
        fixed, added = sanitize(transcript)
        if added or len(fixed) != len(transcript):
            self.violate("loaded_unpaired", session_id, f"a loaded session holds {added} unanswered call(s) / stray result(s)", now)

    def summary_requested(self, session_id: str, token: Token, messages: Sequence[ChatMessage], now: float) -> None:
        """A summary call (``token.step == "compress"``) was sent ``messages``."""
        self.counts["summary_calls"] += 1
        tokens = self.passes.setdefault((session_id, token.turn_id), set())
        tokens.add(token)
        if len(tokens) > self.max_passes:
            self.violate("too_many_passes", session_id, f"turn {token.turn_id} asked for its summary pass {len(tokens)} (at most {self.max_passes})", now)
        text = "\n\n".join(m.content or "" for m in messages if m.role != "system")
        calls = collections.Counter(_CALL.findall(text))
        results = collections.Counter(_RESULT.findall(text))
        if calls != results:
            unanswered = sorted((calls - results).elements())
            orphans = sorted((results - calls).elements())
            self.violate(
                "summary_split_pair",
                session_id,
                f"a summary request of turn {token.turn_id} splits tool pairs: calls {unanswered} without their result, results {orphans} without their call",
                now,
            )

    def announced(self, session_id: str, event: ContextCompressed, now: float) -> None:
        """``ContextCompressed``: its pass's segment must be committed, and announced once."""
        self.counts["compressions"] += 1
        key = (session_id, event.turn_id, event.segment)
        if self.pending[key] <= 0:
            self.violate(
                "compressed_before_commit", session_id, f"turn {event.turn_id} said pass {event.segment} compressed before its segment was committed", now
            )
        else:
            self.pending[key] -= 1
        if event.segment > self.max_passes:
            self.violate("too_many_passes", session_id, f"turn {event.turn_id} compressed a pass {event.segment} (at most {self.max_passes})", now)

    def resumed(self, session_id: str) -> None:
        """A recovery resumed a turn (same id): its passes count again."""
        for key in [k for k in self.passes if k[0] == session_id]:
            del self.passes[key]


def _made_of(new: Sequence[ChatMessage], before: Sequence[ChatMessage]) -> str:
    """Why ``new`` (sanitized) is not made of ``before`` (head + a new summary + tail, or all of it
    pruned); empty if it is."""
    if len(new) == len(before) and all(_shape(a) == _shape(b) for a, b in zip(new, before, strict=True)):
        return ""  # a pass that only pruned: the same conversation, old tool output shortened
    at = next((i for i in range(len(new) - 1, -1, -1) if new[i].role != "tool" and (new[i].content or "").startswith(SUMMARY_PREFIX)), None)
    if at is None:
        return "holds no new summary and is not the segment it replaces"
    head, tail = new[:at], new[at + 1 :]
    if len(head) + len(tail) > len(before) or any(_shape(a) != _shape(b) for a, b in zip(tail, before[len(before) - len(tail) :], strict=True)):
        return f"has a tail ({len(tail)} messages) that is not the end of the segment it replaces"
    if any(_shape(a) != _shape(b) for a, b in zip(head, before, strict=False)):
        return f"has a head ({len(head)} messages) that is not the start of the segment it replaces"
    return ""


def _shape(message: ChatMessage) -> tuple[str, str | None, tuple[str, ...], str | None]:
    """What pruning (of results and call arguments) never changes: role, ids, and the text of
    every message but a tool result."""
    return message.role, message.tool_call_id, tuple(c.id for c in message.tool_calls), message.content if message.role != "tool" else None
