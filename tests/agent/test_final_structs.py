"""The session interpreter, the turn machine and the invariant checker dispatch on ``type(x) is C``
(a class pattern on a msgspec struct costs an ``isinstance`` through its metaclass per case):
that equals ``isinstance`` only while none of those classes has a subclass."""

from __future__ import annotations

from typing import get_args

from actors.agent._machine import MachineEffect, MachineInput, Phase
from actors.agent._session_core import Loaded
from actors.agent._session_port import WRITE_REPLIES
from actors.agent._session_timers import Timer
from protocols import ChildExited, ChildRestarted, ChildStarted, Escalated, KeyLeased, WaitFinished
from protocols._session import SessionEvent, SessionInbox


def test_the_types_dispatched_by_exact_type_have_no_subclasses() -> None:
    dispatched = {
        *get_args(MachineInput),
        *get_args(MachineEffect),
        *get_args(Phase),
        *get_args(SessionInbox),
        *get_args(Timer),
        *WRITE_REPLIES,
        *SessionEvent.__subclasses__(),
        Loaded,
        KeyLeased,
        WaitFinished,
        ChildStarted,
        ChildRestarted,
        ChildExited,
        Escalated,
    }
    assert len(dispatched) > 60  # the unions were read, not empty
    subclassed = sorted(f"{c.__name__} <- {[s.__name__ for s in c.__subclasses__()]}" for c in dispatched if c.__subclasses__())
    assert subclassed == [], "dispatch by exact type would miss these subclasses: use isinstance there, or do not subclass"
