"""Fixtures for the terminal UI tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.chaos import ModelServer
from protocols import GetStoreStatistics
from tests.conftest import DEADLINE
from tests.platforms.server_kit import ServerKit, start_server
from tests.tui.tui_kit import local as local  # a local session handle on the test model server


@pytest.fixture
def api(tmp_path: Path, model_server: ModelServer) -> Iterator[ServerKit]:
    """A running API server (``hermes serve``) whose store is ready to be read."""
    kit = start_server(tmp_path, model_server)
    try:
        kit.runtime.lookup("/store").ask(GetStoreStatistics(), timeout=DEADLINE)  # barrier: the schema exists
        yield kit
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)
