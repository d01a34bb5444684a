"""Look for live processes by a marker in their command line (Linux /proc)."""

from __future__ import annotations

import os
import select


def live_processes_with(marker: str) -> list[int]:
    """PIDs of non-zombie processes whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in cmdline and state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def wait_for_line(fifo_fd: int, timeout: float) -> bytes:
    """Block until the process writes to the FIFO (a barrier), or fail after ``timeout``."""
    readable, _, _ = select.select([fifo_fd], [], [], timeout)
    assert readable, f"the process did not report in within {timeout} s"
    return os.read(fifo_fd, 100)


def open_fifo(path: str) -> int:
    os.mkfifo(path)
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK)
