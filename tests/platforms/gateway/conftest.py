"""The gateway tests' shared homeserver: one real Synapse for the whole test session (its start is
seconds), each test registering its own users and rooms."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.platforms.gateway.synapse_server import Synapse, running_synapse


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    with running_synapse(tmp_path_factory.mktemp("synapse")) as server:
        yield server
