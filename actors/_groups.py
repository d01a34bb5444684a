"""The process-group ledger: groups this process started, on disk, so a successor can reap them.

:func:`~actors.run_process` kills its group before it returns, but a process that is itself
killed with SIGKILL runs no cleanup: the groups it started (each its own session) keep
running with nobody to stop them. A program that owns a home directory (``hermes serve``,
``hermes chat``) calls :func:`use_group_ledger` at start; from then on every group started by
``run_process`` has a small file in the ledger directory while it runs, and
:func:`reap_orphan_groups` (called by the next start) kills the groups whose owner is dead.

A record names the group's leader by pid **and** start time, and its owner the same way, so
a recycled pid is never taken for the original: a leader whose start time differs is not
killed. (Linux does not reuse a pid while a process group with that id has members, so
members of a group whose leader has exited are still the original group's.)

Invariant: a record exists while its group may be running; it is written (atomically)
right after the group starts, before ``run_process`` feeds it or waits on it, and removed
after the group is gone. Between the spawn and the write (microseconds) a SIGKILL of the
owner leaves the group unrecorded: the pid is known only once the process exists.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Sequence
from pathlib import Path

import msgspec

log = logging.getLogger(__name__)


class GroupRecord(msgspec.Struct, frozen=True):
    pgid: int
    leader_start: int
    """The leader's start time (clock ticks after boot, ``/proc/<pid>/stat`` field 22)."""
    owner: int
    owner_start: int
    argv: tuple[str, ...] = ()


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(GroupRecord)
_ledger: Path | None = None


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks after boot; None if it does not exist (or is a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


def use_group_ledger(directory: Path | None) -> None:
    """Record the groups this process starts under ``directory`` (None: stop recording)."""
    global _ledger
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
    _ledger = directory


def record(pgid: int, argv: Sequence[str]) -> None:
    """Note a group that just started (a few µs: one small file, not fsynced)."""
    directory = _ledger
    if directory is None:
        return
    leader = start_time(pgid)
    owner = os.getpid()
    entry = GroupRecord(pgid=pgid, leader_start=leader or 0, owner=owner, owner_start=start_time(owner) or 0, argv=tuple(argv)[:8])
    path = directory / str(pgid)
    staged = directory / f".{pgid}.new"
    try:
        # Whole or absent, never half: a successor reads it after a SIGKILL at any moment.
        staged.write_bytes(_encoder.encode(entry))
        os.replace(staged, path)
    except OSError as exc:
        log.warning("could not record process group %d in %s: %s", pgid, directory, exc)


def forget(pgid: int) -> None:
    directory = _ledger
    if directory is not None:
        with contextlib.suppress(OSError):
            (directory / str(pgid)).unlink()


def reap_orphan_groups(directory: Path) -> list[GroupRecord]:
    """SIGKILL the recorded groups whose owner is dead; return those that were still running.

    Records of live owners (another program using the same home) are left alone; records
    of dead owners are removed.
    """
    reaped: list[GroupRecord] = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return reaped
    for name in names:
        path = directory / name
        if name.startswith("."):
            with contextlib.suppress(OSError):
                path.unlink()  # a record its owner was still writing: its group has none yet
            continue
        try:
            entry = _decoder.decode(path.read_bytes())
        except (OSError, msgspec.DecodeError) as exc:
            log.warning("unreadable process group record %s (%s): removed", path, exc)
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        if start_time(entry.owner) == entry.owner_start and entry.owner_start:
            continue  # its owner still runs and will stop it itself
        leader = start_time(entry.pgid)
        if leader is None or leader == entry.leader_start:
            # The leader is the original, or gone (its group, if any, is still the original).
            try:
                os.killpg(entry.pgid, signal.SIGKILL)
                reaped.append(entry)
            except (ProcessLookupError, PermissionError):
                pass  # nothing of it is left
        with contextlib.suppress(OSError):
            path.unlink()
    return reaped


def claim_group_ledger(directory: Path) -> list[GroupRecord]:
    """At a program's start: reap what dead owners left in ``directory``, then record there."""
    reaped = reap_orphan_groups(directory)
    for entry in reaped:
        log.warning("killed process group %d (%s) left running by hermes process %d, which was killed", entry.pgid, " ".join(entry.argv), entry.owner)
    use_group_ledger(directory)
    return reaped
