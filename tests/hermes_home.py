"""An existing Hermes home for tests: ``state.db`` in Hermes's documented layout, config files.

The DDL below is written for these tests from the facts of Hermes's documentation
(``website/docs/developer-guide/session-storage.md``: the tables, their columns, the FTS5
index over ``content``, ``tool_name`` and ``tool_calls``, the trigram index, the version
table) and the column list of its schema module; it is not Hermes's code. Two generations:

- ``MODERN`` (schema v30): many more session and message columns, ``system_prompts`` holding
  the prompts by hash (v25), ``state_meta``, ``session_model_usage``, an external-content FTS
  over three columns plus a trigram index, their triggers, a source view; in-place compaction
  leaves archived rows with ``active = 0``.
- ``EARLY`` (schema v6): the first layout plus billing and reasoning columns, an FTS over
  ``content`` only, exactly like ours, and a version number (6) that is also one of ours.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import apsw

_EARLY_SESSIONS = """
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    user_id TEXT,
    model TEXT,
    model_config TEXT,
    system_prompt TEXT,
    parent_session_id TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER DEFAULT 0,
    tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0,
    output_tokens INTEGER DEFAULT 0,
    cache_read_tokens INTEGER DEFAULT 0,
    cache_write_tokens INTEGER DEFAULT 0,
    reasoning_tokens INTEGER DEFAULT 0,
    billing_provider TEXT,
    billing_base_url TEXT,
    billing_mode TEXT,
    estimated_cost_usd REAL,
    actual_cost_usd REAL,
    cost_status TEXT,
    cost_source TEXT,
    pricing_version TEXT,
    title TEXT"""

_EARLY_MESSAGES = """
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_calls TEXT,
    tool_name TEXT,
    timestamp REAL NOT NULL,
    token_count INTEGER,
    finish_reason TEXT,
    reasoning TEXT,
    reasoning_details TEXT,
    codex_reasoning_items TEXT"""

EARLY = f"""
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE sessions ({_EARLY_SESSIONS},
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id));
CREATE TABLE messages ({_EARLY_MESSAGES});
CREATE INDEX idx_sessions_source ON sessions(source);
CREATE INDEX idx_sessions_started ON sessions(started_at DESC);
CREATE UNIQUE INDEX idx_sessions_title_unique ON sessions(title) WHERE title IS NOT NULL;
CREATE INDEX idx_messages_session ON messages(session_id, timestamp);
CREATE VIRTUAL TABLE messages_fts USING fts5(content, content=messages, content_rowid=id);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
INSERT INTO schema_version (version) VALUES (6);
"""

MODERN = f"""
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE system_prompts (hash TEXT PRIMARY KEY, prompt TEXT NOT NULL);
CREATE TABLE sessions ({_EARLY_SESSIONS},
    created_source TEXT, session_key TEXT, chat_id TEXT, chat_type TEXT, thread_id TEXT,
    display_name TEXT, origin_json TEXT, expiry_finalized INTEGER DEFAULT 0,
    system_prompt_hash TEXT, cwd TEXT, git_branch TEXT, git_repo_root TEXT,
    title_source TEXT, last_activity_at REAL, api_call_count INTEGER DEFAULT 0,
    handoff_state TEXT, profile_name TEXT, rewind_count INTEGER NOT NULL DEFAULT 0,
    archived INTEGER NOT NULL DEFAULT 0, pinned INTEGER NOT NULL DEFAULT 0,
    hidden INTEGER NOT NULL DEFAULT 0, tool_names TEXT,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id),
    FOREIGN KEY (system_prompt_hash) REFERENCES system_prompts(hash));
CREATE TABLE messages ({_EARLY_MESSAGES},
    effect_disposition TEXT, reasoning_content TEXT, codex_message_items TEXT,
    platform_message_id TEXT, observed INTEGER DEFAULT 0,
    _compressed_summary INTEGER NOT NULL DEFAULT 0, active INTEGER NOT NULL DEFAULT 1,
    compacted INTEGER NOT NULL DEFAULT 0, api_content TEXT, display_kind TEXT,
    display_metadata TEXT, display_order INTEGER);
CREATE TABLE session_model_usage (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    model TEXT NOT NULL, task TEXT NOT NULL DEFAULT '',
    api_call_count INTEGER NOT NULL DEFAULT 0, input_tokens INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, model, task));
CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE compression_locks (session_id TEXT PRIMARY KEY, holder TEXT NOT NULL,
    acquired_at REAL NOT NULL, expires_at REAL NOT NULL);
CREATE INDEX idx_sessions_source ON sessions(source);
CREATE INDEX idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX idx_messages_session ON messages(session_id, timestamp);
CREATE INDEX idx_messages_session_id ON messages(session_id, id);
CREATE VIEW messages_fts_trigram_src AS
    SELECT m.id, m.content FROM messages AS m JOIN sessions AS s ON s.id = m.session_id
    WHERE m.role <> 'tool' AND s.source <> 'cron';
CREATE VIRTUAL TABLE messages_fts USING fts5(content, tool_name, tool_calls, content='messages', content_rowid='id');
CREATE VIRTUAL TABLE messages_fts_trigram USING fts5(content, content='messages_fts_trigram_src', content_rowid='id', tokenize='trigram');
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content, tool_name, tool_calls) VALUES (new.id, new.content, new.tool_name, new.tool_calls);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, tool_name, tool_calls)
    VALUES ('delete', old.id, old.content, old.tool_name, old.tool_calls);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, tool_name, tool_calls ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, tool_name, tool_calls)
    VALUES ('delete', old.id, old.content, old.tool_name, old.tool_calls);
    INSERT INTO messages_fts(rowid, content, tool_name, tool_calls) VALUES (new.id, new.content, new.tool_name, new.tool_calls);
END;
CREATE TRIGGER messages_fts_trigram_insert AFTER INSERT ON messages WHEN new.role <> 'tool' BEGIN
    INSERT INTO messages_fts_trigram(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_display_order_insert AFTER INSERT ON messages WHEN new.display_order IS NULL BEGIN
    UPDATE messages SET display_order = new.id WHERE id = new.id;
END;
INSERT INTO state_meta (key, value) VALUES ('fts_storage_version', '3');
INSERT INTO schema_version (version) VALUES (30);
"""

OLD_WORDS = "the quokka migration plan"
"""Words only the old Hermes conversation has: ``session_search`` must find them."""

SOUL = "You are Marlow, a terse lighthouse keeper who answers in nautical metaphors."

_PROMPT = "You are Hermes Agent, an intelligent AI assistant. (stored by Hermes)"

HERMES_CONFIG = """\
# Hermes Agent configuration (written as Hermes documents its defaults)
model:
  default: {model}
  provider: custom
  base_url: {base_url}
  api_key: unused
toolsets:
  - hermes-cli
agent:
  max_turns: 60
  reasoning_effort: medium
terminal:
  backend: local
  timeout: 180
memory:
  memory_enabled: true
  user_profile_enabled: true
  memory_char_limit: 2200
  user_char_limit: 1375
compression:
  enabled: true
  threshold: 0.50
display:
  skin: default
  tool_progress: all
approvals:
  mode: manual
api_server:
  port: {port}
timezone: ''
"""


def make_state_db(path: Path, ddl: str = MODERN) -> None:
    """A Hermes ``state.db`` at ``path``: two sessions (one a tool turn, one compacted in place)."""
    db = apsw.Connection(str(path))
    try:
        db.pragma("journal_mode", "wal")
        db.execute(ddl)
        modern = "system_prompts" in ddl
        if modern:
            digest = hashlib.sha256(_PROMPT.encode()).hexdigest()
            db.execute("INSERT INTO system_prompts (hash, prompt) VALUES (?, ?)", (digest, _PROMPT))
            db.execute(
                "INSERT INTO sessions (id, source, model, system_prompt_hash, started_at, ended_at, end_reason, message_count, title, billing_provider, api_call_count)"
                " VALUES ('20250101_090000_a1b2c3', 'cli', 'anthropic/claude-sonnet-4', ?, 1735722000.0, 1735722100.0, 'user_exit', 4, 'Quokka plan', 'openrouter', 2)",
                (digest,),
            )
        else:
            db.execute(
                "INSERT INTO sessions (id, source, model, system_prompt, started_at, ended_at, end_reason, message_count, title, billing_provider)"
                " VALUES ('20250101_090000_a1b2c3', 'cli', 'anthropic/claude-sonnet-4', ?, 1735722000.0, 1735722100.0, 'user_exit', 4, 'Quokka plan', 'openrouter')",
                (_PROMPT,),
            )
        calls = json.dumps([{"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "ls"}'}}])
        rows = [
            ("user", f"Please write down {OLD_WORDS} for the zoo.", None, None, None),
            ("assistant", None, None, calls, None),
            ("tool", '{"output": "plan.md"}', "call_1", None, "terminal"),
            ("assistant", "Done: plan.md lists the quokka migration.", None, None, None),
        ]
        for n, (role, content, call_id, tool_calls, tool_name) in enumerate(rows):
            db.execute(
                "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, finish_reason, codex_reasoning_items)"
                " VALUES ('20250101_090000_a1b2c3', ?, ?, ?, ?, ?, ?, ?, NULL)",
                (role, content, call_id, tool_calls, tool_name, 1735722001.0 + n, "stop" if role == "assistant" else None),
            )
        db.execute("INSERT INTO sessions (id, source, started_at, title) VALUES ('20250102_100000_d4e5f6', 'telegram', 1735812000.0, NULL)")
        second = [
            ("user", "old question about penguins"),
            ("assistant", "old answer about penguins"),
            ("user", "[summary] penguins"),
            ("assistant", "kept answer"),
        ]
        for n, (role, content) in enumerate(second):
            db.execute(
                "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('20250102_100000_d4e5f6', ?, ?, ?)",
                (role, content, 1735812001.0 + n),
            )
        if modern:  # compacted in place: the first two rows archived
            db.execute("UPDATE messages SET active = 0, compacted = 1 WHERE session_id = '20250102_100000_d4e5f6' AND content LIKE 'old %'")
    finally:
        db.close()


def make_hermes_home(home: Path, *, model: str, base_url: str, port: int) -> None:
    """A whole Hermes home: config.yaml, .env, SOUL.md, memories, one skill and ``state.db``."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(HERMES_CONFIG.format(model=model, base_url=base_url, port=port), encoding="utf-8")
    env = home / ".env"
    env.write_text("# Hermes secrets\nOPENROUTER_API_KEY=\nAPI_SERVER_KEY=hk-hermes-home-test-0123456789\n", encoding="utf-8")
    env.chmod(0o600)
    (home / "SOUL.md").write_text(SOUL + "\n", encoding="utf-8")
    memories = home / "memories"
    memories.mkdir()
    (memories / "MEMORY.md").write_text("The user's zoo keeps three quokkas.\n§\nDeploys happen on Fridays.\n", encoding="utf-8")
    (memories / "USER.md").write_text("Name: Robin. Prefers short answers.\n", encoding="utf-8")
    skill = home / "skills" / "zoo" / "feeding-schedule"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: feeding-schedule\ndescription: How to plan the zoo's feeding schedule.\n---\n\n# Feeding schedule\n\n1. Check the roster.\n",
        encoding="utf-8",
    )
    make_state_db(home / "state.db")
