"""The chat shows a memory provider left out of a turn (its prefetch missed the deadline) as a warning line."""

from __future__ import annotations

import threading
from pathlib import Path

from textual.pilot import Pilot

from actors.chaos import ModelServer, TextReply
from actors.memory import MemoryOptions, MemoryProvider, register_provider
from actors.platforms.tui import ChatApp
from protocols import TurnCompleted
from tests.conftest import DEADLINE
from tests.tui.tui_kit import drive, kind, local_session, make_app, texts, type_text

RELEASE = threading.Event()


class StuckProvider(MemoryProvider):
    name = "stuck"

    def prefetch(self, query: str, session_id: str) -> str:
        RELEASE.wait(DEADLINE)
        return ""


register_provider("stuck", StuckProvider)


def test_a_provider_that_misses_the_prefetch_deadline_is_a_warning_and_the_answer_still_comes(tmp_path: Path, model_server: ModelServer) -> None:
    RELEASE.clear()
    handle = local_session(tmp_path, model_server, memory=MemoryOptions(provider="stuck", prefetch_timeout=0.2))
    model_server.script([TextReply(content="hi there")])

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await type_text(pilot, "hello")
        await app.wait_for_event(kind(TurnCompleted))
        await pilot.pause()
        assert "memory: the stuck provider was left out of this turn (timeout: no answer within 0.2 s)" in texts(app, ".warn")

    try:
        drive(make_app(handle), scenario)
    finally:
        RELEASE.set()
        assert handle.close(), "the local runtime did not stop in time"
