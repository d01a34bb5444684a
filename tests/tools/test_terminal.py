"""The terminal and process tools with real processes: output, cwd, timeouts, cancel, background, approvals.

Synchronisation is by FIFOs the command under test writes to, ``wait_all_tasks_blocked``
and final results; sleeps appear only inside the commands under test (the ``sleep
30.NNN`` markers that prove a process group died).
"""

from __future__ import annotations

import gc
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import actors.tools._terminal as terminal_module
from actors.agent import ApprovalGate, ApprovalSettings, ToolContext, ToolOutput, Workspace
from actors.agent._plan import PlannedCall, plan_batches
from actors.tools import REGISTRY
from actors.tools._terminal_background import table_of
from protocols._session import ApprovalRequested, ApprovalResolved
from tests.conftest import DEADLINE
from tests.processes import live_processes_with, open_fifo


def make_call(tmp_path: Path, gate: ApprovalGate | None = None, session: str = "s") -> ToolContext:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    home = tmp_path / "hermes"  # HERMES_HOME beside the work: every write under it needs approval
    return ToolContext(session_id=session, turn_id="t1", call_id="call1", home=home, workspace=Workspace(work, gate))


async def run(call: ToolContext, command: str, **arguments: Any) -> ToolOutput:
    with trio.fail_after(DEADLINE):
        return await REGISTRY.get("terminal").run({"command": command, **arguments}, call)


async def process(call: ToolContext, action: str, process_id: str | None = None, **arguments: Any) -> ToolOutput:
    with trio.fail_after(DEADLINE):
        return await REGISTRY.get("process").run({"action": action, "process_id": process_id, **arguments}, call)


def open_barrier(path: Path) -> int:
    """A FIFO the command writes lines to. Opened read-write: holding a writer ourselves, the
    reader never sees end-of-file (always readable) between the command's writes."""
    os.mkfifo(path)
    return os.open(path, os.O_RDWR | os.O_NONBLOCK)


def marker(n: int) -> str:
    """A sleep duration unique to this test process, to find its sleeps in /proc."""
    return f"30.{os.getpid()}{n}"


# -- running ------------------------------------------------------------------------------------------------


async def test_a_command_reports_stdout_and_stderr_interleaved_and_its_exit_code(tmp_path: Path) -> None:
    result = await run(make_call(tmp_path), "echo one; echo two >&2; echo three; exit 3")
    assert result.content == "one\ntwo\nthree\n[exit code 3]"
    assert result.ok  # a failing command is an answer, not a tool error
    silent = await run(make_call(tmp_path), "true")
    assert silent.content == "(no output)\n[exit code 0]"


async def test_a_syntax_error_is_reported_like_bash_reports_it(tmp_path: Path) -> None:
    result = await run(make_call(tmp_path), "echo 'unterminated")
    assert "unexpected EOF" in result.content and result.content.endswith("[exit code 2]")


async def test_cd_in_one_call_moves_the_sessions_working_directory_for_the_next(tmp_path: Path) -> None:
    call = make_call(tmp_path)
    (call.workspace.cwd / "sub" / "deeper").mkdir(parents=True)
    moved = await run(call, "cd sub/deeper && echo moved")
    assert call.workspace.cwd == tmp_path / "work" / "sub" / "deeper"
    assert moved.content.endswith(f"[working directory is now {tmp_path / 'work' / 'sub' / 'deeper'}]")
    assert (await run(call, "pwd")).content.splitlines()[0] == str(tmp_path / "work" / "sub" / "deeper")
    await run(call, "cd .. && exit 4")  # the EXIT trap records it even on exit
    assert call.workspace.cwd == tmp_path / "work" / "sub"
    await run(call, "cd /nonexistent-dir-for-test")
    assert call.workspace.cwd == tmp_path / "work" / "sub"


async def test_workdir_applies_to_one_call_and_a_missing_one_is_an_error(tmp_path: Path) -> None:
    call = make_call(tmp_path)
    (tmp_path / "other").mkdir()
    here = await run(call, "pwd", workdir=str(tmp_path / "other"))
    assert here.content.splitlines()[0] == str(tmp_path / "other")
    assert call.workspace.cwd == tmp_path / "work"
    missing = await run(call, "pwd", workdir="no-such-dir")
    assert not missing.ok and "not a directory" in missing.content


async def test_a_vanished_working_directory_falls_back_to_its_nearest_parent(tmp_path: Path) -> None:
    call = make_call(tmp_path)
    call.workspace.cwd = tmp_path / "work" / "gone" / "too"
    result = await run(call, "pwd")
    assert result.content.startswith("[note: the working directory")
    assert str(tmp_path / "work") in result.content.splitlines()[1]


async def test_a_timeout_kills_the_whole_process_group_and_says_so(tmp_path: Path) -> None:
    # A real timeout (the process runs on real time); 2 s leaves bash ample time to start.
    child, leader = marker(1), marker(2)
    result = await run(make_call(tmp_path), f"echo started; sleep {child} & sleep {leader}", timeout=2)
    assert result.content.startswith("started\n")
    assert result.content.endswith("[timed out after 2 s: the command and every process it started were killed]")
    assert not result.ok
    assert live_processes_with(f"sleep {child}") == []
    assert live_processes_with(f"sleep {leader}") == []


async def test_cancelling_the_call_kills_the_whole_process_group(tmp_path: Path) -> None:
    child, leader = marker(3), marker(4)
    fd = open_fifo(str(tmp_path / "ready"))
    try:
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run, make_call(tmp_path), f"sleep {child} & echo go > {tmp_path / 'ready'}; sleep {leader}")
                await trio.lowlevel.wait_readable(fd)
                assert live_processes_with(f"sleep {child}")
                nursery.cancel_scope.cancel()
    finally:
        os.close(fd)
    assert live_processes_with(f"sleep {child}") == []
    assert live_processes_with(f"sleep {leader}") == []


async def test_long_output_keeps_its_head_and_tail_with_a_note(tmp_path: Path) -> None:
    result = await run(make_call(tmp_path), "seq 1 200000")
    assert len(result.content) < 50_500
    assert result.content.startswith("1\n2\n3\n")
    assert result.content.endswith("199999\n200000\n[exit code 0]")
    assert "bytes of output omitted from the middle" in result.content


async def test_ansi_escapes_and_progress_redraws_are_cleaned_from_the_output(tmp_path: Path) -> None:
    command = r"printf '\033[1;31mred\033[0m \033]0;title\007plain\n'; printf 'progress 10%%\rprogress 100%%\n'"
    result = await run(make_call(tmp_path), command)
    assert result.content == "red plain\nprogress 100%\n[exit code 0]"


async def test_secrets_in_the_output_are_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_TEST_API_KEY", "hunter2-very-secret-value")
    secrets = [
        "hunter2-very-secret-value",
        "sk-proj-abcdefghijklmnop1234",
        "ghp_abcdefghijklmnopqrstuvwxyz0123",
        "AKIAABCDEFGHIJKLMNOP",
        "eyJhbGciOi.payload.sig",
    ]
    command = (
        'echo "key=$HERMES_TEST_API_KEY"; echo sk-proj-abcdefghijklmnop1234; echo ghp_abcdefghijklmnopqrstuvwxyz0123; '
        "echo AKIAABCDEFGHIJKLMNOP; echo 'Authorization: Bearer eyJhbGciOi.payload.sig'; echo DB_PASSWORD=swordfish123"
    )
    result = await run(make_call(tmp_path), command)
    for secret in (*secrets, "swordfish123"):
        assert secret not in result.content
    assert "key=[REDACTED:HERMES_TEST_API_KEY]" in result.content
    assert "Bearer [REDACTED]" in result.content and "DB_PASSWORD=[REDACTED]" in result.content


async def test_stdin_is_empty_so_a_command_that_reads_it_does_not_hang(tmp_path: Path) -> None:
    result = await run(make_call(tmp_path), "cat; read x || echo eof")
    assert result.content == "eof\n[exit code 0]"


# -- background --------------------------------------------------------------------------------------------


async def test_a_background_command_is_started_polled_and_killed_with_its_group(tmp_path: Path) -> None:
    call = make_call(tmp_path)
    sleeper = marker(5)
    ready = open_barrier(tmp_path / "ready")
    os.mkfifo(tmp_path / "go")
    go = os.open(tmp_path / "go", os.O_RDWR)  # a writer exists, so the command's `read < go` just waits
    command = f"echo one; echo r1 > {tmp_path / 'ready'}; read line < {tmp_path / 'go'}; echo two; sleep {sleeper} & echo r2 > {tmp_path / 'ready'}; wait"
    try:
        started = await run(call, command, background=True)
        assert started.content.startswith("[started bg1 in the background]")
        with trio.fail_after(DEADLINE):
            await trio.lowlevel.wait_readable(ready)
        os.read(ready, 100)
        first = await process(call, "poll", "bg1")
        assert first.content.startswith("[bg1 running for") and first.content.endswith("\none")
        assert "(no new output)" in (await process(call, "poll", "bg1")).content
        os.write(go, b"go\n")
        with trio.fail_after(DEADLINE):
            await trio.lowlevel.wait_readable(ready)
        os.read(ready, 100)
        second = await process(call, "poll", "bg1")
        assert second.content.endswith("\ntwo") and "one" not in second.content
        assert live_processes_with(f"sleep {sleeper}")
        listed = await process(call, "list")
        assert listed.content.startswith("bg1  running for")
        killed = await process(call, "kill", "bg1")
        assert killed.content.startswith("[bg1 killed]")
    finally:
        os.close(ready)
        os.close(go)
    assert live_processes_with(f"sleep {sleeper}") == []
    assert "bg1  killed" in (await process(call, "list")).content


async def test_waiting_on_a_background_command_reports_its_output_and_exit_code(tmp_path: Path) -> None:
    call = make_call(tmp_path)
    await run(call, "echo working; echo done; exit 3", background=True)
    finished = await process(call, "wait", "bg1", timeout=DEADLINE)
    assert finished.content == "[bg1 exited with code 3]\nworking\ndone"
    assert (await process(call, "poll", "bg1")).content == "[bg1 exited with code 3]\n(no new output)"


async def test_a_background_lifetime_kills_the_group_when_it_runs_out(tmp_path: Path) -> None:
    call = make_call(tmp_path)
    sleeper = marker(6)
    ready = open_barrier(tmp_path / "ready")
    try:
        started = await run(call, f"echo up; sleep {sleeper} & echo r > {tmp_path / 'ready'}; wait", background=True, timeout=2)
        assert "stopped after 2 s" in started.content
        with trio.fail_after(DEADLINE):
            await trio.lowlevel.wait_readable(ready)
        assert live_processes_with(f"sleep {sleeper}")
        finished = await process(call, "wait", "bg1", timeout=DEADLINE)
    finally:
        os.close(ready)
    assert finished.content == "[bg1 timed out]\nup"
    assert live_processes_with(f"sleep {sleeper}") == []


async def test_background_commands_belong_to_their_session(tmp_path: Path) -> None:
    mine, other = make_call(tmp_path, session="a"), make_call(tmp_path, session="b")
    sleeper = marker(7)
    await run(mine, f"sleep {sleeper}", background=True)
    assert not (await process(other, "poll", "bg1")).ok
    assert (await process(other, "list")).content == "No background commands in this session."
    assert len(table_of(mine.workspace).running()) == 1
    mine.workspace.close()  # what a session does when it ends
    with trio.fail_after(DEADLINE):
        await table_of(mine.workspace).get("bg1").done.wait()  # type: ignore[union-attr]
    assert live_processes_with(f"sleep {sleeper}") == []


async def test_background_commands_die_when_their_session_workspace_is_collected(tmp_path: Path) -> None:
    call = make_call(tmp_path)
    sleeper = marker(8)
    await run(call, f"sleep {sleeper}", background=True)
    proc = table_of(call.workspace).get("bg1")
    assert proc is not None
    del call
    gc.collect()
    with trio.fail_after(DEADLINE):
        await proc.done.wait()
    assert proc.state == "killed"
    assert live_processes_with(f"sleep {sleeper}") == []


def test_background_commands_do_not_outlive_the_trio_run_that_owns_them(tmp_path: Path) -> None:
    sleeper = marker(9)
    ready = open_barrier(tmp_path / "ready")

    async def start_and_leave() -> None:
        call = make_call(tmp_path)
        await run(call, f"sleep {sleeper} & echo r > {tmp_path / 'ready'}; wait", background=True)
        with trio.fail_after(DEADLINE):
            await trio.lowlevel.wait_readable(ready)
        assert live_processes_with(f"sleep {sleeper}")
        # Returning ends the run, as stopping the reactor does: trio cancels its system tasks.

    try:
        trio.run(start_and_leave)
    finally:
        os.close(ready)
    assert live_processes_with(f"sleep {sleeper}") == []


# -- approvals ------------------------------------------------------------------------------------------------


def gate(tmp_path: Path, **options: Any) -> tuple[ApprovalGate, list[Any]]:
    events: list[Any] = []
    return ApprovalGate(events.append, home=tmp_path / "home", **options), events


async def answer_when_asked(g: ApprovalGate, events: list[Any], choice: str) -> None:
    await trio.testing.wait_all_tasks_blocked()
    request = next(e for e in events if isinstance(e, ApprovalRequested))
    assert g.resolve(request.request_id, choice)


def dangerous_command(tmp_path: Path) -> str:
    """Needs approval (chmod 777) and leaves a marker file when it runs."""
    (tmp_path / "shared.txt").write_text("x")
    return f"chmod 777 {tmp_path / 'shared.txt'} && touch {tmp_path / 'ran'}"


async def test_a_dangerous_command_approved_once_runs(tmp_path: Path) -> None:
    g, events = gate(tmp_path)
    call = make_call(tmp_path, g)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer_when_asked, g, events, "once")
        result = await run(call, dangerous_command(tmp_path))
    assert result.content == "(no output)\n[exit code 0]"
    assert (tmp_path / "ran").exists()
    assert stat.S_IMODE((tmp_path / "shared.txt").stat().st_mode) == 0o777
    request = events[0]
    assert isinstance(request, ApprovalRequested)
    assert request.turn_id == "t1" and request.call_id == "call1" and "chmod 777" in request.command
    assert request.reasons == ("makes files writable by everyone (chmod 777)",)
    assert isinstance(events[-1], ApprovalResolved) and events[-1].choice == "once"


async def test_a_denied_dangerous_command_never_runs(tmp_path: Path) -> None:
    g, events = gate(tmp_path)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer_when_asked, g, events, "deny")
        result = await run(make_call(tmp_path, g), dangerous_command(tmp_path))
    assert result.content.startswith("[denied] This command was not run: the user denied it")
    assert not result.ok
    assert not (tmp_path / "ran").exists()


async def test_an_unanswered_approval_times_out_and_nothing_runs(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    g, events = gate(tmp_path)
    result = await REGISTRY.get("terminal").run({"command": dangerous_command(tmp_path)}, make_call(tmp_path, g))
    assert result.content.startswith("[denied] This command was not run: nobody answered the approval request in time")
    assert events[0].timeout_s == terminal_module.DEFAULT_APPROVAL_TIMEOUT
    assert events[-1].choice == "timeout"
    assert not (tmp_path / "ran").exists()


async def test_a_hardline_command_never_runs_and_is_never_asked_even_with_yolo(tmp_path: Path) -> None:
    g, events = gate(tmp_path, yolo=True)
    call = make_call(tmp_path, g)
    # Safe even if it ran: `false &&` short-circuits. It must not run at all: no marker.
    for command in (f"touch {tmp_path / 'ran'} && false && rm -rf /", f"touch {tmp_path / 'ran'}; false && shutdown -h now"):
        result = await run(call, command)
        assert result.content.startswith("[blocked] This command was not run:")
        assert not result.ok
    assert not (tmp_path / "ran").exists()
    assert events == []


async def test_yolo_runs_a_dangerous_command_without_asking(tmp_path: Path) -> None:
    g, events = gate(tmp_path, yolo=True)
    result = await run(make_call(tmp_path, g), dangerous_command(tmp_path))
    assert result.content.endswith("[exit code 0]")
    assert (tmp_path / "ran").exists()
    assert events == []


async def test_without_an_approval_gate_a_dangerous_command_is_refused(tmp_path: Path) -> None:
    result = await run(make_call(tmp_path), dangerous_command(tmp_path))
    assert result.content.startswith("[denied] This command needs approval (makes files writable by everyone")
    assert "no client can answer" in result.content
    assert not (tmp_path / "ran").exists()


async def test_a_write_to_the_sessions_own_hermes_home_needs_approval_and_reading_it_does_not(tmp_path: Path) -> None:
    call = make_call(tmp_path)
    call.home.mkdir()
    (call.home / "config.yaml").write_text("approvals:\n  mode: manual\n")
    widened = await run(call, f"echo 'approvals: {{mode: off}}' >> {call.home / 'config.yaml'}")
    assert widened.content.startswith("[denied] This command needs approval (changes the agent's own configuration")
    assert (call.home / "config.yaml").read_text() == "approvals:\n  mode: manual\n"
    read = await run(call, f"cat {call.home / 'config.yaml'}")
    assert read.content.startswith("approvals:") and read.ok


async def test_a_long_command_is_checked_as_carefully_as_a_short_one(tmp_path: Path) -> None:
    padding = "echo " + "x" * 10_000  # past the size checked inline: this one is read in a worker thread
    blocked = await run(make_call(tmp_path), f"{padding}; touch {tmp_path / 'ran'} && false && rm -rf /")
    assert blocked.content.startswith("[blocked]")
    refused = await run(make_call(tmp_path), f"{padding}; {dangerous_command(tmp_path)}")
    assert refused.content.startswith("[denied]")
    assert not (tmp_path / "ran").exists()


async def test_a_dangerous_background_command_asks_before_it_starts(tmp_path: Path) -> None:
    g, events = gate(tmp_path)
    call = make_call(tmp_path, g)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer_when_asked, g, events, "deny")
        result = await run(call, dangerous_command(tmp_path), background=True)
    assert result.content.startswith("[denied]")
    assert (await process(call, "list")).content == "No background commands in this session."


async def test_the_sessions_deny_globs_block_a_command(tmp_path: Path) -> None:
    call = make_call(tmp_path)
    call.workspace.extras[terminal_module.DENY_GLOBS_KEY] = ["touch *"]
    result = await run(call, f"touch {tmp_path / 'ran'}")
    assert result.content.startswith("[blocked] This command was not run: matches your deny list: 'touch *'")
    assert not (tmp_path / "ran").exists()


async def test_deny_globs_from_config_block_a_command_even_with_approvals_off(tmp_path: Path) -> None:
    settings = ApprovalSettings(mode="off", deny=("touch *",))
    call = make_call(tmp_path, ApprovalGate(lambda event: None, home=tmp_path, settings=settings))
    result = await run(call, f"touch {tmp_path / 'ran'}")
    assert result.content.startswith("[blocked] This command was not run: matches your deny list: 'touch *'")
    assert not (tmp_path / "ran").exists()
    assert (await run(call, "echo fine")).ok


# -- declaration ----------------------------------------------------------------------------------------------


def test_the_tools_are_in_the_terminal_toolset_and_each_call_runs_alone() -> None:
    terminal, process_tool = REGISTRY.get("terminal"), REGISTRY.get("process")
    assert (terminal.toolset, process_tool.toolset) == ("terminal", "terminal")
    assert not terminal.traits.read_only and terminal.traits.path_argument is None and not terminal.traits.exclusive
    assert terminal.parameters()["required"] == ["command"]
    calls = [PlannedCall(call_id=f"c{i}", name="terminal", arguments={"command": "ls"}) for i in range(3)]
    assert plan_batches(calls, {"terminal": terminal.traits}) == (("c0",), ("c1",), ("c2",))
