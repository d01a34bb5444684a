"""The gateway tests' shared servers: one real Synapse for the whole test session (its start is
seconds), each test registering its own users and rooms; a test Bot API server and a test
model server (seed 1) per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors.chaos import ModelServer
from tests.platforms.gateway.synapse_server import Synapse, running_synapse
from tests.platforms.gateway.telegram_server import TelegramServer


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    with running_synapse(tmp_path_factory.mktemp("synapse")) as server:
        yield server


@pytest.fixture
def telegram() -> Iterator[TelegramServer]:
    with TelegramServer() as server:
        yield server


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer(seed=1) as server:
        yield server
