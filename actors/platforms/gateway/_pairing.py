"""DM pairing: an unknown user gets a one-time code; ``hermes pairing approve <platform> <code>``
lets them in, ``revoke`` takes them out again.

The book (pending codes and approved users, per platform) is one JSON file under HERMES_HOME,
``pairing.json``, shared by ``hermes serve`` and the CLI: every change is a read-modify-write
under an exclusive ``flock`` on ``pairing.lock`` and an atomic replace, so neither side loses
the other's change. The decisions are pure functions of the book.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from actors._atomic import write_atomic

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
"""No 0/O, 1/I: codes are read off a phone screen."""
CODE_LENGTH = 8
CODE_TTL = 3600.0
"""Seconds a code stays valid."""


class Pending(msgspec.Struct, frozen=True, kw_only=True):
    platform: str
    user_id: str
    user_name: str = ""
    chat_id: str = ""
    issued_at: float


class Approved(msgspec.Struct, frozen=True, kw_only=True):
    platform: str
    user_id: str
    user_name: str = ""
    approved_at: float


class PairingBook(msgspec.Struct, frozen=True, kw_only=True):
    pending: dict[str, Pending] = {}
    """Code -> who asked."""
    approved: list[Approved] = []

    def paired(self, platform: str) -> frozenset[str]:
        return frozenset(a.user_id for a in self.approved if a.platform == platform)

    def code_for(self, platform: str, user_id: str, now: float) -> str | None:
        for code, pending in self.pending.items():
            if pending.platform == platform and pending.user_id == user_id and now - pending.issued_at < CODE_TTL:
                return code
        return None


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def request_code(book: PairingBook, *, platform: str, user_id: str, user_name: str, chat_id: str, now: float, code: str) -> tuple[PairingBook, str | None]:
    """Issue ``code`` to a user who has none; a user who already holds a live code gets None
    (the code is sent once, not on every message)."""
    if user_id in book.paired(platform) or book.code_for(platform, user_id, now) is not None:
        return book, None
    live = {c: p for c, p in book.pending.items() if now - p.issued_at < CODE_TTL}
    live[code] = Pending(platform=platform, user_id=user_id, user_name=user_name, chat_id=chat_id, issued_at=now)
    return msgspec.structs.replace(book, pending=live), code


class PairingError(Exception):
    """A code or user the book does not hold; the message says what to do."""


def approve(book: PairingBook, *, platform: str, code: str, now: float) -> tuple[PairingBook, Approved]:
    code = code.strip().upper()
    pending = book.pending.get(code)
    if pending is None or pending.platform != platform:
        raise PairingError(f"no pending {platform} pairing code {code!r}; `hermes pairing list` shows the codes waiting")
    if now - pending.issued_at >= CODE_TTL:
        raise PairingError(f"the code {code} expired; the user gets a new one by writing to the bot again")
    approved = Approved(platform=platform, user_id=pending.user_id, user_name=pending.user_name, approved_at=now)
    rest = {c: p for c, p in book.pending.items() if c != code}
    kept = [a for a in book.approved if (a.platform, a.user_id) != (platform, pending.user_id)]
    return PairingBook(pending=rest, approved=[*kept, approved]), approved


def revoke(book: PairingBook, *, platform: str, user_id: str) -> PairingBook:
    kept = [a for a in book.approved if (a.platform, a.user_id) != (platform, user_id)]
    if len(kept) == len(book.approved):
        raise PairingError(f"{platform} user {user_id} is not paired; `hermes pairing list` shows who is")
    return msgspec.structs.replace(book, approved=kept)


# -- the file ---------------------------------------------------------------------------------


def book_path(home: Path) -> Path:
    return home / "pairing.json"


def read_book(home: Path) -> PairingBook:
    try:
        data = book_path(home).read_bytes()
    except FileNotFoundError:
        return PairingBook()
    try:
        return msgspec.json.decode(data, type=PairingBook)
    except msgspec.DecodeError as exc:
        raise PairingError(f"{book_path(home)} is not a pairing book ({exc}); move it away to start a new one") from None


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "pairing.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def update_book(home: Path, change: Callable[[PairingBook], tuple[PairingBook, Any]]) -> Any:
    """Apply ``change`` to the book under the lock and save the result; returns what ``change`` returned beside the book."""
    with _locked(home):
        book = read_book(home)
        new, result = change(book)
        if new is not book:
            text = json.dumps(msgspec.to_builtins(new), indent=1) + "\n"
            write_atomic(book_path(home), text.encode(), new_mode=0o600)
        return result
