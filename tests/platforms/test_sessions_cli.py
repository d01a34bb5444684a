"""``hermes sessions`` on a real store file, run as a subprocess as a user would (issue 16)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from actors.store._owner import claim_store
from actors.store._schema import open_writer
from actors.store._writes import append_messages, create_session
from protocols import AppendMessages, ChatMessage, CreateSession, SegmentStart
from tests.conftest import DEADLINE
from tests.platforms.serve_process import CLEARED


def hermes(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env["HERMES_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "actors.cli", "sessions", *args], capture_output=True, text=True, env=env, timeout=DEADLINE)


def stored_home(tmp_path: Path) -> Path:
    """A home whose store holds two sessions: a new one, compressed once, and one from 40 days ago."""
    home = tmp_path / "home"
    home.mkdir()
    db = open_writer(home / "state.db")
    with db:
        create_session(db, CreateSession(session_id="tides", source="api", title="Tide tables", model="m1"))
        append_messages(
            db,
            AppendMessages(
                session_id="tides", messages=(ChatMessage(role="user", content="when is high water?"), ChatMessage(role="assistant", content="at six"))
            ),
        )
        summary = ChatMessage(role="user", content="[summary] high water at six")
        append_messages(
            db, AppendMessages(session_id="tides", messages=(summary,), segment=SegmentStart(summary="high water at six", tokens_before=90, tokens_after=20))
        )
        create_session(db, CreateSession(session_id="old", source="cli"))
        append_messages(db, AppendMessages(session_id="old", messages=(ChatMessage(role="user", content="hello from long ago"),)))
        db.execute("UPDATE sessions SET started_at = ? WHERE id = 'old'", (time.time() - 40 * 86_400,))
    db.close()
    return home


def test_list_show_export_and_stats_read_the_store(tmp_path: Path) -> None:
    home = stored_home(tmp_path)
    listed = hermes(home, "list")
    assert listed.returncode == 0 and "tides" in listed.stdout and "Tide tables" in listed.stdout and "old" in listed.stdout
    shown = hermes(home, "show", "tides")
    assert shown.returncode == 0 and "[user] [summary] high water at six" in shown.stdout and "1 compression(s)" in shown.stdout
    assert "when is high water?" not in shown.stdout, "show is the live conversation: the newest segment"
    exported = hermes(home, "export", "tides")
    data = json.loads(exported.stdout)
    assert [m["content"] for m in data["messages"]] == ["when is high water?", "at six", "[summary] high water at six"], "export keeps every segment"
    assert data["session"]["title"] == "Tide tables" and data["segments"][0]["reason"] == "compression"
    stats = hermes(home, "stats")
    assert stats.returncode == 0 and "sessions 2 (api 1, cli 1)" in stats.stdout and "messages 4" in stats.stdout
    missing = hermes(home, "show", "nope")
    assert missing.returncode == 1 and "no session 'nope'" in missing.stderr and "Traceback" not in missing.stderr
    empty = hermes(tmp_path / "nowhere", "list")
    assert empty.returncode == 1 and "there is no session store" in empty.stderr


def test_prune_and_delete_remove_sessions_whole_and_refuse_while_a_runtime_holds_the_store(tmp_path: Path) -> None:
    home = stored_home(tmp_path)
    dry = hermes(home, "prune", "--older-than", "30", "--dry-run")
    assert dry.returncode == 0 and dry.stdout.splitlines() == ["old", "1 session(s) would be deleted"]
    claim = claim_store(home / "state.db")  # as a running hermes serve holds it
    assert claim is not None
    try:
        refused = hermes(home, "delete", "tides")
        assert refused.returncode == 1 and "DELETE /v1/sessions/{id}" in refused.stderr
    finally:
        claim.close()
    assert "tides" in hermes(home, "list").stdout, "nothing was deleted while the store was held"
    pruned = hermes(home, "prune", "--older-than", "30")
    assert pruned.returncode == 0 and "deleted 1 of 1" in pruned.stdout
    partly = hermes(home, "delete", "tides", "ghost")
    assert partly.returncode == 1 and "ghost: not deleted (there is no session 'ghost')" in partly.stdout and "deleted 1 of 2" in partly.stdout
    assert hermes(home, "list").stdout == "no sessions\n"
    assert "messages 0" in hermes(home, "stats").stdout
