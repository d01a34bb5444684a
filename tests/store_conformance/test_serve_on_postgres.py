"""``hermes serve`` with ``HERMES_DATABASE_URL`` in the home's .env: the sessions go to Postgres.

A real ``hermes serve`` subprocess, the project's test model server, the session Postgres
server; the transcript is read back from Postgres and no ``state.db`` is made in the home.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx

from actors.chaos import ModelServer, TextReply
from actors.store import SCHEMA_VERSION, StoreReader
from protocols import ChatMessage
from tests.conftest import DEADLINE
from tests.platforms.serve_process import HERMES, serving
from tests.postgres_server import PostgresServer


def test_hermes_serve_on_a_postgres_url_stores_its_sessions_there(tmp_path: Path, postgres: PostgresServer) -> None:
    url = postgres.new_database()
    home = tmp_path / "home"
    home.mkdir()
    with ModelServer(seed=3) as server:
        server.script([TextReply(content="first answer"), TextReply(content="second answer")], session="pg")
        (home / "config.yaml").write_text(f'model:\n  default: test-model\n  base_url: "{server.base_url}"\n  api_key: sk-test\n')
        (home / ".env").write_text(f"API_SERVER_KEY=sk-hermes-test-key\nHERMES_DATABASE_URL={url}\n")
        with serving(home) as base:
            headers = {"authorization": "Bearer sk-hermes-test-key", "x-hermes-session-id": "pg"}
            for text in ("the first question", "the second question"):
                reply = httpx.post(f"{base}/v1/chat/completions", json={"messages": [{"role": "user", "content": text}]}, headers=headers, timeout=DEADLINE)
                assert reply.status_code == 200, reply.text
            health = httpx.get(f"{base}/health/detailed", headers=headers, timeout=DEADLINE).json()
            assert health["store"] == {"backend": "postgres", "location": url}
    assert not (home / "state.db").exists()
    env = {**os.environ, "HERMES_HOME": str(home)}
    doctor = subprocess.run([*HERMES, "doctor", "--offline"], capture_output=True, text=True, env=env, timeout=DEADLINE * 4, check=False)
    assert f"postgres at {url}: schema version {SCHEMA_VERSION}, 1 session(s), 4 message(s)" in doctor.stdout, doctor.stdout + doctor.stderr
    listed = subprocess.run([*HERMES, "sessions", "list"], capture_output=True, text=True, env=env, timeout=DEADLINE * 4, check=False)
    assert listed.returncode == 0 and "pg" in listed.stdout, listed.stderr
    refused = subprocess.run([*HERMES, "sessions", "stats"], capture_output=True, text=True, env=env, timeout=DEADLINE * 4, check=False)
    assert refused.returncode != 0 and "works on a SQLite store only in this build" in refused.stderr
    with StoreReader(url) as reader:
        messages = reader.load_messages("pg")
        turns = reader.load_turns("pg")
        hits = reader.search("second question")
    assert [(m.role, m.content) for m in messages if m.role != "system"] == [
        ("user", "the first question"),
        ("assistant", "first answer"),
        ("user", "the second question"),
        ("assistant", "second answer"),
    ]
    assert [t.status for t in turns] == ["completed", "completed"]
    assert [h.session_id for h in hits] == ["pg"]
    assert isinstance(messages[0], ChatMessage)
