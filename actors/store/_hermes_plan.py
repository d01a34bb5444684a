"""Which layout a ``state.db`` has, and the steps that bring a Hermes-written one to ours.

Pure: :func:`classify` and :func:`plan_import` read a :class:`StoreShape` (tables, columns,
triggers, views, version, as ``_hermes_import.read_shape`` found them) and return data; the
executor (``_hermes_import``) runs the steps in one transaction after a backup.

A file is recognised by its *shape*, never by its version number alone: Hermes numbers its
own schema (1 to 30 and counting), and its numbers collide with ours. Signs of a file Hermes
wrote (any one is enough):

- a table only Hermes makes (``state_meta``, ``system_prompts``, ``session_model_usage``,
  the trigram / CJK indexes, gateway and delegation tables);
- a ``sessions`` / ``messages`` column we never had (billing, Codex items, ``active`` ...);
- a ``messages_fts`` that indexes other columns than ``content`` (Hermes's v11+ indexes
  ``tool_name`` and ``tool_calls`` too);
- a column every one of our versions has, missing (Hermes before its v5 had no
  ``cache_read_tokens``, before v3 no ``title``);
- one of Hermes's triggers (its trigram / CJK index and display-order triggers; a trigger of
  another name is someone's own addition to our store, not a sign).

A file this import already converted carries the ``hermes_import`` table: its leftover Hermes
tables and columns are then ours to keep, and only the index and trigger signs count (Hermes
opened the file again since, and put its own back).

Invariant: the plan never deletes a row of ``sessions`` or ``messages`` and never drops a
column: what it drops (triggers, views, full-text indexes) is derived data, rebuilt from rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Literal

IMPORT_LAYOUT_VERSION = 7
"""Our schema version the import produces (the layout of ``_schema._TABLES`` at version 7).
Numbered migrations after 7 (``_schema.MIGRATIONS``) take an imported file on from there."""

MARKER_TABLE = "hermes_import"
"""Ours: one row per import (when, from which Hermes version, the backup, the counts)."""

HERMES_TABLES = frozenset(
    {
        "state_meta",
        "system_prompts",
        "session_model_usage",
        "messages_fts_trigram",
        "messages_fts_cjk",
        "gateway_routing",
        "gateway_hygiene_state",
        "gateway_heartbeats",
        "conversation_generations",
        "compression_locks",
        "session_turn_leases",
        "async_delegations",
        "delivery_obligations",
    }
)
"""Tables Hermes makes and we never do (from Hermes's documented ``state.db`` layout)."""

HERMES_TRIGGER_PREFIXES = ("messages_fts_trigram", "messages_fts_cjk", "messages_display_")
"""Names of the triggers Hermes keeps its trigram / CJK indexes and display order with."""

_ESSENTIAL = {
    "sessions": ("id", "source", "started_at"),
    "messages": ("id", "session_id", "role", "content", "timestamp"),
}
"""Columns without which the file is nobody's session store we know."""

_FTS_SHADOW = ("_data", "_idx", "_docsize", "_config", "_content")


@dataclasses.dataclass(frozen=True)
class Column:
    """One column as ``PRAGMA table_info`` describes it."""

    name: str
    type: str
    notnull: bool
    default: str | None


@dataclasses.dataclass(frozen=True)
class StoreShape:
    """What a database file holds, read without changing it."""

    tables: Mapping[str, tuple[Column, ...]]
    """Ordinary and virtual tables (FTS5 shadow tables and ``sqlite_*`` left out) -> columns."""
    virtual: frozenset[str]
    triggers: frozenset[str]
    views: frozenset[str]
    version: int | None
    """``max(version)`` of ``schema_version``; None without that table."""

    def columns(self, table: str) -> frozenset[str]:
        return frozenset(c.name for c in self.tables.get(table, ()))


Kind = Literal["empty", "ours", "hermes", "foreign"]


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What :func:`classify` decided, and why."""

    kind: Kind
    signs: tuple[str, ...] = ()
    """For ``hermes``: the shape features that show Hermes wrote it; for ``foreign``: what is missing."""


@dataclasses.dataclass(frozen=True)
class Step:
    """One statement of the import, with what it does in words (for the report and errors)."""

    what: str
    sql: str


@dataclasses.dataclass(frozen=True)
class ImportPlan:
    """The steps that turn a Hermes ``state.db`` into our layout at :data:`IMPORT_LAYOUT_VERSION`."""

    hermes_version: int | None
    signs: tuple[str, ...]
    steps: tuple[Step, ...]


def is_shadow(name: str, virtual: frozenset[str]) -> bool:
    """True for the tables FTS5 keeps behind a virtual table (``messages_fts_data`` ...)."""
    return any(name == v + suffix for v in virtual for suffix in _FTS_SHADOW)


def classify(found: StoreShape, ours: StoreShape) -> Verdict:
    """Empty, ours (any version), written by Hermes, or something else."""
    if not found.tables:
        return Verdict("empty")
    missing = [f"{t}.{c}" for t, cols in _ESSENTIAL.items() for c in cols if c not in found.columns(t)]
    if missing:
        return Verdict("foreign", tuple(f"no {m}" for m in missing))
    signs = _signs(found, ours)
    return Verdict("hermes", signs) if signs else Verdict("ours")


def _signs(found: StoreShape, ours: StoreShape) -> tuple[str, ...]:
    signs: list[str] = []
    imported = MARKER_TABLE in found.tables
    if not imported:
        signs += [f"Hermes's table {t}" for t in sorted(HERMES_TABLES & found.tables.keys())]
        for table in ("sessions", "messages"):
            extra = sorted(found.columns(table) - ours.columns(table))
            if extra:
                signs.append(f"{table} columns we never had: {', '.join(extra[:6])}{' ...' if len(extra) > 6 else ''}")
    fts = tuple(c.name for c in found.tables.get("messages_fts", ()))
    if fts and fts != ("content",):
        signs.append(f"messages_fts indexes {', '.join(fts)}")
    if imported and HERMES_TABLES & found.virtual:
        signs.append(f"Hermes's index {', '.join(sorted(HERMES_TABLES & found.virtual))} is back")
    # Columns every version of ours has had: without them, an early Hermes wrote the file.
    for table, column in (("sessions", "title"), ("sessions", "cache_read_tokens"), ("messages", "finish_reason"), ("messages", "reasoning")):
        if column not in found.columns(table):
            signs.append(f"no {table}.{column} (Hermes before its v5)")
    # Only Hermes's trigger names count: a trigger someone added to our store stays theirs.
    hermes_triggers = sorted(t for t in found.triggers - ours.triggers if t.startswith(HERMES_TRIGGER_PREFIXES))
    if hermes_triggers:
        signs.append(f"Hermes's triggers {', '.join(hermes_triggers[:4])}{' ...' if len(hermes_triggers) > 4 else ''}")
    return tuple(signs)


def plan_import(found: StoreShape, ours: StoreShape, *, fts_ddl: str, our_tables_ddl: str, indexes_ddl: str) -> ImportPlan:
    """The steps for a file :func:`classify` called ``hermes``, in order.

    ``fts_ddl`` creates our ``messages_fts`` and its triggers, ``our_tables_ddl`` the tables
    of ours a Hermes file lacks (``IF NOT EXISTS``), ``indexes_ddl`` our indexes.
    """
    steps: list[Step] = []
    cols = {t: found.columns(t) for t in ("sessions", "messages")}
    if "system_prompt_hash" in cols["sessions"] and "system_prompts" in found.tables:
        steps.append(
            Step(
                "put each session's system prompt back inline (Hermes v25 moved them to system_prompts)",
                "UPDATE sessions SET system_prompt = (SELECT p.prompt FROM system_prompts AS p WHERE p.hash = sessions.system_prompt_hash) "
                "WHERE system_prompt IS NULL AND system_prompt_hash IS NOT NULL",
            )
        )
    for table in ("sessions", "messages"):
        for column in ours.tables[table]:
            if column.name not in cols[table]:
                default = f" DEFAULT {column.default}" if column.default is not None else ""
                steps.append(Step(f"add {table}.{column.name}", f"ALTER TABLE {table} ADD COLUMN {column.name} {column.type}{default}"))
    for trigger in sorted(found.triggers):
        steps.append(Step(f"drop Hermes's trigger {trigger}", f'DROP TRIGGER IF EXISTS "{trigger}"'))
    for view in sorted(found.views):
        steps.append(Step(f"drop Hermes's view {view}", f'DROP VIEW IF EXISTS "{view}"'))
    for table in sorted(t for t in found.virtual if t.startswith("messages_fts")):
        steps.append(Step(f"drop the full-text index {table} (rebuilt from messages)", f'DROP TABLE IF EXISTS "{table}"'))
    steps.append(Step("create our full-text index and its triggers", fts_ddl))
    steps.append(Step("index every message's content", "INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')"))
    if "responses" not in found.tables:
        steps.append(Step("create our tables (responses, turns, credential_pools, segments)", our_tables_ddl))
    steps.append(
        Step(
            "make session titles unique (a later duplicate gets its id appended)",
            "UPDATE sessions SET title = title || ' (' || id || ')' WHERE title IS NOT NULL AND EXISTS ("
            "SELECT 1 FROM sessions AS o WHERE o.title = sessions.title "
            "AND (o.started_at < sessions.started_at OR (o.started_at = sessions.started_at AND o.id < sessions.id)))",
        )
    )
    steps.append(Step("create our indexes", indexes_ddl))
    if "active" in cols["messages"]:
        # Hermes compacts in place: the old rows stay with active = 0 and the kept context is
        # appended. Where every archived row precedes every live one, that is our segment.
        steps.append(
            Step(
                "start a segment where Hermes compacted a session in place (loads read its live rows)",
                "INSERT OR IGNORE INTO segments (session_id, segment, first_message_id, reason, started_at) "
                "SELECT s.session_id, 1, min(m.id), 'hermes compaction', min(m.timestamp) FROM "
                "(SELECT session_id, max(id) AS last_archived FROM messages WHERE active = 0 GROUP BY session_id) AS s "
                "JOIN messages AS m ON m.session_id = s.session_id AND m.active = 1 "
                "GROUP BY s.session_id HAVING min(m.id) > max(s.last_archived)",
            )
        )
    steps.append(
        Step(
            "record the import",
            f"CREATE TABLE IF NOT EXISTS {MARKER_TABLE} (imported_at REAL NOT NULL, hermes_version INTEGER, "
            "backup TEXT NOT NULL, sessions INTEGER NOT NULL, messages INTEGER NOT NULL)",
        )
    )
    if "schema_version" not in found.tables:
        steps.append(Step("create schema_version", "CREATE TABLE schema_version (version INTEGER NOT NULL)"))
    steps.append(
        Step(
            f"set our schema version {IMPORT_LAYOUT_VERSION}",
            f"DELETE FROM schema_version; INSERT INTO schema_version (version) VALUES ({IMPORT_LAYOUT_VERSION})",
        )
    )
    return ImportPlan(hermes_version=found.version, signs=_signs(found, ours), steps=tuple(steps))
