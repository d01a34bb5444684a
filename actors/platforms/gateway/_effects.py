"""What an adapter decides and runs: an :data:`Effect` runs once the state it was decided with is
saved; an :class:`Early` one runs before that save, on the fast path, because its safety does not
rest on the save:

- a turn's ``StartTurn``: its id is the platform message's (``turn_id_of``), the session takes
  a turn id once (also after a restart: the store knows it), and the turn is followed with the
  store's word on its end; so a crash before the save leaves the message unconfirmed, the
  platform delivers it again, and the restarted adapter follows the turn that ran instead of
  starting a second one;
- a turn's final reply: a crash before the save re-attaches to the turn (still the chat's
  running turn on disk) and sends its answer from the store; a crash after the platform took the
  reply and before the save sends it once more (the same one-write window as a crash between
  the send and ``mark_sent``). ``mark_sent`` writes the adapter's newest state, so a confirmed
  reply always has its chat's end (and its message's seen id) on disk after that write; a turn
  so fast that its reply went before its message's own save landed is in the same window.

Both also run from a wait, decided up front (one thread hop each instead of two and three):
a poll's ``StartTurn`` (``_inbound_lane.py``: the same turn id, so the same argument) and a
completed turn's reply (``_answer_plan.py``: sent before the actor decided the chat's end; its
``mark_sent`` waits for that decision, so the confirmed reply's chat end is still on disk after
that write; a graceful stop decides a fired plan's end before it settles).
"""

from __future__ import annotations

from collections.abc import Callable

Effect = Callable[[], None]
"""An effect decided before a save and run after it."""


class Early:
    """An effect run before the save it was decided with (see the module's note for which)."""

    __slots__ = ("run",)

    def __init__(self, run: Effect) -> None:
        self.run = run

    def __call__(self) -> None:
        self.run()


def split(effects: list[Effect]) -> tuple[list[Effect], list[Effect]]:
    """``(early, after)``: the leading :class:`Early` effects, and the rest (in order: an early
    effect decided after one that waits for the save waits too)."""
    n = 0
    while n < len(effects) and isinstance(effects[n], Early):
        n += 1
    return effects[:n], effects[n:]
