"""The SQL of the ``store`` memory provider's facts (``memory_facts`` and its FTS5 index, schema 9).

The writer's halves (:func:`save_fact`, :func:`delete_fact`) run in the store writer only (rule
4). :func:`search_facts` runs on a reader's own read-only connection: it ranks the facts by
FTS5's ``bm25`` (best first) against the words of a query, any of them matching.
"""

from __future__ import annotations

import dataclasses
import re

import apsw

from protocols._base import Message
from protocols._memory import DeleteFact, FactDeleted, FactSaved, SaveFact

from ._pg import PgConnection

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_QUERY_WORDS = 32


@dataclasses.dataclass(frozen=True, slots=True)
class FactHit:
    fact_id: int
    content: str
    category: str
    rank: float
    """bm25 score: lower is more relevant."""


def save_fact(db: apsw.Connection | PgConnection, c: SaveFact) -> tuple[Message, int]:
    row = db.execute("SELECT id FROM memory_facts WHERE content = ?", (c.content,)).fetchone()
    if row is not None:
        db.execute("UPDATE memory_facts SET updated_at = ? WHERE id = ?", (c.saved_at, row[0]))
        return FactSaved(fact_id=int(row[0]), created=False, token=c.token), 0
    added = db.execute(
        "INSERT INTO memory_facts (content, category, session_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?) RETURNING id",
        (c.content, c.category, c.session_id, c.saved_at, c.saved_at),
    ).fetchone()
    assert added is not None  # RETURNING gives the inserted row
    return FactSaved(fact_id=int(added[0]), created=True, token=c.token), 0


def delete_fact(db: apsw.Connection | PgConnection, c: DeleteFact) -> tuple[Message, int]:
    db.execute("DELETE FROM memory_facts WHERE id = ?", (c.fact_id,))
    return FactDeleted(fact_id=c.fact_id, found=db.changes() == 1, token=c.token), 0


def fts_query(text: str) -> str:
    """``text`` as an FTS5 query: its words, each quoted (no operator of the user's reaches FTS5), any of them."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))[:MAX_QUERY_WORDS]
    return " OR ".join(f'"{w}"' for w in words)


def search_facts(db: apsw.Connection | PgConnection, text: str, limit: int = 5) -> list[FactHit]:
    """The facts most relevant to ``text`` (bm25, best first; on Postgres ``ts_rank``, negated so
    lower is better there too); none when it has no word."""
    query = fts_query(text)
    if not query:
        return []
    if isinstance(db, PgConnection):
        words = [w.strip('"') for w in query.split(" OR ")]
        pg_rows = db.execute(
            "SELECT id, content, category, -ts_rank(content_tsv, q) AS rank FROM memory_facts, to_tsquery('simple', ?) AS q "
            "WHERE content_tsv @@ q ORDER BY rank, id LIMIT ?",
            (" | ".join(f"'{w}'" for w in words), limit),
        ).fetchall()
        return [FactHit(fact_id=int(r[0]), content=str(r[1]), category=str(r[2]), rank=float(r[3])) for r in pg_rows]
    rows = db.execute(
        "SELECT f.id, f.content, f.category, bm25(memory_facts_fts) AS rank FROM memory_facts_fts "
        "JOIN memory_facts f ON f.id = memory_facts_fts.rowid WHERE memory_facts_fts MATCH ? ORDER BY rank, f.id LIMIT ?",
        (query, limit),
    ).fetchall()
    return [FactHit(fact_id=int(r[0]), content=str(r[1]), category=str(r[2]), rank=float(r[3])) for r in rows]  # type: ignore[arg-type]


def count_facts(db: apsw.Connection | PgConnection) -> int:
    row = db.execute("SELECT count(*) FROM memory_facts").fetchone()
    return int(row[0]) if row is not None else 0
