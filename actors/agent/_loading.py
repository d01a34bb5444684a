"""What a session reads when it starts: its stored record and transcript, and for a new
session the system prompt (memory, skills index, context files, read once).

Runs in a worker thread (a reactor wait), never on the session actor's thread.
"""

from __future__ import annotations

import datetime
import functools
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from protocols import ChatMessage
from protocols._store import Interrupted, SessionRecord, TurnRecord

from ._session_core import Loaded

if TYPE_CHECKING:
    from actors.memory import MemorySettings

log = logging.getLogger(__name__)


DEFAULT_IDENTITY = "You are Hermes, an AI agent that helps by thinking step by step and using the tools you are given."


def build_system_prompt(model: str, platform_hint: str, today: datetime.date, context: str = "", identity: str = "") -> str:
    """The session's system prompt: built once, then stored and reused byte for byte.

    ``identity`` (``HERMES_HOME/SOUL.md``) opens it in place of the default identity, as in
    Hermes; a note in brackets (the file was blocked or unreadable) follows the default.
    """
    if identity.startswith("[") and identity.endswith("]") and "\n" not in identity:
        opening = [DEFAULT_IDENTITY, identity]
    else:
        opening = [identity or DEFAULT_IDENTITY]
    lines = [
        *opening,
        f"Today's date: {today.isoformat()}.",
        f"Model: {model}.",
    ]
    if platform_hint:
        lines.append(platform_hint)
    if context:
        lines.extend(("", context))
    return "\n".join(lines)


def _prompt_context(home: Path, workdir: Path, memory: MemorySettings, with_memory: bool = True) -> str:
    """Memory snapshot (unless the memory actors give it: ``with_memory`` False), skills index and
    context files: read once, when a session is created."""
    from actors.memory import CONTEXT_FILES, SOUL_FILE, context_files, memory_snapshot, skills_index
    from actors.memory._soul import same_file

    # HERMES_HOME/SOUL.md is the identity (``_identity``); not again as the workdir's context file.
    names = tuple(n for n in CONTEXT_FILES if n != SOUL_FILE or not same_file(workdir / SOUL_FILE, home / SOUL_FILE))
    blocks = []
    builders: tuple[Callable[[], str], ...] = (
        *((functools.partial(memory_snapshot, home, memory),) if with_memory else ()),
        functools.partial(skills_index, home),
        functools.partial(context_files, workdir, names=names),
    )
    for build in builders:
        try:
            block = build()
        except OSError as exc:
            log.warning("a system prompt block could not be read: %s", exc)
            continue
        if block:
            blocks.append(block)
    return "\n\n".join(blocks)


def _identity(home: Path) -> str:
    from actors.memory import soul_identity

    try:
        return soul_identity(home)
    except OSError as exc:
        log.warning("SOUL.md could not be read: %s", exc)
        return ""


Found = tuple[SessionRecord | None, list[ChatMessage], tuple[str, str], list[TurnRecord]]
"""The session's record, its transcript, the new-session prompt (context, identity), its turns."""


def _load(open_reader: Callable[[], Any], session_id: str, home: Path, workdir: Path, memory: MemorySettings, with_memory: bool = True) -> Found:
    with open_reader() as reader:
        record = reader.get_session(session_id)
        messages = reader.load_messages(session_id)
        turns = reader.load_turns(session_id) if record is not None else []
    prompt = (_prompt_context(home, workdir, memory, with_memory), _identity(home)) if record is None else ("", "")
    return record, messages, prompt, turns


async def load_with_retry(
    open_reader: Callable[[], Any],
    session_id: str,
    home: Path,
    workdir: Path,
    memory: MemorySettings,
    recall: Callable[[], Awaitable[str]] | None = None,
) -> Found:
    """The session as stored; for a new session, its prompt's pieces. ``recall``: the memory providers'
    system-prompt blocks, asked of their actors (the files' owner) instead of read here."""
    # The store writer may still be creating the file when a session starts first.
    delay = 0.01
    while True:
        try:
            found = await trio.to_thread.run_sync(_load, open_reader, session_id, home, workdir, memory, recall is None)
            break
        except Exception as exc:
            log.debug("session %s: store not readable yet: %s", session_id, exc)
            await trio.sleep(delay)
            delay = min(0.5, delay * 2)
    record, messages, (context, identity), turns = found
    if recall is None or record is not None:
        return found
    blocks = await recall()
    return record, messages, ("\n\n".join(b for b in (blocks, context) if b), identity), turns


def as_loaded(found: Found, new_prompt: Callable[[str, str], str], interrupted: Interrupted | None) -> Loaded:
    """What the session interpreter is told a load found (``new_prompt(context, identity)``: a new session's prompt)."""
    record, messages, (context, identity), turns = found
    settled = (interrupted.turn_ids, interrupted.settled_calls) if interrupted is not None else None
    if record is None:
        return Loaded(exists=False, prompt=new_prompt(context, identity), interrupted=settled)
    return Loaded(
        exists=True,
        prompt=record.system_prompt or "",
        model=record.model,
        messages=tuple(messages),
        known_turns=tuple(t.turn_id for t in turns),
        running=tuple(t.turn_id for t in turns if t.status == "running"),
        interrupted=settled,
    )
