"""The memory providers' rules (simulator), fed by ``_sim_memory``, the session and its stream.

- ``memory_changed_turn``: a model call's wait (the prefetch runs inside it) reached the
  session with something other than the outcome the model produced for it, or its deadline:
  a provider's failure, lateness or answer leaked into the user's turn, whose outcome and
  transcript are made of the model's and the tools' outcomes only.
- ``prefetch_past_deadline``: a turn's first model request went out later than the prefetch
  deadline after the call started (the turn waited for a slow or hung provider).
- ``memory_skip_reported``: a turn whose prefetch of a provider was skipped (late, hung,
  failed, crashed, no actor) did not report it by exactly one ``MemorySkipped`` on the user's
  stream, or one was reported for a prefetch that answered in time: per (session, turn,
  provider), over the prefetches that ran to their end (a cancelled wait reports nothing).
- ``memory_block_in_transcript``: a session's transcript (in memory when it is idle, or
  stored, at rest) holds a ``<memory-context>`` block (it goes into the request only).

Whether a prefetch is skipped is judged here from what the provider did (answered when,
ok or not), not from the runtime's decision.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence

from protocols import ChatMessage, WaitFinished
from protocols._session import MemorySkipped

Violate = Callable[[str, str, str, float], None]
BLOCK_TAG = "<memory-context>"

Key = tuple[str, str, str]
"""(session, turn id, provider)."""


class MemoryChecks:
    def __init__(self, violate: Violate, counts: collections.Counter[str]) -> None:
        self.violate, self.counts = violate, counts
        self.asked: dict[tuple[Key, float], tuple[bool, float]] = {}
        """(key, asked at) -> (should be skipped, deadline) of a prefetch not yet at its end."""
        self.expected: set[Key] = set()
        """Turns with a skipped prefetch that ran to its end."""
        self.reported: collections.Counter[Key] = collections.Counter()
        self.produced: dict[int, WaitFinished] = {}
        """Model wait id -> the outcome the simulated model produced for it."""

    def asked_prefetch(self, key: Key, asked_at: float, answered_at: float, ok: bool, deadline: float) -> None:
        """A turn asked the provider; it answers at ``answered_at`` (inf: never), ``ok`` or with an error."""
        self.counts["prefetches"] += 1
        skip = not ok or answered_at - asked_at > deadline + 1e-9
        self.asked[key, asked_at] = (skip, deadline)

    def prefetch_ended(self, key: Key, asked_at: float, now: float) -> None:
        """The prefetch's wait is over and the model request goes out now (the wait still lives)."""
        skip, deadline = self.asked.pop((key, asked_at), (False, 0.0))
        if skip:
            self.expected.add(key)
            self.counts["prefetch_skipped"] += 1
        if now - asked_at > deadline + 1e-9:
            self.violate(
                "prefetch_past_deadline",
                key[0],
                f"turn {key[1]}'s model request waited {now - asked_at:.3f} s for {key[2]}'s prefetch, past its {deadline:g} s deadline",
                now,
            )

    def reported_skip(self, session_id: str, event: MemorySkipped, now: float) -> None:
        key = (session_id, event.turn_id, event.provider)
        self.reported[key] += 1
        self.counts[f"skipped_{event.reason}"] += 1
        if self.reported[key] > (key in self.expected):
            times = f"{self.reported[key]} times" if key in self.expected else "though its prefetch answered in time"
            self.violate("memory_skip_reported", session_id, f"turn {event.turn_id} reported {event.provider} skipped ({event.reason}) {times}", now)

    def model_produced(self, outcome: WaitFinished) -> None:
        self.produced[outcome.wait_id] = outcome

    def model_outcome(self, session_id: str, outcome: WaitFinished, now: float) -> None:
        """A model call's wait ended and reached the session."""
        if outcome.status != "timeout" and self.produced.get(outcome.wait_id) is not outcome:
            what = f"{outcome.status} ({outcome.error})" if outcome.error else outcome.status
            self.violate("memory_changed_turn", session_id, f"a model call's wait ended {what}, not with the outcome the model produced", now)

    def transcript(self, session_id: str, messages: Sequence[ChatMessage], now: float) -> None:
        """A session's transcript (at idle, in memory; at rest, every stored segment): no recalled block in it."""
        for message in messages:
            if BLOCK_TAG in (message.content or ""):
                self.violate("memory_block_in_transcript", session_id, f"a {message.role} message of the transcript holds a {BLOCK_TAG} block", now)
                return

    def finish(self, now: float) -> None:
        for key in self.expected:
            if not self.reported[key]:
                session_id, turn_id, provider = key
                self.violate("memory_skip_reported", session_id, f"turn {turn_id} skipped {provider}'s prefetch and never reported it", now)
