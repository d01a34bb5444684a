"""``hermes pairing list|approve <platform> <code>|revoke <platform> <user_id>``.

Works beside a running ``hermes serve``: the book is shared through a file lock, and the
adapter reads it fresh for every message of a user who is not on the allowlist.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
from pathlib import Path

from actors.config._env import hermes_home

from ._pairing import CODE_TTL, PairingError, approve, read_book, revoke, update_book


def _when(stamp: float) -> str:
    return datetime.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M")


def run_pairing(action: str, *, home: Path | None, platform: str = "", value: str = "") -> int:
    home = home or hermes_home(os.environ)
    now = time.time()
    try:
        if action == "list":
            book = read_book(home)
            live = {c: p for c, p in book.pending.items() if now - p.issued_at < CODE_TTL}
            print("Waiting for approval:" if live else "No codes waiting for approval.")
            for code, pending in sorted(live.items(), key=lambda item: item[1].issued_at):
                name = f" ({pending.user_name})" if pending.user_name else ""
                print(f"  {pending.platform:<10} {code}  user {pending.user_id}{name}, asked {_when(pending.issued_at)}")
            print("Approved:" if book.approved else "No approved users.")
            for approved in book.approved:
                name = f" ({approved.user_name})" if approved.user_name else ""
                print(f"  {approved.platform:<10} user {approved.user_id}{name}, since {_when(approved.approved_at)}")
            return 0
        if action == "approve":
            done = update_book(home, lambda book: approve(book, platform=platform, code=value, now=now))
            print(f"approved: {platform} user {done.user_id}{f' ({done.user_name})' if done.user_name else ''}; their next message reaches the agent")
            return 0
        if action == "revoke":
            update_book(home, lambda book: (revoke(book, platform=platform, user_id=value), None))
            print(f"revoked: {platform} user {value}; their next message gets a new pairing code")
            return 0
    except PairingError as exc:
        print(f"hermes pairing: {exc}", file=sys.stderr)
        return 1
    print(f"hermes pairing: unknown action {action!r} (list, approve, revoke)", file=sys.stderr)
    return 2
