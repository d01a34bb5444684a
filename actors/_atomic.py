"""Atomic file writes: a temporary file in the same directory, fsync, rename over the target.

A reader (or a crash) sees the old file or the new one, never a half-written one. If
anything fails before the rename, the temporary file is removed and the target is
untouched. The file's permission bits (and, when allowed, its owner) are kept. The one
writer of the project: the file tools, the memory and skill files, ``hermes config set`` and
``hermes setup`` all replace files through it.

Blocking: call from a worker thread (``trio.to_thread.run_sync``), never the reactor.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

TEMP_SUFFIX = ".tmp"


def _umask() -> int:
    # Reading it with os.umask() would briefly change it for every thread of the process.
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def write_atomic(path: Path, data: bytes, *, new_mode: int | None = None) -> bool:
    """Replace (or create) ``path`` with ``data``; parent directories are created. A new file
    gets ``new_mode`` (default: 0o666 less the umask); an existing one keeps its mode.

    Returns:
        True if the file existed before.

    Raises:
        OSError: the write failed; ``path`` is as it was and no temporary file is left.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        before: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        before = None
    if before is not None and stat.S_ISDIR(before.st_mode):
        raise IsADirectoryError(f"{path} is a directory")
    if before is not None:
        mode = stat.S_IMODE(before.st_mode)
    else:
        mode = new_mode if new_mode is not None else 0o666 & ~_umask()
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:100]}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        if before is not None and (before.st_uid, before.st_gid) != (os.getuid(), os.getgid()):
            with contextlib.suppress(OSError):  # only root may give a file away; others keep theirs
                os.chown(temp, before.st_uid, before.st_gid)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _sync_directory(path.parent)
    return before is not None


def _sync_directory(directory: Path) -> None:
    """Make the rename itself durable (best effort: not every filesystem allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
