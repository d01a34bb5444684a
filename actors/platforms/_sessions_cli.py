"""``hermes sessions list|show|export|delete|prune|stats``: the session store from the shell.

Reads open the store read-only, so they work beside a running ``hermes serve``. Deletes write the
file directly, which is right only when no runtime serves it: they claim the store the way a
runtime does (``<state.db>.owner``) and, when a live ``hermes serve`` or ``hermes chat`` holds
it, refuse and point to the server's ``DELETE /v1/sessions/{id}`` instead (a live session
actor would otherwise keep a conversation the file no longer has).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import msgspec

from protocols import SessionRecord

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
PAGE = 500
"""Sessions read per page when every session is needed (stats, prune)."""


class SessionsError(Exception):
    """What went wrong, said for a person; the command exits with ``code``."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def _store(home: Path) -> str | Path:
    """The home's store: a Postgres URL (HERMES_DATABASE_URL / database.url), else its state.db."""
    from actors.config import ConfigError, load_config
    from actors.config._env import read_dotenv
    from actors.store import StoreError, store_location

    try:
        configured = load_config(home).config.database.url if (home / "config.yaml").exists() else ""
        location = store_location(home, {**read_dotenv(home / ".env"), **os.environ}, configured)
    except (ConfigError, StoreError) as exc:
        raise SessionsError(str(exc)) from None
    if isinstance(location, str):
        return location
    path = home / "state.db"
    if not path.exists():
        msg = f"there is no session store at {path} yet (hermes serve or hermes chat makes it)"
        raise SessionsError(msg)
    return path


def _read(home: Path, work: Callable[[Any], Any]) -> Any:
    from actors.store import StoreError, StoreReader

    try:
        with StoreReader(_store(home)) as reader:
            return work(reader)
    except StoreError as exc:
        raise SessionsError(f"the session store cannot be read: {exc}") from None


def _when(stamp: float | None) -> str:
    return "-" if not stamp else datetime.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M")


def _every(reader: Any) -> list[SessionRecord]:
    found: list[SessionRecord] = []
    while page := reader.list_sessions(limit=PAGE, offset=len(found)):
        found += page
        if len(page) < PAGE:
            break
    return found


def list_sessions(home: Path, out: TextIO, *, limit: int, source: str | None) -> int:
    records: list[SessionRecord] = _read(home, lambda r: r.list_sessions(limit=limit, source=source))
    if not records:
        out.write("no sessions\n")
        return EXIT_OK
    out.write(f"{'id':<36}  {'started':<16}  {'msgs':>5}  {'source':<8}  title\n")
    for r in records:
        out.write(f"{r.id:<36}  {_when(r.started_at):<16}  {r.message_count:>5}  {r.source:<8}  {r.title or ''}\n")
    return EXIT_OK


def show_session(home: Path, session_id: str, out: TextIO, *, width: int = 200) -> int:
    def work(reader: Any) -> tuple[SessionRecord | None, list[Any], int]:
        return reader.get_session(session_id), reader.load_messages(session_id), len(reader.load_segments(session_id))

    record, messages, segments = _read(home, work)
    if record is None:
        raise SessionsError(f"no session {session_id!r}; 'hermes sessions list' shows them")
    out.write(f"session {record.id}  {record.title or '(untitled)'}\n")
    out.write(f"  source {record.source}, model {record.model or '-'}, started {_when(record.started_at)}, {record.message_count} messages")
    out.write(f", {segments} compression(s)\n" if segments else "\n")
    out.write(f"  tokens: {record.input_tokens} in ({record.cache_read_tokens} cached), {record.output_tokens} out\n\n")
    for m in messages:
        text = " ".join((m.content or "").split())
        calls = ", ".join(f"{c.name}({c.arguments[:60]})" for c in m.tool_calls)
        line = text[:width] + ("…" if len(text) > width else "")
        out.write(f"[{m.role}] {line}{'  -> ' + calls if calls else ''}\n")
    return EXIT_OK


def export_session(home: Path, session_id: str, out: TextIO) -> int:
    """The session as JSON: its record, every segment's messages in order, and its turns."""

    def work(reader: Any) -> dict[str, Any] | None:
        record = reader.get_session(session_id)
        if record is None:
            return None
        return {
            "session": msgspec.to_builtins(record),
            "segments": msgspec.to_builtins(reader.load_segments(session_id)),
            "messages": [
                {"id": m.id, "timestamp": m.timestamp, **msgspec.to_builtins(m.message)} for m in reader.load_stored_messages(session_id, every_segment=True)
            ],
            "turns": msgspec.to_builtins(reader.load_turns(session_id)),
        }

    exported = _read(home, work)
    if exported is None:
        raise SessionsError(f"no session {session_id!r}; 'hermes sessions list' shows them")
    json.dump(exported, out, ensure_ascii=False, indent=1)
    out.write("\n")
    return EXIT_OK


def _file_only(location: str | Path, action: str) -> Path:
    if isinstance(location, str):
        from actors.store._pg import redact

        msg = f"'hermes sessions {action}' works on a SQLite store only in this build; the store is {redact(location)} (list, show and export work; DELETE /v1/sessions/{{id}} deletes)"
        raise SessionsError(msg)
    return location


def stats(home: Path, out: TextIO) -> int:
    path = _file_only(_store(home), "stats")
    records: list[SessionRecord] = _read(home, _every)
    by_source: dict[str, int] = {}
    for r in records:
        by_source[r.source] = by_source.get(r.source, 0) + 1
    size = sum(p.stat().st_size for p in path.parent.glob(f"{path.name}*") if p.is_file())
    out.write(f"store {path} ({size / 1e6:.1f} MB with its WAL)\n")
    out.write(f"sessions {len(records)}" + (" (" + ", ".join(f"{k} {v}" for k, v in sorted(by_source.items())) + ")" if by_source else "") + "\n")
    out.write(f"messages {sum(r.message_count for r in records)}, tool calls {sum(r.tool_call_count for r in records)}\n")
    tokens_in, tokens_out = sum(r.input_tokens for r in records), sum(r.output_tokens for r in records)
    out.write(f"tokens {tokens_in} in ({sum(r.cache_read_tokens for r in records)} cached), {tokens_out} out\n")
    return EXIT_OK


def delete(home: Path, session_ids: Sequence[str], out: TextIO) -> int:
    """Delete sessions (their messages, segments and turns) with the store claimed."""
    from actors.store._owner import claim_store
    from actors.store._schema import open_writer
    from actors.store._writes import Rejected, delete_session
    from protocols import DeleteSession

    path = _file_only(_store(home), "delete")
    claim = claim_store(path)
    if claim is None:
        msg = (
            f"a running hermes serve or hermes chat holds {path}; delete through it "
            "(DELETE /v1/sessions/{id}) or stop it first, so no live session keeps what the file loses"
        )
        raise SessionsError(msg)
    try:
        db = open_writer(path)
        try:
            deleted = 0
            for session_id in session_ids:
                try:
                    with db:  # one transaction a session: all of it goes, or none
                        delete_session(db, DeleteSession(session_id=session_id))
                except Rejected as exc:
                    out.write(f"{session_id}: not deleted ({exc})\n")
                else:
                    deleted += 1
        finally:
            db.close()
    finally:
        claim.close()
    out.write(f"deleted {deleted} of {len(session_ids)} session(s)\n")
    return EXIT_OK if deleted == len(session_ids) else EXIT_FAILED


def prune(home: Path, older_than_days: float, out: TextIO, *, dry_run: bool, source: str | None) -> int:
    """Delete sessions last started more than ``older_than_days`` ago (``--dry-run`` lists them)."""
    if older_than_days <= 0:
        raise SessionsError("--older-than takes a number of days > 0", EXIT_USAGE)
    cutoff = time.time() - older_than_days * 86_400
    records: list[SessionRecord] = _read(home, _every)
    old = [r.id for r in records if (r.started_at or 0) < cutoff and (source is None or r.source == source)]
    if not old:
        out.write(f"no session is older than {older_than_days:g} days\n")
        return EXIT_OK
    if dry_run:
        out.write("".join(f"{i}\n" for i in old) + f"{len(old)} session(s) would be deleted\n")
        return EXIT_OK
    return delete(home, old, out)


def run_sessions(args: Any, home: Path | None = None, out: TextIO = sys.stdout) -> int:
    from actors.agent._config import hermes_home

    home = home or args.home or hermes_home()
    try:
        match args.action:
            case "list":
                return list_sessions(home, out, limit=args.limit, source=args.source)
            case "show":
                return show_session(home, args.session_id, out)
            case "export":
                return export_session(home, args.session_id, out)
            case "stats":
                return stats(home, out)
            case "delete":
                return delete(home, args.session_ids, out)
            case "prune":
                return prune(home, args.older_than, out, dry_run=args.dry_run, source=args.source)
    except SessionsError as exc:
        print(f"hermes sessions: {exc}", file=sys.stderr)
        return exc.code
    print("hermes sessions: say what to do: list, show, export, delete, prune or stats", file=sys.stderr)
    return EXIT_USAGE
