"""Clarification: the agent asks the attached person a question and waits for the answer.

Like approvals, the wait belongs to the tool call (cancelled with the turn). A session
that nobody watches cannot be asked: the question fails at once instead of waiting.
"""

from __future__ import annotations

import itertools

import trio

from protocols._session import ClarificationRequested

from ._hub import SessionHub


class Clarifier:
    """One per session; touched only in the reactor thread."""

    def __init__(self, hub: SessionHub) -> None:
        self._hub = hub
        self._ids = itertools.count(1)
        self._pending: dict[str, tuple[trio.Event, list[str]]] = {}

    async def ask(self, *, turn_id: str, call_id: str, question: str, choices: tuple[str, ...], timeout: float) -> str | None:
        """The answer, or None when nobody is attached or no answer came in time."""
        if self._hub.subscribers == 0:
            return None
        request_id = f"{call_id}:{next(self._ids)}"
        done, answer = trio.Event(), list[str]()
        self._pending[request_id] = (done, answer)
        try:
            self._hub.publish(ClarificationRequested(turn_id=turn_id, request_id=request_id, question=question, choices=choices, timeout_s=timeout))
            with trio.move_on_after(timeout):
                await done.wait()
            return answer[0] if answer else None
        finally:
            del self._pending[request_id]

    def answer(self, request_id: str, text: str) -> bool:
        pending = self._pending.get(request_id)
        if pending is None or pending[1]:
            return False
        pending[1].append(text)
        pending[0].set()
        return True
