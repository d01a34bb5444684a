"""Which process owns a store file: an advisory lock held while a runtime serves it.

Settling what a dead process left open (``_settle.settle_interrupted``) is right only when no
other live process is serving the same file: its running turns are live, not interrupted.
A runtime claims ``<store>.owner`` with an exclusive POSIX record lock (``fcntl.lockf``)
before it settles and holds it until its reactor stops; the kernel releases it when the
process dies, however it dies. A second process on the same file (``hermes chat`` beside
``hermes serve``) finds it held and does not settle.

Why a record lock and not ``flock``: a ``flock`` belongs to the open file description, which
every child forked by the runtime shares until it closes its descriptors or execs. A tool's
subprocess caught between ``fork`` and ``exec`` when the runtime is SIGKILLed (or any child
forked without an ``exec``) kept the dead runtime's claim, and the next start took the store
for served by a live process and settled nothing. A record lock belongs to the process: a
child never inherits it. Record locks do not exclude one process from itself, and closing
any descriptor of the file drops them: the claims this process holds are kept in
``_HELD`` (by the file's device and inode), checked before the file is opened again.

The claim may say who holds it (``holder``: written into the file, emptied by every later
claim): ``hermes serve --workers N`` claims the file for its workers, which run under the
parent's claim without one of their own. A runtime that finds the claim held by such a
parent refuses to start (:func:`refuse_beside_workers`): its sessions hold no lease, and
would answer beside the workers' leased ones.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from pathlib import Path

from ._backend import is_database_url
from ._errors import StoreError
from ._pg import PgConnection, connect

WORKERS_HOLDER = "hermes serve --workers"
"""The start of the holder text a ``--workers`` parent writes into the owner file."""


class StoreServedByWorkers(StoreError):
    """The store is claimed by a ``hermes serve --workers`` parent: no other runtime may serve it."""


_OWNER_LOCK = 0x4865726D6573 + 1
"""The advisory lock key that says which live process serves a Postgres store."""

_HELD: set[tuple[int, int]] = set()
"""(device, inode) of the owner files this process holds a claim on."""
_HELD_LOCK = threading.Lock()


class StoreClaim:
    """The held lock; ``release`` (async, for ``Reactor.at_stop``) or ``close`` gives it up."""

    def __init__(self, fd: int | None, holder: PgConnection | None = None, key: tuple[int, int] | None = None) -> None:
        self._fd: int | None = fd
        self._key = key
        """The owner file's (device, inode) in ``_HELD``."""
        self._holder = holder
        """On Postgres: the connection holding the session-level advisory lock."""

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with _HELD_LOCK:
                with contextlib.suppress(OSError):
                    os.close(fd)  # drops the record lock
                if self._key is not None:
                    _HELD.discard(self._key)
        holder, self._holder = self._holder, None
        if holder is not None:
            with contextlib.suppress(Exception):
                holder.close()

    async def release(self) -> None:
        self.close()


def claim_store(store_file: str | os.PathLike[str], holder: str = "") -> StoreClaim | None:
    """Claim ``store_file`` for this runtime; None if another live runtime holds it.

    ``holder`` is written into the owner file (a file store) for :func:`claim_holder`.

    A Postgres store (a URL) is claimed with a session-level advisory lock on a connection of
    its own: the server releases it when that connection ends, however the process dies.

    Raises:
        StoreError: a Postgres store that cannot be reached (or psycopg missing).
    """
    if isinstance(store_file, str) and is_database_url(store_file):
        connection = connect(store_file)
        row = connection.execute("SELECT pg_try_advisory_lock(?)", (_OWNER_LOCK,)).fetchone()
        if not (row and row[0]):
            connection.close()
            return None
        return StoreClaim(None, connection)
    path = Path(f"{os.fspath(store_file)}.owner")
    path.parent.mkdir(parents=True, exist_ok=True)
    with _HELD_LOCK:
        with contextlib.suppress(FileNotFoundError):
            known = path.stat()
            if (known.st_dev, known.st_ino) in _HELD:
                return None  # this process serves it (opening and closing it again would drop the lock)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                return None  # another live process holds it
            raise
        os.ftruncate(fd, 0)  # a dead holder's text goes with its claim
        if holder:
            os.pwrite(fd, holder.encode(), 0)
        opened = os.fstat(fd)
        key = (opened.st_dev, opened.st_ino)
        _HELD.add(key)
    return StoreClaim(fd, key=key)


def claim_holder(store_file: str | os.PathLike[str]) -> str:
    """The holder text of the owner file's claim (empty: none said, or no file). Read it only
    after :func:`claim_store` found the claim held: a free claim's old text is stale."""
    if isinstance(store_file, str) and is_database_url(store_file):
        return ""
    try:
        with open(f"{os.fspath(store_file)}.owner", "rb") as owner:
            return owner.read(4096).decode(errors="replace").strip()
    except OSError:
        return ""


def refuse_beside_workers(store_file: str | os.PathLike[str]) -> None:
    """Raise :class:`StoreServedByWorkers` when the held claim is a ``--workers`` parent's.

    Raises:
        StoreServedByWorkers: the text names the parent and says what to do.
    """
    holder = claim_holder(store_file)
    if holder.startswith(WORKERS_HOLDER):
        msg = (
            f"{os.fspath(store_file)} is served by '{holder}': a second runtime on it would answer sessions beside "
            "the workers' leased ones. Stop that server first, or talk to it over its API (hermes attach)"
        )
        raise StoreServedByWorkers(msg)
