"""The bugs a test plants in a simulated session on purpose, and the code that plants them.

Each planted bug proves an invariant can fail: the sweep must catch it and replay it from its
seed. The pool's are ``PoolBug`` (``_sim_pool``), background reviews' ``ReviewBug``
(``_sim_review``), memory providers' ``MemoryBug`` (``_sim_memory``); the session's own are
named here, with what plants the compression ones (:class:`EagerCompressedHost`,
:func:`split_pair`) and the recovery one (:func:`planted_sanitizer`). ``drop_settle``,
``rerun_tools`` and ``ack_before_commit`` act where the session writes (``_sim_effects``,
``_sim_store``).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from protocols._session import ContextCompressed

from ..agent._machine import CallModel, Emit, MachineEffect, Persist
from ..agent._sanitize import sanitize
from ..agent._session_core import Sanitizer
from ..agent._session_host import SessionHost
from ._sim_memory import MemoryBug
from ._sim_pool import PoolBug
from ._sim_review import ReviewBug

CompressionBug = Literal["half_segment", "compressed_before_commit", "split_summary_pair"]
"""Compression bugs a test plants on purpose (with a plan that compresses, such as ``long``):

- ``half_segment``: the store commits a segment write in two transactions, its second half 0.5 s later.
- ``compressed_before_commit``: the session says ``ContextCompressed`` when it sends the segment write, not once it is committed.
- ``split_summary_pair``: a summary request leaves out the last tool result of the middle (a planner whose cut splits a call from its result).
"""
PlantedBug = Literal["drop_settle", "rerun_tools", "skip_recovery_sanitize", "ack_before_commit"] | PoolBug | CompressionBug | ReviewBug | MemoryBug
"""Bugs a test plants on purpose, to prove the checker catches them (the pool's: ``PoolBug``; compression's: ``CompressionBug``;
background reviews': ``ReviewBug``; memory providers': ``MemoryBug``):

- ``drop_settle``: synthetic results that settle a cancelled or failed turn are never written (the store answers as if they were).
- ``rerun_tools``: a recovering session runs the calls it finds unanswered again.
- ``skip_recovery_sanitize``: a recovering session keeps the transcript as loaded.
- ``ack_before_commit``: the store acknowledges a write when it arrives, not when committed.
"""


def planted_sanitizer(bug: PlantedBug | None) -> Sanitizer:
    """What a loaded transcript goes through: the runtime's sanitizer, or (``skip_recovery_sanitize``) nothing."""
    return (lambda messages: (tuple(messages), 0)) if bug == "skip_recovery_sanitize" else sanitize


class EagerCompressedHost(SessionHost):
    """The planted bug ``compressed_before_commit``: a machine that says ``ContextCompressed`` as
    it sends the segment write (before the commit), and not again when the commit comes."""

    def execute(self, effect: MachineEffect) -> None:
        if isinstance(effect, Emit) and isinstance(effect.event, ContextCompressed):
            return
        super().execute(effect)
        if isinstance(effect, Persist) and effect.segment is not None:
            token, segment = effect.token, effect.segment
            event = ContextCompressed(
                turn_id=token.turn_id,
                tokens_before=segment.tokens_before,
                tokens_after=segment.tokens_after,
                summarised=segment.summarised,
                segment=token.attempt,
            )
            self.port.publish(event)


def split_pair(effect: CallModel) -> CallModel:
    """The planted bug ``split_summary_pair``: the summary request without the middle's last tool result."""
    *system, body = effect.messages
    text = body.content or ""
    cut = text.rfind("\n\n[result of ")
    if cut < 0:
        return effect
    return msgspec.structs.replace(effect, messages=(*system, msgspec.structs.replace(body, content=text[:cut])))
