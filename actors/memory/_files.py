"""Atomic file replacement and a lock per file, for the memory and skill files.

Writes go to a temporary file in the same folder, are flushed and fsynced, and replace the
target with ``os.replace``: a reader sees the old content or the new, never a mix, and a
crash mid-write leaves the old file in place (plus, at worst, a stray ``.tmp``).

Read-modify-write cycles hold :func:`exclusive`: a lock per path inside this process (a
``threading.Lock``) and ``flock`` on a sidecar ``.lock`` file against other processes
sharing the same HERMES_HOME. The sidecar is needed because the data file's inode changes
at every ``os.replace``, so a lock on the data file itself would not exclude anybody.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from actors._atomic import write_atomic

from ._errors import FileBusy

LOCK_TIMEOUT = 10.0
"""Seconds a writer waits for another writer of the same file before giving up."""

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def atomic_write_text(path: Path, text: str, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically (:func:`actors._atomic.write_atomic`).

    A file that exists keeps its permission bits; a new one gets ``mode``.
    """
    write_atomic(path, text.encode("utf-8"), new_mode=mode)


@contextlib.contextmanager
def exclusive(path: Path, *, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the write lock of ``path`` (in this process and across processes).

    Raises:
        FileBusy: the lock was not free within ``timeout`` seconds.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    key = os.fspath(path.resolve())
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    deadline = time.monotonic() + timeout
    if not lock.acquire(timeout=timeout):
        raise FileBusy(_busy(path, timeout))
    try:
        sidecar = path.with_name(f".{path.name}.lock")
        fd = os.open(sidecar, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise FileBusy(_busy(path, timeout)) from None
                    time.sleep(0.01)  # another process holds it: poll, bounded by the deadline
            yield  # closing the descriptor below releases the flock
        finally:
            os.close(fd)
    finally:
        lock.release()


def _busy(path: Path, timeout: float) -> str:
    return f"{path.name} stayed locked by another writer for {timeout:g} s; try again in a moment"
