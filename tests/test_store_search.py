"""The session store's search: FTS5 with snippets, triggers in sync, and the query sanitizer.

Split from ``test_store.py`` (same helpers: a real SQLite file, the writer as ``/store``).
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from actors.store import StoreReader, fts5_query, open_writer
from tests.store_kit import TRANSCRIPT, Replies, StartRuntime, append, create, start_store, user

# -- search -----------------------------------------------------------------------------------


def test_search_finds_content_with_snippets_and_can_be_limited_to_one_session(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _, store = start_store(start_runtime, path)
    replies = Replies()
    create(store, replies, "a")
    create(store, replies, "b")
    in_a = append(store, replies, "a", *TRANSCRIPT)
    in_b = append(store, replies, "b", user("Is it raining in Paris tomorrow?"), user("nothing to see"))
    later_a = append(store, replies, "a", user("Back to Paris: any news?"))  # a's rows now span b's
    with StoreReader(path) as reader:
        hits = reader.search("paris")
        assert {h.message_id for h in hits} == {in_a.message_ids[1], in_a.message_ids[5], in_b.message_ids[0], *later_a.message_ids}
        assert all(">>>Paris<<<" in h.snippet for h in hits)
        only_b = reader.search("Paris", session_id="b")
        assert [(h.session_id, h.role) for h in only_b] == [("b", "user")]
        only_a = reader.search("Paris", session_id="a")
        assert {h.message_id for h in only_a} == {in_a.message_ids[1], in_a.message_ids[5], *later_a.message_ids}
        assert reader.search("Paris", session_id="nobody") == []
        assert reader.search("rain*", markers=("[", "]"))[0].snippet.count("[") >= 1
        assert reader.search("paris NOT tomorrow", session_id="b") == []
        assert len(reader.search("paris OR files")) == 4
        assert len(reader.search("paris", limit=1)) == 1
        assert reader.search("") == [] and reader.search("((( ***") == []


def test_the_fts_triggers_keep_the_index_in_sync_on_insert_update_and_delete(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = open_writer(path)
    try:
        db.execute("INSERT INTO sessions (id, source, started_at) VALUES ('s', 'cli', 0)")
        db.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES ('s', 'user', 'apple banana', 0)")
        message_id = db.last_insert_rowid()
        with StoreReader(path) as reader:
            assert [h.message_id for h in reader.search("banana")] == [message_id]
            db.execute("UPDATE messages SET content = 'cherry' WHERE id = ?", (message_id,))
            assert reader.search("banana") == []
            assert [h.message_id for h in reader.search("cherry")] == [message_id]
            db.execute("DELETE FROM messages WHERE id = ?", (message_id,))
            assert reader.search("cherry") == []
        db.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
    finally:
        db.close()


NASTY = [
    "",
    " ",
    '"',
    '""',
    '"unbalanced',
    "(",
    ")",
    "((a)",
    "a)",
    "*",
    "**",
    "a**",
    "*a",
    "-",
    "-a",
    "a-b",
    ":",
    "a:b",
    "content:x",
    "^a",
    "+",
    "a + b",
    "AND",
    "OR",
    "NOT",
    "NEAR",
    "NEAR(a b)",
    "NEAR(a b, 3)",
    "a AND",
    "OR a",
    "a NOT",
    "NOT NOT a",
    "a AND OR b",
    "a OR OR OR b",
    "AND AND",
    "(a OR b) AND NOT c",
    "a NEAR/3 b",
    "{a b}",
    "col : a",
    "'single'",
    "`tick`",
    "\\",
    '\\"',
    "a\x00b",
    "\x00",
    "\ud800",
    "a\udfffb",
    "🌧 emoji 🔥*",
    "日本語のテキスト",
    "مرحبا بالعالم",
    "Ünïcödé",
    "e\u0301",
    "ﬁ ligature",
    "Ｆｕｌｌｗｉｄｔｈ＂ｑｕｏｔｅ＂",
    "snake_case",
    "__init__",
    "_",
    "1e10",
    "²³ ½",
    "%",
    "a%b_",
    "; DROP TABLE messages; --",
    "x" * 5000,
    " ".join(["w"] * 500),
    "AND " * 100,
    "a* b* c*",
    "\t\n\r",
    "\u200b",
    "\u202e reversed",
    "NOT*",
    "AND*",
    "OR a*",
    "a NOT b OR c AND d",
    '"a" OR "b"',
]
PHRASE = re.compile(r'"[^\W_]+"\*?')
ALPHABET = list("\"()*:-+^{},.;\\/ \t\n'`") + ["AND", "OR", "NOT", "NEAR", "a", "b", "é", "日", "🌧", "\x00", "\ud83c", "_", "1"]


def test_the_query_sanitizer_survives_nasty_input_without_an_fts5_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = open_writer(path)
    db.execute("INSERT INTO sessions (id, source, started_at) VALUES ('s', 'cli', 0)")
    db.executemany(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('s', 'user', ?, 0)",
        [(text,) for text in ("a b and or not near", "日本語 é 🌧 1 2", "snake case content", "NOT a AND b")],
    )
    db.close()
    rng = random.Random(20240611)
    generated = ["".join(rng.choice(ALPHABET) + rng.choice(["", " "]) for _ in range(rng.randrange(0, 12))) for _ in range(3000)]
    with StoreReader(path) as reader:
        for text in NASTY + generated:
            for part in fts5_query(text).split():
                assert part in ("AND", "OR", "NOT") or PHRASE.fullmatch(part), (text, part)
            reader.search(text)  # raises on any FTS5 syntax error
            reader.search(text, session_id="s")
        assert [h.session_id for h in reader.search('snake "case" (content')] == ["s"]


def test_the_query_sanitizer_quotes_words_and_keeps_operators_only_between_words() -> None:
    assert fts5_query("") == ""
    assert fts5_query('hello "world"') == '"hello" "world"'
    assert fts5_query("NOT hello") == '"hello"'
    assert fts5_query("a OR b") == '"a" OR "b"'
    assert fts5_query("a OR") == '"a"'
    assert fts5_query("a AND OR NOT b") == '"a" NOT "b"'
    assert fts5_query("and or") == '"and" "or"'
    assert fts5_query("foo* NEAR(x, 2)") == '"foo"* "NEAR" "x" "2"'
    assert fts5_query("content:secret -draft") == '"content" "secret" "draft"'
    assert fts5_query("snake_case") == '"snake" "case"'
    assert fts5_query("ﬁle") == '"file"'  # NFKC
    assert fts5_query(" ".join(str(i) for i in range(100))).count('"') == 2 * 32


def test_the_query_sanitizer_survives_hypothesis_strings(tmp_path: Path) -> None:
    import hypothesis
    from hypothesis import strategies

    path = tmp_path / "state.db"
    open_writer(path).close()
    with StoreReader(path) as reader:

        @hypothesis.settings(max_examples=500, deadline=None, database=None)
        @hypothesis.given(strategies.text())
        def check(text: str) -> None:
            reader.search(text)

        check()
