"""The store's part of the credential pools: the ``credential_pools`` table (schema 5, by
migration from 4), ``SavePoolState`` answered after its commit, and the reader function."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from actors.store import SCHEMA_VERSION, SchemaVersionError, StoreWriter, open_reader, open_writer
from actors.store._credentials_rows import read_pool_state
from protocols import GetStoreStatistics, PoolStateSaved, SavePoolState, StoreFailed
from supervisor import ChildSpec
from tests.conftest import Probe

from .pool_kit import StartRuntime


def test_a_version_4_file_gains_the_pool_table_when_the_writer_opens_it(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    open_writer(path).close()
    db = apsw.Connection(str(path))
    db.execute("DROP TABLE credential_pools; UPDATE schema_version SET version = 4")
    db.close()
    with pytest.raises(SchemaVersionError, match=f"schema version 4, older than {SCHEMA_VERSION}"):
        open_reader(path)
    open_writer(path).close()
    db = open_reader(path)
    try:
        assert db.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
        assert [row[1] for row in db.execute("PRAGMA table_info(credential_pools)")] == ["provider", "state", "saved_at"]
    finally:
        db.close()
    assert read_pool_state(path, "openai") is None


def test_a_save_is_answered_after_its_commit_and_replaces_the_providers_row(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    runtime = start_runtime([ChildSpec(id="store", actor=StoreWriter, args=(str(path),))])
    store = runtime.lookup("/store")
    replies = Probe()
    store.tell(SavePoolState(provider="openai", state='{"n":1}', saved_at=1.0, token="1", reply_to=replies))
    assert replies.get() == PoolStateSaved(provider="openai", token="1")
    assert read_pool_state(path, "openai") == '{"n":1}'  # on disk when answered
    store.tell(SavePoolState(provider="openai", state='{"n":2}', saved_at=2.0, token="2", reply_to=replies))
    store.tell(SavePoolState(provider="anthropic", state='{"n":3}', saved_at=2.0, token="3", reply_to=replies))
    assert [replies.get().token, replies.get().token] == ["2", "3"]
    assert (read_pool_state(path, "openai"), read_pool_state(path, "anthropic")) == ('{"n":2}', '{"n":3}')
    assert store.ask(GetStoreStatistics()).writes == 3


def test_a_save_the_store_cannot_take_is_answered_store_failed(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    runtime = start_runtime([ChildSpec(id="store", actor=StoreWriter, args=(str(path),))])
    replies = Probe()
    runtime.lookup("/store").tell(SavePoolState(provider="openai", state=None, saved_at=1.0, token="bad", reply_to=replies))  # type: ignore[arg-type]
    failed = replies.get()
    assert isinstance(failed, StoreFailed)
    assert (failed.token, failed.command, failed.retryable) == ("bad", "SavePoolState", False)
