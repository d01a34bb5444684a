"""Rules for databases: statements that destroy data, bare or through a client (``psql -c``, ``mysql -e``, heredocs).

``DROP TABLE/DATABASE/SCHEMA``, ``TRUNCATE`` and ``DELETE FROM`` without ``WHERE`` need
approval wherever they appear: in a client's arguments, its heredoc or here-string, text
piped in by ``echo``/``cat``, or typed bare as if the terminal were a SQL prompt.
"""

from __future__ import annotations

import re

from ._danger_scan import Analysis, Ctx, Rule, head_name, positionals

SQL_CLIENTS = frozenset({"psql", "mysql", "mariadb", "sqlite3", "sqlite", "duckdb", "clickhouse-client", "pgcli", "mycli", "litecli", "usql", "sqlcmd"})
_DROP = re.compile(r"\bdrop\s+(?:table|database|schema)\b", re.IGNORECASE)
_TRUNCATE = re.compile(r"\btruncate\s+(?:table\s+)?[\w\"`\[]", re.IGNORECASE)
_DELETE = re.compile(r"\bdelete\s+from\s+\S+", re.IGNORECASE)
_WHERE = re.compile(r"\bwhere\b", re.IGNORECASE)
_CHANGES = re.compile(r"\b(?:insert|update|delete|drop|alter|create|replace|truncate)\b", re.IGNORECASE)


def sql_findings(analysis: Analysis, text: str) -> None:
    for statement in text.split(";"):
        if _DROP.search(statement):
            analysis.warn("sql-drop", "drops a table or database (DROP TABLE)")
        if _TRUNCATE.search(statement):
            analysis.warn("sql-truncate", "empties a table (TRUNCATE)")
        delete = _DELETE.search(statement)
        if delete and not _WHERE.search(statement, delete.end()):
            analysis.warn("sql-delete-all", "deletes every row: DELETE without WHERE")


def _sql_client(ctx: Ctx) -> None:
    texts = [w.text for w in ctx.args] + ctx.command.stdin_texts
    if ctx.upstream and head_name(ctx.upstream[-1]) in ("echo", "printf", "cat"):
        feeder = ctx.upstream[-1]
        texts += [w.text for w in feeder.words[1:]] + feeder.stdin_texts
    for text in texts:
        sql_findings(ctx.analysis, text)
    database = positionals(ctx.args)[:1]
    if ctx.name.startswith("sqlite") and database and any(_CHANGES.search(t) for t in texts[1:]):
        ctx.analysis.writes(database, ctx.name)  # a database under HERMES_HOME is the agent's own


def _bare(ctx: Ctx) -> None:
    """``DROP TABLE x;`` typed at the shell: judged as the SQL it is meant to be."""
    sql_findings(ctx.analysis, " ".join([ctx.head.text] + [w.text for w in ctx.args]))


def _redis(ctx: Ctx) -> None:
    if any(w.text.lower() in ("flushall", "flushdb") for w in ctx.args):
        ctx.analysis.warn("redis-flush", "deletes every key (redis-cli FLUSHALL)")


def is_sql_truncate(ctx: Ctx) -> bool:
    """``TRUNCATE TABLE x`` rather than coreutils ``truncate -s 0 file``."""
    first = ctx.args[0].text.lower() if ctx.args else ""
    return ctx.head.text.isupper() or first == "table"


SQL_RULES: dict[str, Rule] = {
    **{name: _sql_client for name in SQL_CLIENTS},
    "drop": _bare,
    "delete": _bare,
    "redis-cli": _redis,
}
