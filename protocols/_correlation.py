"""Correlation tokens: which piece of work a reply, an outcome or a timer answers.

The turn machine names every write, model call and timer it asks for with a :class:`Token`,
and the host hands the token back with the outcome (a store reply echoes it). Tokens are
compared whole and used as keys; nobody takes them apart to decide anything, and nobody
builds one from text.
"""

from __future__ import annotations

from typing import Literal

import msgspec

Step = Literal["user", "model", "reply", "tool", "settle", "end", "pause", "deadline", "recover", "seed", "create", "command", "compress", "segment"]
"""What the token names: a turn's user message (``user``), a model call (``model``, with the
iteration ``n`` and retry ``attempt``), the write of its reply (``reply``), a tool result
(``tool``, with ``call_id``), the settling of unanswered calls (``settle``), a turn's end
(``end``), a pause for a client's tools (``pause``), the turn deadline (``deadline``); and the
session's own writes: recovery (``recover``), a client's history (``seed``), its creation (``create``), other commands
(``command``, numbered by ``n``); a compression's summary call (``compress``, ``attempt`` = the pass)
and the write of the segment it leaves (``segment``)."""


class Token(msgspec.Struct, frozen=True, kw_only=True, cache_hash=True, gc=False):
    """One piece of work of a session (frozen, hashable, encodable)."""

    step: Step
    turn_id: str = ""
    n: int = 0
    attempt: int = 0
    provider: int = 0
    """Where in the fallback chain a model call goes (a fallback's first call is not the primary's)."""
    call_id: str = ""

    def __str__(self) -> str:
        """For error texts and logs: ``turn/step[n.attempt][/call]``."""
        where = f"{self.n}.{self.attempt}" + (f"@{self.provider}" if self.provider else "") if self.step == "model" else (str(self.n) if self.n else "")
        call = f"/{self.call_id}" if self.call_id else ""
        return f"{self.turn_id}/{self.step}{where}{call}" if self.turn_id else f"{self.step}{where}{call}"
