"""The background review's rules (simulator), fed by ``_sim_review`` and the session's address.

- ``review_overlap``: a session's review started while another of its reviews ran.
- ``review_past_deadline``: a review ended later than its deadline after it started.
- ``review_never_ended``: a review still running when the world came to rest.
- ``review_delayed_turn``: a ``StartTurn`` told to a running session while its review ran did
  not reach the session at once (the user's next turn waited for the review).
- ``review_in_user_transcript``: the user's stored transcript at rest holds a message one of its
  reviews wrote (a review writes in its own session only).

That a review never changes the user's turn outcome is kept by the general rules
(``terminal_count``: a turn ends once; the review forks after that end).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence

from protocols import ChatMessage

Violate = Callable[[str, str, str, float], None]


class ReviewChecks:
    def __init__(self, violate: Violate, counts: collections.Counter[str]) -> None:
        self.violate, self.counts = violate, counts
        self.running: dict[str, dict[str, tuple[float, float]]] = {}
        """Session -> review id -> (started, deadline)."""
        self.written: dict[str, dict[str, str]] = {}
        """Session -> content of a message one of its reviews wrote -> that review's id."""
        self.told: dict[tuple[str, str], float] = {}
        """(session, turn id) -> when a StartTurn was told while a review of the session ran."""

    def started(self, session_id: str, review_id: str, now: float, deadline_s: float) -> None:
        self.counts["reviews"] += 1
        mine = self.running.setdefault(session_id, {})
        if mine:
            self.violate("review_overlap", session_id, f"review {review_id} started while {', '.join(sorted(mine))} ran", now)
        mine[review_id] = (now, deadline_s)

    def ended(self, session_id: str, review_id: str, now: float, how: str) -> None:
        started, deadline = self.running.get(session_id, {}).pop(review_id, (now, 0.0))
        self.counts[f"reviews_{how}"] += 1
        if now - started > deadline + 1e-9:
            self.violate(
                "review_past_deadline",
                session_id,
                f"review {review_id} ended ({how}) {now - started:.3f} s after it started, past its {deadline:g} s deadline",
                now,
            )

    def reviewing(self, session_id: str) -> bool:
        return bool(self.running.get(session_id))

    def turn_told(self, session_id: str, turn_id: str, now: float) -> None:
        """A StartTurn told to a session with a live incarnation while its review runs."""
        self.counts["turns_during_review"] += 1
        self.told.setdefault((session_id, turn_id), now)

    def turn_received(self, session_id: str, turn_id: str, now: float) -> None:
        told = self.told.pop((session_id, turn_id), None)
        if told is not None and now > told:
            self.violate("review_delayed_turn", session_id, f"turn {turn_id} reached the session {now - told:.3f} s after it was sent, while a review ran", now)

    def wrote(self, session_id: str, review_id: str, message: ChatMessage) -> None:
        self.written.setdefault(session_id, {})[message.content or ""] = review_id

    def user_transcript(self, session_id: str, messages: Sequence[ChatMessage], now: float) -> None:
        """The user's stored transcript at rest (every segment): none of its reviews' messages in it."""
        written = self.written.get(session_id, {})
        for message in messages:
            review_id = written.get(message.content or "")
            if review_id is not None:
                self.violate("review_in_user_transcript", session_id, f"the stored transcript holds a {message.role} message of review {review_id}", now)
                return

    def finish(self, now: float) -> None:
        for session_id, reviews in self.running.items():
            for review_id, (started, _) in reviews.items():
                self.violate("review_never_ended", session_id, f"review {review_id} started at {started:.3f} never ended", now)
        for (session_id, turn_id), told in self.told.items():
            self.violate("review_delayed_turn", session_id, f"turn {turn_id} sent at {told:.3f} while a review ran never reached the session", now)
