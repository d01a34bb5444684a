"""``hermes serve --workers N``: N ``hermes serve`` processes on one port, sharing the home's store.

One ``hermes serve`` is bound by one interpreter lock; N worker processes use N cores. The
parent serves nothing itself. In order, it:

1. claims the store (``actors.store._owner``) for all its workers, saying so in the owner file:
   a second ``hermes serve`` (or ``hermes chat``) on the home is refused while it runs, and a
   home another runtime serves is refused here (on a file store; on Postgres the claim is
   taken when free, as any node does);
2. as the store's only process (a file store): imports a Hermes ``state.db`` and ends every
   session lease a dead run left (``end_leases``), so no session waits for a dead worker's
   lease to lapse. What dead turns left open is settled by the workers as they start;
3. reserves the port: a socket bound with ``SO_REUSEPORT`` and never listening (port 0 gets a
   free port here, known before any worker starts; the reservation takes no connection);
4. starts each worker (``_worker_role``): ``hermes serve`` in its own session (process group),
   a cluster node ``<base>-w<i>`` binding the same port with ``SO_REUSEPORT``; when all have
   said they listen, prints the one URL; a worker that fails to start fails the whole
   command (exit status 2 for a configuration error, else 1), the others stopped;
5. restarts a worker that dies (a line says which, how, and when it restarts: 0.5 s, doubling
   for each death within a minute of its start, at most 30 s), its process group killed first;
6. forwards SIGTERM / SIGINT / SIGHUP to every worker (they drain / reload), waits for them
   (the drain deadline plus a minute, then SIGKILL), kills every worker's group, reaps the
   tool commands of workers that were killed (the group ledger), and exits 0 when every
   worker stopped cleanly.

Workers' output is forwarded line by line with a ``[w<i>]`` prefix, after the parent's first
line (tests and operators read the URL first).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from actors._groups import reap_orphan_groups
from actors._version import package_version
from actors.agent import ConfigError, hermes_home
from actors.config import load_config
from actors.config._env import read_dotenv
from actors.store import HermesImportError, StoreError, import_hermes_store, is_database_url
from actors.store._location import store_location
from actors.store._owner import WORKERS_HOLDER, StoreClaim, claim_holder, claim_store
from actors.store._settle import end_leases

from ._cluster import SECRET_VARIABLE
from ._keys import KeyError_, load_or_create_key
from ._listen import ListenError, open_listener
from ._worker_role import WORKER_ENV, worker_role

READY_DEADLINE = 120.0
"""Seconds the workers have to start listening (N interpreters importing on few cores)."""
STOP_GRACE = 60.0
"""Seconds past the drain deadline the workers have to stop before they are killed."""
FIRST_DELAY, MAX_DELAY, STABLE = 0.5, 30.0, 60.0
"""Restart backoff: the first delay, its cap, and how long a worker must live for it to reset."""

_LISTENING = re.compile(r"listening on (http://\S+)/v1")


def restart_delay(quick_deaths: int) -> float:
    """Seconds before a dead worker starts again, after ``quick_deaths`` deaths in a row that
    each came within ``STABLE`` seconds of its start (the one just seen included)."""
    return min(FIRST_DELAY * 2.0 ** max(quick_deaths - 1, 0), MAX_DELAY)


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def configured_workers(env: Mapping[str, str], home: Path | None) -> int:
    """``api_server.workers`` of the home's config.yaml (1 when it cannot be read: ``hermes
    serve`` itself then says why)."""
    try:
        return load_config(home or hermes_home(env), env).config.api_server.workers
    except ConfigError:
        return 1


def run_serve_command(
    *, workers: int | None, host: str | None, port: int | None, home: Path | None, drain_timeout: float, yolo: bool, accept_hooks: bool
) -> int:
    """``hermes serve``: one process (``_serve.run_serve``), or a parent of ``--workers`` / ``api_server.workers``."""
    from ._serve import run_serve

    env = dict(os.environ)
    count = workers if workers is not None else (1 if env.get(WORKER_ENV) else configured_workers(env, home))
    if count < 1:
        print(f"hermes serve: --workers {count}: give 1 or more worker processes", file=sys.stderr, flush=True)
        return 2
    if count == 1 or env.get(WORKER_ENV):
        return run_serve(host=host, port=port, home=home, drain_timeout=drain_timeout, yolo=yolo, accept_hooks=accept_hooks)
    return run_workers(count, host=host, port=port, home=home, drain_timeout=drain_timeout, env=env, yolo=yolo, accept_hooks=accept_hooks)


def run_workers(
    count: int,
    *,
    host: str | None,
    port: int | None,
    home: Path | None,
    drain_timeout: float,
    env: Mapping[str, str],
    yolo: bool = False,
    accept_hooks: bool = False,
) -> int:
    env = dict(env)
    home = home or hermes_home(env)
    try:
        loaded = load_config(home, env)
        worker_role(env)  # a stray variable is said here, not by N workers
        key, created = load_or_create_key(home, env)  # once, before the workers read it
        store = store_location(home, {**read_dotenv(loaded.dotenv), **env}, loaded.config.database.url)
        if not {**read_dotenv(loaded.dotenv), **env}.get(SECRET_VARIABLE):  # the workers sign the requests they forward to each other
            env[SECRET_VARIABLE] = secrets.token_hex(32)  # none configured: one for this run, known to its workers only
    except (ConfigError, KeyError_, StoreError) as exc:
        print(f"hermes serve: {exc}", file=sys.stderr, flush=True)
        return 2
    section = loaded.config.api_server
    host = host or section.host
    port = port if port is not None else section.port
    holder = f"{WORKERS_HOLDER} {count} (pid {os.getpid()})"
    try:
        claim = claim_store(store, holder=holder)
    except StoreError as exc:
        print(f"hermes serve: {exc}", file=sys.stderr, flush=True)
        return 2
    if claim is None and not is_database_url(str(store)):
        other = claim_holder(store) or "another 'hermes serve' or 'hermes chat'"
        print(f"hermes serve: {store} is in use by {other}: stop it first (--workers needs the store to itself)", file=sys.stderr, flush=True)
        return 2
    try:
        return _serve_with_claim(count, store, claim, host, port, home, drain_timeout, env, key if created else "", yolo=yolo, accept_hooks=accept_hooks)
    finally:
        if claim is not None:
            claim.close()


def _serve_with_claim(
    count: int,
    store: str | Path,
    claim: StoreClaim | None,
    host: str,
    port: int,
    home: Path,
    drain_timeout: float,
    env: dict[str, str],
    created: str,
    *,
    yolo: bool,
    accept_hooks: bool,
) -> int:
    if claim is not None and not is_database_url(str(store)):
        try:
            report = import_hermes_store(store)
            if report is not None:
                print(f"hermes serve: {report.line()}", flush=True)
            ended = end_leases(store)
        except (HermesImportError, StoreError) as exc:
            print(f"hermes serve: {exc}", file=sys.stderr, flush=True)
            return 2
        if ended:
            print(f"hermes serve: {ended} session lease(s) a stopped process left were ended", file=sys.stderr, flush=True)
    try:
        reservation = open_listener(host, port, reuse_port=True, listen=False)
    except ListenError as exc:
        print(f"hermes serve: {exc}", file=sys.stderr, flush=True)
        return 2
    options = ["--host", host, "--port", str(reservation.getsockname()[1]), "--home", str(home), "--drain-timeout", repr(drain_timeout)]
    options += ["--yolo"] * yolo + ["--accept-hooks"] * accept_hooks
    pool = WorkerPool(count, options, env, home=home, drain_timeout=drain_timeout)
    try:
        return pool.run(url=f"http://{host}:{reservation.getsockname()[1]}/v1", created=created)
    finally:
        reservation.close()


@dataclasses.dataclass
class Worker:
    index: int
    process: subprocess.Popen[bytes] | None = None
    pid: int = 0
    started_at: float = 0.0
    quick_deaths: int = 0
    restart_at: float | None = None
    ready: bool = False
    exit_code: int | None = None
    held: list[tuple[IO[str], str]] = dataclasses.field(default_factory=list)
    """Lines said before the parent's first line (stream, text), printed after it."""


class WorkerPool:
    """The parent's loop: start, watch, restart and stop the workers (see the module text)."""

    def __init__(self, count: int, options: list[str], env: dict[str, str], *, home: Path, drain_timeout: float) -> None:
        self.workers = [Worker(index) for index in range(count)]
        self.options = options
        self.env = env
        self.home = home
        self.drain_timeout = drain_timeout
        self.events: queue.SimpleQueue[tuple[str, int]] = queue.SimpleQueue()
        self.output = threading.Lock()
        self.open = False
        """Whether the parent's first line is out (workers' lines are printed, not held)."""
        self.parent_read, self.parent_write = os.pipe()  # the write end stays here: its end is the parent's death

    # -- the loop -----------------------------------------------------------------------------

    def run(self, *, url: str, created: str) -> int:
        """Until the workers stopped; ``created``: the API key made for this home (empty: none)."""
        previous = {sig: signal.signal(sig, self._signalled) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD)}
        try:
            return self._loop(url, created)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._kill_all()
            os.close(self.parent_write)
            os.close(self.parent_read)
            for entry in reap_orphan_groups(self.home / "run" / "groups"):
                self._say(sys.stdout, f"hermes serve: stopped a command a killed worker had left running: {' '.join(entry.argv)}")

    def _loop(self, url: str, created: str) -> int:
        for worker in self.workers:
            self._start(worker)
        ready_by = time.monotonic() + READY_DEADLINE
        stop_by: float | None = None
        stopping = ""
        while True:
            now = time.monotonic()
            dues = [w.restart_at for w in self.workers if w.restart_at is not None]
            limit = stop_by if stop_by is not None else (ready_by if not self.open else None)
            wake = min([*dues, *([limit] if limit is not None else [])], default=now + 60.0)
            with contextlib.suppress(queue.Empty):
                kind, value = self.events.get(timeout=max(wake - now, 0.0))
                if kind == "signal" and value in (signal.SIGTERM, signal.SIGINT):
                    if not stopping:
                        stopping = signal.Signals(value).name
                        stop_by = time.monotonic() + self.drain_timeout + STOP_GRACE
                        for worker in self.workers:
                            if worker.process is None:  # dead, waiting for its restart: it stays stopped
                                worker.restart_at, worker.exit_code = None, 0
                        self._say(sys.stdout, f"hermes serve: {stopping}: stopping {len(self.workers)} workers (each drains up to {self.drain_timeout:g} s)")
                    self._signal_all(value)  # a second one stops them at once, as it does one hermes serve
                elif kind == "signal" and value == signal.SIGHUP:
                    self._signal_all(value)
                elif kind == "ready":
                    self._ready(self.workers[value], url, created)
            for worker in self.workers:
                if worker.process is not None and (code := worker.process.poll()) is not None:
                    failed = self._exited(worker, code, stopping)
                    if failed is not None:
                        return failed
            now = time.monotonic()
            for worker in self.workers:
                if worker.restart_at is not None and worker.restart_at <= now and not stopping:
                    self._start(worker)
            if stopping and all(w.process is None for w in self.workers):
                clean = all(w.exit_code == 0 for w in self.workers)
                self._say(sys.stdout, "hermes serve: every worker stopped cleanly" if clean else "hermes serve: stopped, but a worker did not stop cleanly")
                return 0 if clean else 1
            if stop_by is not None and now >= stop_by:
                self._say(sys.stderr, f"hermes serve: workers still running {self.drain_timeout + STOP_GRACE:g} s after {stopping}: killed")
                return 1
            if not self.open and now >= ready_by and not stopping:
                late = ", ".join(f"w{w.index}" for w in self.workers if not w.ready)
                self._say(sys.stderr, f"hermes serve: worker(s) {late} did not start listening within {READY_DEADLINE:g} s: stopping")
                self._flush_held()
                return 1

    def _ready(self, worker: Worker, url: str, created: str) -> None:
        worker.ready = True
        if self.open:
            self._say(sys.stdout, f"hermes serve: worker w{worker.index} restarted (pid {worker.pid})")
            return
        if not all(w.ready for w in self.workers):
            return
        pids = ", ".join(str(w.pid) for w in self.workers)
        lines = [f"hermes serve {package_version()}: listening on {url} ({len(self.workers)} workers, pids {pids})"]
        if created:
            lines.append(f"A new API key was made and saved in {self.home / '.env'} (API_SERVER_KEY):\n  {created}")
        lines.append(f"Try: curl -H 'Authorization: Bearer <key>' {url}/models   (Ctrl+C or SIGTERM stops every worker)")
        with self.output:
            for line in lines:
                print(line, flush=True)
            self.open = True
        self._flush_held()

    def _exited(self, worker: Worker, code: int, stopping: str) -> int | None:
        """A worker's process ended: its group killed, then a restart planned, or the start failed (the exit status)."""
        assert worker.process is not None
        lived = time.monotonic() - worker.started_at
        pid = worker.pid
        worker.process, worker.exit_code = None, code
        _kill_group(pid)
        if stopping:
            return None
        if not self.open:
            self._say(sys.stderr, f"hermes serve: worker w{worker.index} (pid {pid}) could not start ({describe_exit(code)}); stopping the others")
            self._flush_held()
            return 2 if code == 2 else 1
        worker.quick_deaths = worker.quick_deaths + 1 if lived < STABLE else 1
        delay = restart_delay(worker.quick_deaths)
        worker.restart_at = time.monotonic() + delay
        self._say(
            sys.stderr, f"hermes serve: worker w{worker.index} (pid {pid}) died ({describe_exit(code)}) after {lived:.1f} s; restarting it in {delay:g} s"
        )
        return None

    # -- workers ------------------------------------------------------------------------------

    def _start(self, worker: Worker) -> None:
        env = {**self.env, WORKER_ENV: f"{worker.index}:{len(self.workers)}:{self.parent_read}"}
        argv = [sys.executable, "-m", "actors.cli", "serve", *self.options]
        worker.restart_at, worker.ready, worker.exit_code = None, False, None
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True, pass_fds=(self.parent_read,))
        worker.process, worker.pid, worker.started_at = process, process.pid, time.monotonic()
        assert process.stdout is not None and process.stderr is not None
        threading.Thread(target=self._relay, args=(worker, process.stdout, sys.stdout, True), daemon=True).start()
        threading.Thread(target=self._relay, args=(worker, process.stderr, sys.stderr, False), daemon=True).start()

    def _relay(self, worker: Worker, pipe: IO[bytes], to: IO[str], announces: bool) -> None:
        """Forward a worker's lines with its prefix; its listening line is the ready event."""
        waiting = announces
        with pipe:
            for raw in pipe:
                line = raw.decode(errors="replace").rstrip("\n")
                if announces and line.startswith("Try: curl"):
                    continue  # the parent says it once
                if waiting and _LISTENING.search(line):
                    waiting = False
                    self.events.put(("ready", worker.index))
                    continue
                with self.output:
                    if not self.open:
                        worker.held.append((to, line))
                        continue
                print(f"[w{worker.index}] {line}", file=to, flush=True)

    def _flush_held(self) -> None:
        with self.output:
            for worker in self.workers:
                for to, line in worker.held:
                    print(f"[w{worker.index}] {line}", file=to, flush=True)
                worker.held.clear()

    def _signal_all(self, signum: int) -> None:
        for worker in self.workers:
            if worker.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    worker.process.send_signal(signum)

    def _kill_all(self) -> None:
        """Every worker's group killed and every worker reaped (nothing is left when the parent returns)."""
        for worker in self.workers:
            process = worker.process
            if process is None:
                continue
            _kill_group(process.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
            worker.process = None

    def _signalled(self, signum: int, _frame: Any) -> None:
        self.events.put(("signal", signum))

    def _say(self, to: IO[str], line: str) -> None:
        with self.output:
            print(line, file=to, flush=True)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
