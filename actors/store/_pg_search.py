"""Full-text search on Postgres: the same safe query as FTS5's, as a ``tsquery``.

:func:`tsquery_text` turns :func:`fts5_query`'s output (quoted words, ``word*`` prefixes,
``AND`` / ``OR`` / ``NOT`` only between words) into ``to_tsquery`` syntax: ``'word'``,
``'word':*``, ``&``, ``|``, ``& !``; words next to each other are joined by ``&`` as FTS5
does. The words are runs of letters and digits, so the quoted terms never parse as syntax.

Ranking: ``ts_rank`` (higher is better); the hit's ``rank`` is its negation, so on both
backends a lower rank is a better match, hits come best first. Snippets: ``ts_headline``
with the caller's markers.
"""

from __future__ import annotations

from protocols._store import SearchHit

from ._pg import PgConnection
from ._search import fts5_query

_OPERATORS = {"AND": "&", "OR": "|", "NOT": "& !"}


def tsquery_text(text: str) -> str:
    """The ``to_tsquery('simple', ...)`` text for user ``text``; empty when it has no word."""
    out: list[str] = []
    for part in fts5_query(text).split(" "):
        if not part:
            continue
        if part in _OPERATORS:
            out.append(_OPERATORS[part])
            continue
        if out and out[-1] not in _OPERATORS.values():
            out.append("&")
        word = part.rstrip("*").strip('"')
        out.append(f"'{word}'" + (":*" if part.endswith("*") else ""))
    return " ".join(out)


def search(db: PgConnection, query: str, *, limit: int, session_id: str | None, markers: tuple[str, str], snippet_tokens: int) -> list[SearchHit]:
    """Messages matching ``query``, best first (``StoreReader.search`` on Postgres)."""
    q = tsquery_text(query)
    if not q or limit <= 0:
        return []
    words = max(2, min(snippet_tokens, 64))
    start, stop = (m.replace('"', "").replace(",", "") for m in markers)
    options = f'StartSel="{start}", StopSel="{stop}", MaxWords={words}, MinWords={max(1, words // 2)}, ShortWord=0'
    where = "m.content_tsv @@ q.q" + ("" if session_id is None else " AND m.session_id = ?")
    args: tuple[object, ...] = (q,) if session_id is None else (q, session_id)
    rows = db.execute(
        "SELECT id, session_id, role, timestamp, ts_headline('simple', coalesce(content, ''), qq, ?), -r FROM "
        "(SELECT m.id, m.session_id, m.role, m.timestamp, m.content, q.q AS qq, ts_rank(m.content_tsv, q.q) AS r "
        f"FROM messages AS m, (SELECT to_tsquery('simple', ?) AS q) AS q WHERE {where} ORDER BY r DESC, m.id LIMIT ?) AS hits "
        "ORDER BY r DESC, id",
        (options, *args, limit),
    )
    return [
        SearchHit(message_id=int(id_), session_id=sid, role=role, snippet=snippet or "", timestamp=float(ts), rank=float(rank))
        for id_, sid, role, ts, snippet, rank in rows
    ]
