"""The outbound fast path (``actors/platforms/gateway/_answer_plan.py``) with the adapter's own
thread busy: a completed turn's reply goes from its wait at once, but its chat's end is decided
by the adapter actor, here seconds later. The reply must still be marked sent once that decision
comes, so a restarted adapter never sends it again.

The adapter runs in-process (a real runtime: sessions, store, reactor, the Telegram adapter
under ``/platforms``) so the test can hold the adapter's thread: a status request whose
``reply_to`` answers only when the test lets it (a slow recipient, as a busy peer would be).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from actors.chaos import ModelServer, TextReply
from protocols import AdapterStatusRequest, InjectCrash
from tests.conftest import DEADLINE
from tests.platforms.gateway.inprocess import ALLOWED, started_runtime, wait_status
from tests.platforms.gateway.telegram_server import TelegramServer

OLD_DEADLINE = 3.0
"""Seconds the adapter's sent reply used to wait for the actor's decision before it gave up
(and left the reply owed): the hold below outlasts it."""


class _SlowRecipient:
    """A ``reply_to`` whose ``tell`` returns only when released: the adapter's thread, which
    calls it, is held meanwhile."""

    def __init__(self) -> None:
        self.holding = threading.Event()
        self.release = threading.Event()

    def tell(self, message: Any) -> None:
        self.holding.set()
        assert self.release.wait(DEADLINE), "the test never released the adapter"


def test_a_reply_whose_chat_end_the_busy_adapter_decides_late_is_marked_sent_and_not_sent_again_after_a_restart(
    tmp_path: Path, model: ModelServer, telegram: TelegramServer
) -> None:
    # The answer comes 2 s after the model is asked: time for the adapter to take the message
    # and for the test to hold the adapter's thread before the turn ends.
    model.script([TextReply(content="the late answer", latency=2.0), TextReply(content="the next answer")])
    runtime = started_runtime(tmp_path, model, telegram)
    try:
        telegram.push(ALLOWED, "answer me")
        wait_status(runtime, lambda s: s.chats == 1, "the adapter took the message (it follows the turn now)")
        slow = _SlowRecipient()
        runtime.lookup("/platforms/telegram").tell(AdapterStatusRequest(reply_to=slow))
        assert slow.holding.wait(DEADLINE)
        assert telegram.delivered(ALLOWED) == [], "the turn ended before the adapter was held: raise the model's latency"
        (sent,) = telegram.wait_delivered(ALLOWED, 1)  # the turn's wait sent it; the actor has not decided the chat's end
        threading.Event().wait(max(0.0, sent.at + OLD_DEADLINE + 0.5 - time.monotonic()))  # the busy spell itself, not a sync
        slow.release.set()
        wait_status(runtime, lambda s: s.answered == 1, "the reply counted as sent (once its wait marked it sent)")
        runtime.lookup("/platforms/telegram").tell(InjectCrash(reason="the test restarts the adapter"))
        telegram.push(ALLOWED, "and then")  # the restarted adapter's reply to it is the barrier
        telegram.wait_delivered(ALLOWED, 2)
    finally:
        assert runtime.stop(timeout=DEADLINE)
    assert [s.text for s in telegram.delivered(ALLOWED)] == ["the late answer", "the next answer"]
