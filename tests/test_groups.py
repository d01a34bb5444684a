"""The process-group ledger: what a SIGKILLed hermes left running is reaped by the next one."""

from __future__ import annotations

import os
import select
import subprocess
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from actors import GroupRecord, reap_orphan_groups
from actors._groups import start_time
from tests.conftest import DEADLINE


@pytest.fixture
def group() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        yield process
    finally:
        process.kill()
        process.wait(timeout=DEADLINE)


def dead_owner() -> tuple[int, int]:
    """The pid and start time of a process that has exited."""
    process = subprocess.Popen(["true"])
    start = start_time(process.pid) or 1
    process.wait(timeout=DEADLINE)
    return process.pid, start


def write(directory: Path, entry: GroupRecord) -> None:
    directory.mkdir(exist_ok=True)
    (directory / str(entry.pgid)).write_bytes(msgspec.json.encode(entry))


def test_a_group_whose_owner_died_is_killed_and_its_record_removed(tmp_path: Path, group: subprocess.Popen[bytes]) -> None:
    owner, owner_start = dead_owner()
    leader = start_time(group.pid)
    assert leader is not None
    write(tmp_path, GroupRecord(pgid=group.pid, leader_start=leader, owner=owner, owner_start=owner_start, argv=("sleep", "300")))
    exited = os.pidfd_open(group.pid)
    try:
        reaped = reap_orphan_groups(tmp_path)
        assert [r.pgid for r in reaped] == [group.pid]
        assert select.select([exited], [], [], DEADLINE)[0]
    finally:
        os.close(exited)
    assert group.wait(timeout=DEADLINE) == -9
    assert list(tmp_path.iterdir()) == []


def test_a_recycled_pid_or_a_live_owner_is_left_alone(tmp_path: Path, group: subprocess.Popen[bytes]) -> None:
    owner, owner_start = dead_owner()
    leader = start_time(group.pid)
    assert leader is not None
    # The pid now belongs to another process than the recorded one (another start time).
    write(tmp_path, GroupRecord(pgid=group.pid, leader_start=leader - 1, owner=owner, owner_start=owner_start))
    assert reap_orphan_groups(tmp_path) == []
    assert list(tmp_path.iterdir()) == []
    # Its owner (this process) still runs: it stops its own groups.
    me = os.getpid()
    write(tmp_path, GroupRecord(pgid=group.pid, leader_start=leader, owner=me, owner_start=start_time(me) or 0))
    assert reap_orphan_groups(tmp_path) == []
    assert [p.name for p in tmp_path.iterdir()] == [str(group.pid)]
    assert group.poll() is None  # never signalled


def test_an_unreadable_record_is_removed_and_a_missing_ledger_is_empty(tmp_path: Path) -> None:
    assert reap_orphan_groups(tmp_path / "none") == []
    (tmp_path / "123").write_text("not json")
    (tmp_path / ".124.new").write_text('{"pgid": 1')  # an owner killed while writing it
    assert reap_orphan_groups(tmp_path) == []
    assert list(tmp_path.iterdir()) == []


async def test_run_process_keeps_a_record_while_its_group_runs(tmp_path: Path) -> None:
    from actors import run_process, use_group_ledger

    ledger = tmp_path / "groups"
    use_group_ledger(ledger)
    try:
        # From inside: $$ is the shell's pid, which is its group's id. The shell reads its
        # input first, and run_process feeds it only once the record is written.
        result = await run_process(["bash", "-c", f'read -r _; echo $$; cat "{ledger}/$$"'], stdin=b"go\n")
    finally:
        use_group_ledger(None)
    pid, record = result.stdout.decode().split("\n", 1)
    entry = msgspec.json.decode(record, type=GroupRecord)
    assert (entry.pgid, entry.owner, entry.argv[:2]) == (int(pid), os.getpid(), ("bash", "-c"))
    assert entry.leader_start > 0 and entry.owner_start == start_time(os.getpid())
    assert list(ledger.iterdir()) == []  # gone with the group
