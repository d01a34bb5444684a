"""Read a database file's shape (tables, columns, triggers, views, version) without changing it."""

from __future__ import annotations

import functools

import apsw

from ._hermes_plan import Column, StoreShape, Verdict, classify, is_shadow


def read_shape(db: apsw.Connection) -> StoreShape:
    """The shape of the main database of ``db`` (a few reads of ``sqlite_schema`` and pragmas)."""
    rows = list(db.execute("SELECT type, name, coalesce(sql, '') FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'"))
    virtual = frozenset(name for kind, name, sql in rows if kind == "table" and sql.upper().startswith("CREATE VIRTUAL TABLE"))
    tables: dict[str, tuple[Column, ...]] = {}
    for kind, name, _sql in rows:
        if kind != "table" or is_shadow(name, virtual):
            continue
        info = db.execute('SELECT name, type, "notnull", dflt_value FROM pragma_table_info(?)', (name,))
        tables[name] = tuple(Column(name=str(n), type=str(t), notnull=bool(nn), default=None if d is None else str(d)) for n, t, nn, d in info)
    version = None
    if "schema_version" in tables:
        row = db.execute("SELECT max(version) FROM schema_version").fetchone()
        version = None if row is None or row[0] is None else int(row[0])
    return StoreShape(
        tables=tables,
        virtual=virtual,
        triggers=frozenset(name for kind, name, _ in rows if kind == "trigger"),
        views=frozenset(name for kind, name, _ in rows if kind == "view"),
        version=version,
    )


@functools.cache
def shape_of_ddl(ddl: str) -> StoreShape:
    """The shape ``ddl`` makes, built in a private in-memory database (our layout, for comparing)."""
    db = apsw.Connection(":memory:")
    try:
        db.execute(ddl)
        return read_shape(db)
    finally:
        db.close()


def classify_file(db: apsw.Connection, our_ddl: str) -> Verdict:
    """:func:`classify` of the file open in ``db`` against the layout ``our_ddl`` makes."""
    return classify(read_shape(db), shape_of_ddl(our_ddl))
