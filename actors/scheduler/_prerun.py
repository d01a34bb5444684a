"""A job's pre-run script (Hermes's ``script`` field): run before the model turn, its output the run's context.

The script must lie under ``HERMES_HOME/scripts/`` (a relative name is taken from there; an
absolute or ``~`` path must resolve inside it). ``.sh`` / ``.bash`` files run under bash, any
other under this Python; no shell, without the server's secret-named variables, in a process group of its own, with a deadline
(``HERMES_CRON_SCRIPT_TIMEOUT`` seconds, default 120): past it the group is killed and reaped.
Its stdout (at most ``MAX_OUTPUT`` characters kept, secrets redacted) goes into the prompt; a
failure or a timeout is given to the model as a script error (the run proceeds, as Hermes's
does) and noted with the occurrence.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import trio

SCRIPTS_FOLDER = "scripts"
DEFAULT_TIMEOUT = 120.0
MAX_OUTPUT = 20_000
_READ_CHUNK = 65_536
_REAP_TIMEOUT = 5.0


class ScriptError(ValueError):
    """The script named cannot be run (outside the scripts folder, missing, not a file)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ScriptResult:
    ok: bool
    output: str
    """stdout when ``ok`` (capped, redacted); else what went wrong, with stderr's tail."""
    note: str = ""
    """What the occurrence records (empty when the script ran fine)."""


def script_timeout(environ: Mapping[str, str]) -> float:
    """``HERMES_CRON_SCRIPT_TIMEOUT`` (seconds) when it is a positive number, else 120."""
    try:
        value = float(environ.get("HERMES_CRON_SCRIPT_TIMEOUT", ""))
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


def resolve_script(home: Path, script: str) -> Path:
    """The script's path, checked to lie inside ``home/scripts``.

    Raises:
        ScriptError: outside the folder, missing, or not a file (the message says where scripts go).
    """
    folder = (home / SCRIPTS_FOLDER).resolve()
    raw = Path(script).expanduser()
    path = (raw if raw.is_absolute() else folder / raw).resolve()
    if not path.is_relative_to(folder):
        raise ScriptError(f"the script {script!r} is outside {folder}; put it there and name it relative to that folder")
    if not path.is_file():
        raise ScriptError(f"the script {script!r} was not found at {path}; put it under {folder}")
    return path


def argv_for(path: Path) -> list[str]:
    """bash for ``.sh`` / ``.bash``, this Python for anything else."""
    if path.suffix.lower() in (".sh", ".bash"):
        return [shutil.which("bash") or "/bin/bash", str(path)]
    return [sys.executable, str(path)]


async def _read_capped(stream: trio.abc.ReceiveStream, sink: bytearray, limit: int) -> None:
    """Read ``stream`` to its end, keeping at most ``limit`` bytes (the rest is drained, not kept)."""
    while chunk := await stream.receive_some(_READ_CHUNK):
        if len(sink) < limit:
            sink.extend(chunk[: limit - len(sink)])


def _kill_group(process: trio.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


async def run_script(home: Path, script: str, *, timeout: float, environ: Mapping[str, str] | None = None) -> ScriptResult:
    """Run the job's script to its end or its deadline; never raises for the script's own faults."""
    from actors.memory import is_secret_name, redact_secrets

    try:
        path = await trio.to_thread.run_sync(resolve_script, home, script)
    except ScriptError as exc:
        return ScriptResult(ok=False, output=str(exc), note=f"pre-run script not run: {exc}")
    # like Hermes's, a script does not inherit the server's keys and tokens
    env = {k: v for k, v in (os.environ if environ is None else environ).items() if not is_secret_name(k)}
    process = await trio.lowlevel.open_process(
        argv_for(path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(path.parent), env=env, start_new_session=True
    )
    out, err = bytearray(), bytearray()
    timed_out = False
    try:
        with trio.move_on_after(timeout) as scope:
            async with trio.open_nursery() as nursery:
                assert process.stdout is not None and process.stderr is not None
                nursery.start_soon(_read_capped, process.stdout, out, MAX_OUTPUT * 4)
                nursery.start_soon(_read_capped, process.stderr, err, MAX_OUTPUT)
            await process.wait()
        timed_out = scope.cancelled_caught
    finally:
        # the deadline passed, the run was cancelled, or the script left children: the whole group goes
        _kill_group(process)
        with trio.CancelScope(shield=True), trio.move_on_after(_REAP_TIMEOUT):
            await process.wait()
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    await stream.aclose()
    stdout = redact_secrets(out.decode("utf-8", "replace"))[:MAX_OUTPUT].strip()
    stderr = redact_secrets(err.decode("utf-8", "replace")).strip()[-2000:]
    if timed_out:
        note = f"pre-run script {script!r} passed its deadline of {timeout:g} s; its process group was killed"
        return ScriptResult(ok=False, output=note + (f"\nstderr:\n{stderr}" if stderr else ""), note=note)
    if process.returncode != 0:
        note = f"pre-run script {script!r} exited with status {process.returncode}"
        return ScriptResult(ok=False, output=note + (f"\nstderr:\n{stderr}" if stderr else ""), note=note)
    return ScriptResult(ok=True, output=stdout)
