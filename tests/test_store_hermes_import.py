"""A ``state.db`` Hermes wrote is recognised by its shape, backed up, and converted in place.

Real SQLite files in ``tmp_path`` in Hermes's documented layout (``tests/hermes_home.py``):
after the import our reader loads the old transcripts, full-text search finds their words,
and the writer appends to them; the backup is the untouched original.
"""

from __future__ import annotations

import os
from pathlib import Path

import apsw
import pytest

from actors.store import SCHEMA_VERSION, SchemaVersionError, StoreReader, open_reader, open_writer
from actors.store._hermes_import import HermesImportError, import_hermes_store
from actors.store._hermes_plan import IMPORT_LAYOUT_VERSION, classify
from actors.store._schema import _TABLES
from actors.store._shape import read_shape, shape_of_ddl
from tests.hermes_home import EARLY, MODERN, OLD_WORDS, make_state_db

FIRST = "20250101_090000_a1b2c3"
COMPACTED = "20250102_100000_d4e5f6"
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def shape_of(path: Path) -> tuple[str, tuple[str, ...]]:
    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        verdict = classify(read_shape(db), shape_of_ddl(_TABLES))
    finally:
        db.close()
    return verdict.kind, verdict.signs


def rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [tuple(r) for r in db.execute(sql)]
    finally:
        db.close()


def test_the_shape_tells_hermes_files_from_ours_whatever_their_version_number(tmp_path: Path) -> None:
    ours, modern, early = tmp_path / "ours.db", tmp_path / "modern.db", tmp_path / "early.db"
    open_writer(ours).close()
    make_state_db(modern, MODERN)
    make_state_db(early, EARLY)  # version 6: one of our own numbers
    assert shape_of(ours) == ("ours", ())
    kind, signs = shape_of(modern)
    assert kind == "hermes"
    assert "Hermes's table state_meta" in signs
    assert "messages_fts indexes content, tool_name, tool_calls" in signs
    kind, signs = shape_of(early)
    assert kind == "hermes"
    assert any("codex_reasoning_items" in s for s in signs)
    (tmp_path / "empty.db").touch()
    assert shape_of(tmp_path / "empty.db") == ("empty", ())


@pytest.mark.parametrize("ddl", [MODERN, EARLY], ids=["hermes-v30", "hermes-v6"])
def test_our_store_refuses_an_unimported_hermes_file_and_leaves_it_as_it_was(tmp_path: Path, ddl: str) -> None:
    path = tmp_path / "state.db"
    make_state_db(path, ddl)
    before = path.read_bytes()
    with pytest.raises(SchemaVersionError, match="written by Hermes .*'hermes serve'"):
        open_writer(path).close()
    with pytest.raises(SchemaVersionError, match="written by Hermes"):
        open_reader(path).close()
    assert path.read_bytes() == before


@pytest.mark.parametrize("ddl", [MODERN, EARLY], ids=["hermes-v30", "hermes-v6"])
def test_import_backs_up_then_converts_so_every_old_session_loads_and_is_searchable(tmp_path: Path, ddl: str) -> None:
    path = tmp_path / "state.db"
    make_state_db(path, ddl)
    original = rows(path, "SELECT id, role, content, tool_calls, timestamp FROM messages ORDER BY id")

    report = import_hermes_store(path, clock=lambda: NOW)

    assert report is not None
    assert (report.sessions, report.messages) == (2, 8)
    assert report.backup == f"{path}.hermes-backup-20260101T000000Z"
    assert report.hermes_version == (30 if ddl is MODERN else 6)
    assert "2 session(s), 8 message(s)" in report.line()
    # The backup is the original, whole: Hermes's own layout, every row.
    assert shape_of(Path(report.backup))[0] == "hermes"
    assert rows(Path(report.backup), "SELECT id, role, content, tool_calls, timestamp FROM messages ORDER BY id") == original
    # Converted in place: our layout, nothing lost, Hermes's extra columns kept.
    assert shape_of(path) == ("ours", ())
    assert rows(path, "SELECT id, role, content, tool_calls, timestamp FROM messages ORDER BY id") == original
    assert rows(path, "SELECT billing_provider FROM sessions WHERE id = '20250101_090000_a1b2c3'") == [("openrouter",)]
    assert rows(path, "SELECT version FROM schema_version") == [(IMPORT_LAYOUT_VERSION,)]
    open_writer(path).close()  # and on to this build's version
    with StoreReader(path) as reader:
        record = reader.get_session(FIRST)
        assert record is not None
        assert record.title == "Quokka plan"
        assert record.system_prompt is not None and "stored by Hermes" in record.system_prompt  # v25 kept it by hash
        transcript = reader.load_messages(FIRST)
        assert [m.role for m in transcript] == ["user", "assistant", "tool", "assistant"]
        assert transcript[1].tool_calls[0].name == "terminal"
        hits = reader.search(OLD_WORDS)
        assert {h.session_id for h in hits} == {FIRST}
        assert any(h.role == "user" and "quokka" in h.snippet for h in hits)
        live = [m.content for m in reader.load_messages(COMPACTED)]
        every = [m.content for m in reader.load_messages(COMPACTED, every_segment=True)]
    assert len(every) == 4
    # Hermes compacted the second session in place (v30): a load reads its live rows only.
    assert live == (["[summary] penguins", "kept answer"] if ddl is MODERN else every)


def test_an_imported_file_is_ours_and_a_second_start_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make_state_db(path)
    first = import_hermes_store(path, clock=lambda: NOW)
    assert first is not None
    assert import_hermes_store(path, clock=lambda: NOW) is None
    assert rows(path, "SELECT hermes_version, sessions, messages, backup FROM hermes_import") == [(30, 2, 8, first.backup)]
    assert sorted(p.name for p in tmp_path.iterdir() if "backup" in p.name) == ["state.db.hermes-backup-20260101T000000Z"]


def test_an_earlier_backup_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make_state_db(path)
    earlier = tmp_path / "state.db.hermes-backup-20260101T000000Z"
    earlier.write_bytes(b"an earlier backup")
    report = import_hermes_store(path, clock=lambda: NOW)
    assert report is not None
    assert report.backup == f"{earlier}-2"
    assert earlier.read_bytes() == b"an earlier backup"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_a_failing_step_rolls_back_leaving_the_original_and_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make_state_db(path)
    # Someone's table named like one of ours, in another shape: our index on it cannot be made.
    db = apsw.Connection(str(path))
    db.execute("CREATE TABLE turns (note TEXT)")
    db.close()
    original = rows(path, "SELECT * FROM messages ORDER BY id")
    with pytest.raises(HermesImportError, match=r"failed at 'create our tables .*the file is as it was, a copy is at .*hermes-backup-20260101T000000Z"):
        import_hermes_store(path, clock=lambda: NOW)
    assert shape_of(path)[0] == "hermes"
    assert rows(path, "SELECT * FROM messages ORDER BY id") == original
    assert rows(path, "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'quokka'") == [(2,)]
    assert (tmp_path / "state.db.hermes-backup-20260101T000000Z").exists()


def test_a_damaged_or_foreign_file_is_refused_with_a_clear_error_and_not_touched(tmp_path: Path) -> None:
    junk = tmp_path / "state.db"
    junk.write_bytes(b"this is not a database, just text " * 200)
    with pytest.raises(HermesImportError, match="could not be read as a SQLite database .*nothing was changed"):
        import_hermes_store(junk)
    assert junk.read_bytes() == b"this is not a database, just text " * 200
    other = tmp_path / "other.db"
    db = apsw.Connection(str(other))
    db.execute("CREATE TABLE notes (body TEXT)")
    db.close()
    assert import_hermes_store(other) is None  # not Hermes's: the store's own errors say what it is
    assert shape_of(other)[0] == "foreign"


def test_the_import_then_this_build_migrates_to_its_version(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make_state_db(path, EARLY)
    assert import_hermes_store(path, clock=lambda: NOW) is not None
    open_writer(path).close()
    assert rows(path, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    assert os.path.exists(f"{path}.hermes-backup-20260101T000000Z")


def test_a_trigger_of_someone_elses_in_our_store_keeps_it_ours(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = open_writer(path)
    db.execute("CREATE TRIGGER audit_messages AFTER INSERT ON messages BEGIN SELECT 1; END")
    db.close()
    assert shape_of(path) == ("ours", ())
    assert import_hermes_store(path) is None


def test_a_file_hermes_opened_again_after_the_import_is_imported_again_with_a_new_backup(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make_state_db(path)
    first = import_hermes_store(path, clock=lambda: NOW)
    assert first is not None
    # Hermes, started on the file again, puts its trigram index and trigger back.
    db = apsw.Connection(str(path))
    db.execute(
        "CREATE VIRTUAL TABLE messages_fts_trigram USING fts5(content, content='messages', content_rowid='id', tokenize='trigram');"
        "CREATE TRIGGER messages_fts_trigram_insert AFTER INSERT ON messages BEGIN "
        "INSERT INTO messages_fts_trigram(rowid, content) VALUES (new.id, new.content); END;"
    )
    db.close()
    assert shape_of(path)[0] == "hermes"
    second = import_hermes_store(path, clock=lambda: NOW)
    assert second is not None
    assert second.backup == f"{first.backup}-2"
    assert shape_of(path) == ("ours", ())
    assert rows(path, "SELECT count(*) FROM hermes_import") == [(2,)]
