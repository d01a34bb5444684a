"""session_search against a real store file written through the store's own schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import actors.tools._session_search  # noqa: F401 - registers the tool
from actors.agent import ToolContext, ToolOutput, Workspace
from actors.store import open_writer
from actors.tools import REGISTRY

DAY = 86_400.0


def write_store(path: Path) -> None:
    db = open_writer(path)
    try:
        sessions = [
            ("old", "cli", 1.0 * DAY, "Kubernetes upgrade"),
            ("mid", "api", 2.0 * DAY, None),
            ("now", "cli", 3.0 * DAY, "Current chat"),
        ]
        messages = [
            ("old", "user", "How do I upgrade the kubernetes cluster?", 1.0 * DAY + 60),
            ("old", "assistant", "Drain each node, then upgrade kubernetes with kubeadm.", 1.0 * DAY + 120),
            ("old", "user", "The kubernetes upgrade worked, thanks.", 1.0 * DAY + 180),
            ("old", "user", "One more kubernetes question about the ingress.", 1.0 * DAY + 240),
            ("mid", "user", "Write a haiku about kubernetes.", 2.0 * DAY + 60),
            ("mid", "assistant", "Pods drift like clouds.", 2.0 * DAY + 120),
            ("now", "user", "Search my history for kubernetes.", 3.0 * DAY + 60),
        ]
        with db:
            db.executemany("INSERT INTO sessions (id, source, started_at, title) VALUES (?, ?, ?, ?)", sessions)
            db.executemany("INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?)", messages)
    finally:
        db.close()


async def search(store_file: Path | None, **arguments: Any) -> ToolOutput:
    call = ToolContext(session_id="now", turn_id="t", call_id="c", home=Path("/nonexistent"), workspace=Workspace(Path(".")), store_file=store_file)
    return await REGISTRY.get("session_search").run(arguments, call)


async def test_hits_are_grouped_by_session_best_first_with_snippets_and_the_current_session_left_out(tmp_path: Path) -> None:
    store = tmp_path / "state.db"
    write_store(store)
    result = await search(store, query="kubernetes")
    assert result.ok
    text = result.content
    assert text.startswith("Past sessions matching 'kubernetes' (2 sessions, best first):")
    assert "session old, 'Kubernetes upgrade', cli, 1970-01-02 00:00 UTC (4 matching messages)" in text
    assert "session mid, api, 1970-01-03 00:00 UTC (1 matching message)" in text
    assert "session now" not in text and "Search my history" not in text
    assert text.count("   - ") == 3 + 1  # at most three snippets per session
    assert "   - user at 1970-01-03 00:01 UTC: Write a haiku about >>>kubernetes<<<." in text


async def test_the_limit_counts_sessions_and_unmatched_queries_say_so(tmp_path: Path) -> None:
    store = tmp_path / "state.db"
    write_store(store)
    one = await search(store, query="kubernetes", limit=1)
    assert "(1 session, best first)" in one.content
    assert (await search(store, query="zebra")).content == "No past session matches 'zebra'."
    assert (await search(store, query='(("*')).content.startswith("No past session matches")
    assert not (await search(store, query="kubernetes", limit=0)).ok


async def test_without_a_store_or_with_a_missing_file_the_tool_answers_a_clear_error(tmp_path: Path) -> None:
    none = await search(None, query="anything")
    assert not none.ok and none.content == "[error] session_search: this session has no session store, so there are no past sessions to search"
    missing = await search(tmp_path / "absent.db", query="anything")
    assert not missing.ok and missing.content.startswith("[error] session_search: the session store cannot be read:")
    blank = await search(tmp_path / "absent.db", query="   ")
    assert not blank.ok and "the query is empty" in blank.content
