"""Which process owns a store file: an advisory lock held while a runtime serves it.

Settling what a dead process left open (``_settle.settle_interrupted``) is right only when no
other live process is serving the same file: its running turns are live, not interrupted.
A runtime claims ``<store>.owner`` with an exclusive ``flock`` before it settles and holds it
until its reactor stops; the kernel releases it if the process dies, however it dies. A
second process on the same file (``hermes chat`` beside ``hermes serve``) finds it held and
does not settle.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from ._backend import is_database_url
from ._pg import PgConnection, connect

_OWNER_LOCK = 0x4865726D6573 + 1
"""The advisory lock key that says which live process serves a Postgres store."""


class StoreClaim:
    """The held lock; ``release`` (async, for ``Reactor.at_stop``) or ``close`` gives it up."""

    def __init__(self, fd: int | None, holder: PgConnection | None = None) -> None:
        self._fd: int | None = fd
        self._holder = holder
        """On Postgres: the connection holding the session-level advisory lock."""

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        holder, self._holder = self._holder, None
        if holder is not None:
            with contextlib.suppress(Exception):
                holder.close()

    async def release(self) -> None:
        self.close()


def claim_store(store_file: str | os.PathLike[str]) -> StoreClaim | None:
    """Claim ``store_file`` for this runtime; None if another live runtime holds it.

    A Postgres store (a URL) is claimed with a session-level advisory lock on a connection of
    its own: the server releases it when that connection ends, however the process dies.

    Raises:
        StoreError: a Postgres store that cannot be reached (or psycopg missing).
    """
    if isinstance(store_file, str) and is_database_url(store_file):
        holder = connect(store_file)
        row = holder.execute("SELECT pg_try_advisory_lock(?)", (_OWNER_LOCK,)).fetchone()
        if not (row and row[0]):
            holder.close()
            return None
        return StoreClaim(None, holder)
    path = Path(f"{os.fspath(store_file)}.owner")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return StoreClaim(fd)
