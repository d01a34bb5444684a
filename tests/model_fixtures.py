"""The ``model_server`` fixture: the test model server in its own thread, stopped afterwards.

conftest imports it; a test file that needs it before that can import it directly.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors.chaos import ModelServer


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    """A running :class:`ModelServer` (seed 0); teardown stops it and checks it had no bug."""
    server = ModelServer(seed=0).start()
    try:
        yield server
    finally:
        server.stop()
    assert server.internal_errors == [], "\n".join(server.internal_errors)
