"""Helpers for the terminal UI tests: a local session handle on the test model server, and
running a Textual app's pilot from a synchronous test.

Textual's ``run_test`` is asyncio-based, and pytest-trio (``trio_mode``) takes every
``async def`` test. So UI tests are plain functions that call :func:`drive`, which runs
the scenario under ``asyncio.run``; the runtime's own threads (actors, the trio reactor)
run beside it as they do in ``hermes chat``.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from textual.pilot import Pilot

from actors.agent import HubRegistry, MachineConfig, ModelClients, ModelSettings, SessionDeps, reader_opener
from actors.chaos import ModelServer
from actors.platforms.tui import ChatApp, LocalSession, StreamItem
from actors.platforms.tui._prompt import History, PromptArea
from actors.tools import REGISTRY
from protocols import SessionEvent
from tests.agent.session_kit import Intervals, make_tools
from tests.conftest import DEADLINE
from tests.platforms.server_kit import guarded_tool

T = TypeVar("T")


def local_session(tmp_path: Path, server: ModelServer, **overrides: Any) -> LocalSession:
    """A started local runtime (store + sessions) calling ``server``, with the test tools."""
    store = tmp_path / "state.db"
    tools = {**make_tools(Intervals()), "guarded": guarded_tool(tmp_path / "marker"), **REGISTRY.specs(["clarify"])}
    settings: dict[str, Any] = {
        "hubs": HubRegistry(),
        "open_reader": reader_opener(store),
        "model": ModelSettings(model="test-model", base_url=server.base_url, api_key="test-key"),
        "clients": ModelClients(),
        "tools": tools,
        "config": MachineConfig(traits={n: t.traits for n, t in tools.items()}, retry_base=0.01, turn_timeout=60.0),
        "idle_timeout": 0,
        "home": tmp_path / "home",
    }
    deps = SessionDeps(**{**settings, **overrides})
    return LocalSession.start(deps, store)


@pytest.fixture
def local(tmp_path: Path, model_server: ModelServer) -> Iterator[LocalSession]:
    handle = local_session(tmp_path, model_server)
    try:
        yield handle
    finally:
        assert handle.close(), "the local runtime did not stop in time"


def drive(app: ChatApp, scenario: Callable[[Pilot[int], ChatApp], Awaitable[T]], *, size: tuple[int, int] = (100, 40), connected: bool = True) -> T:
    """Run ``app`` headless and play ``scenario`` against it once it connected (or failed to); its result."""

    async def main() -> T:
        async with app.run_test(size=size) as pilot:
            await asyncio.wait_for(app.opened.wait(), DEADLINE)
            if connected:
                assert app.failure is None, f"the app could not connect: {app.failure}"
            return await scenario(pilot, app)

    return asyncio.run(main())


def make_app(handle: Any, **options: Any) -> ChatApp:
    return ChatApp(lambda: handle, history=History(), **options)


async def type_text(pilot: Pilot[int], text: str, *, as_keys: bool = False) -> None:
    """Put ``text`` in the prompt (key by key with ``as_keys``; pasted otherwise) and press Enter."""
    if as_keys:
        await pilot.press(*["space" if ch == " " else ch for ch in text])
    else:
        pilot.app.query_one(PromptArea).insert(text)
    await pilot.press("enter")


def kind(cls: type[SessionEvent], turn_id: str | None = None) -> Callable[[StreamItem], bool]:
    return lambda item: isinstance(item, cls) and (turn_id is None or item.turn_id == turn_id)


def texts(app: ChatApp, selector: str) -> list[str]:
    return [str(getattr(w, "text", "")) for w in app.query(selector)]


def hermes_module() -> str:
    """``actors.cli`` (the ``hermes`` command) when it has ``chat``, else the TUI package's own entry point."""
    from actors import cli

    parser = cli._parser()
    wired = any(isinstance(action, argparse._SubParsersAction) and "chat" in action.choices for action in parser._actions)
    return "actors.cli" if wired else "actors.platforms.tui"
