"""Waiting on a test cluster's store without polling it: Postgres LISTEN / NOTIFY.

The nodes tell the test nothing; their shared store does. :class:`StoreWatch` installs, in the
test's database, a statement trigger on each watched table that notifies the channel
``hermes_test_watch`` with the table's name when a transaction that changed it commits, and
one thread that LISTENs and blocks reading the notifications (psycopg's ``notifies``). A test
waiting for a condition of the cluster checks it, then checks again after each commit to a
watched table, until its deadline (:meth:`StoreWatch.wait` in a thread, :meth:`StoreWatch.until`
in trio).

Some conditions ripen with time alone, with no commit: a stopped node's heartbeat becoming
older than the lease ttl. Their check returns the seconds of the store's clock until they may
hold (an instant read from the rows: the last heartbeat + the ttl), and the waiter wakes then
too. The watch also keeps the nodes table (each node's last heartbeat, on the store's clock)
as of its last commit, so a client can ask where its session may be served without a query
(:meth:`StoreWatch.retry_in`, the cluster's own ``locate``).

Only the test's database is touched: the triggers notify and change nothing the nodes read.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TypeVar

import psycopg
import trio

from actors.agent._locate import Forward, Local, TakeOver, Unavailable, locate
from protocols._leases import LeaseRecord, NodeRecord
from tests.conftest import DEADLINE

CHANNEL = "hermes_test_watch"
STOP = "stop"
Check = Callable[[psycopg.Connection], bool | float]
"""A condition read from the store: True (it holds), False (wait for a commit) or the seconds
until it may hold with no commit (wait for a commit or that long)."""
T = TypeVar("T")


class StoreWatch:
    """Commits to ``tables`` of the store at ``url``, as they happen (see the module)."""

    def __init__(self, url: str, tables: Iterable[str]) -> None:
        self.url = url
        self.tables = tuple(tables)
        self.nodes: dict[str, NodeRecord] = {}
        """The nodes table at the last commit to it."""
        self.offset = 0.0
        """The store's clock minus this process's ``time.time()``, at the last read of the nodes."""
        self._changes = 0
        self._changes_of: dict[str, int] = {}
        """Commits to each watched table (``_changes`` counts them all)."""
        self._lock = threading.RLock()
        self._condition = threading.Condition(self._lock)
        self._table_conditions: dict[str, threading.Condition] = {}
        """A condition per table waited for alone (on the same lock): a commit to another table wakes none of its waiters."""
        self._trio_token: trio.lowlevel.TrioToken | None = None
        self._trio_events: dict[str, trio.Event] = {}
        self._listening = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="store-watch", daemon=True)
        self._ask_lock = threading.Lock()
        self._ask_db: psycopg.Connection | None = None

    def __enter__(self) -> StoreWatch:
        with psycopg.connect(self.url, autocommit=True) as db:
            db.execute(
                "CREATE OR REPLACE FUNCTION hermes_test_watch() RETURNS trigger LANGUAGE plpgsql AS"
                f" $$ BEGIN PERFORM pg_notify('{CHANNEL}', TG_TABLE_NAME); RETURN NULL; END $$"
            )
            for table in self.tables:
                db.execute(
                    f"CREATE OR REPLACE TRIGGER hermes_test_watch AFTER INSERT OR UPDATE OR DELETE ON {table} FOR EACH STATEMENT EXECUTE FUNCTION hermes_test_watch()"
                )
        self._ask_db = psycopg.connect(self.url, autocommit=True)
        self._thread.start()
        if not self._listening.wait(DEADLINE):
            raise AssertionError(f"the store watch did not LISTEN within {DEADLINE} s")
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        with contextlib.suppress(psycopg.Error), psycopg.connect(self.url, autocommit=True, connect_timeout=5) as db:
            db.execute(f"SELECT pg_notify('{CHANNEL}', '{STOP}')")
        self._thread.join(DEADLINE)
        if self._ask_db is not None:
            self._ask_db.close()

    def attach_trio(self) -> None:
        """Wake trio waiters (:meth:`until`) too; call from the trio run that waits."""
        self._trio_token = trio.lowlevel.current_trio_token()

    def _listen(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as listener, psycopg.connect(self.url, autocommit=True) as reader:
            listener.execute(f"LISTEN {CHANNEL}")
            self._read_nodes(reader)
            self._listening.set()
            for note in listener.notifies():  # blocks until a commit notifies; ends at STOP
                if note.payload == STOP:
                    return
                if note.payload == "nodes":
                    self._read_nodes(reader)
                with self._condition:
                    self._changes += 1
                    self._changes_of[note.payload] = self._changes_of.get(note.payload, 0) + 1
                    self._condition.notify_all()
                    if note.payload in self._table_conditions:
                        self._table_conditions[note.payload].notify_all()
                if self._trio_token is not None:
                    with contextlib.suppress(trio.RunFinishedError):
                        self._trio_token.run_sync_soon(self._wake_trio, note.payload)

    def _read_nodes(self, db: psycopg.Connection) -> None:
        with contextlib.suppress(psycopg.errors.UndefinedTable):
            rows = db.execute("SELECT node_id, address, heartbeat_at, extract(epoch FROM clock_timestamp()) FROM nodes").fetchall()
            self.nodes = {str(r[0]): NodeRecord(node_id=str(r[0]), address=str(r[1]), heartbeat_at=float(r[2])) for r in rows}
            if rows:
                self.offset = float(rows[0][3]) - time.time()

    def _wake_trio(self, table: str) -> None:
        for name in (table, ""):
            event = self._trio_events.pop(name, None)
            if event is not None:
                event.set()

    def _event(self, table: str = "") -> trio.Event:
        """Set at the next commit to ``table`` ("": to any watched table)."""
        return self._trio_events.setdefault(table, trio.Event())

    def ask(self, read: Callable[[psycopg.Connection], T]) -> T:
        """``read`` on the watch's query connection (one thread at a time)."""
        assert self._ask_db is not None, "the watch is not entered"
        with self._ask_lock:
            return read(self._ask_db)

    def wait(self, check: Check, what: str, deadline: float = DEADLINE) -> None:
        """Block until ``check`` holds (see the module).

        Raises:
            AssertionError: not within ``deadline`` seconds.
        """
        end = time.monotonic() + deadline
        while True:
            with self._condition:
                seen = self._changes
            got = self.ask(check)
            if got is True:
                return
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{what}: not within {deadline} s")
            self._wait_past(seen, left if got is False else min(left, max(0.0, float(got))))

    async def until(self, check: Check, what: str, deadline: float, late: list[str]) -> None:
        """Return once ``check`` holds, or after ``deadline`` s noted in ``late`` (the run goes on)."""
        with trio.move_on_after(deadline):
            while True:
                changed = self._event()
                got = await trio.to_thread.run_sync(self.ask, check)
                if got is True:
                    return
                with trio.move_on_after(math.inf if got is False else max(0.0, float(got))):
                    await changed.wait()
        late.append(f"{what}: not within {deadline} s")

    def retry_in(self, lease: LeaseRecord | None, ttl: float) -> float:
        """Seconds until a request for the session of ``lease`` may be served, by the cluster's
        own routing (``locate``) over the nodes as of their last heartbeat: 0 when it may be
        now (no lease, a lapsed one, a dead holder); while another node holds it live (a
        forward, which was refused), until that lease ends or its holder's heartbeat is a ttl
        old, whichever comes first (a caller bounds it by the server's Retry-After)."""
        now = time.time() + self.offset
        match locate(lease, self.nodes, "the test's client", now, ttl):
            case Local() | TakeOver():
                return 0.0
            case Unavailable(retry_after=after):
                return max(0.0, after)
            case Forward(node_id=owner):
                holder = self.nodes[owner]
                return max(0.0, min(holder.heartbeat_at + ttl, lease.expires_at if lease is not None else math.inf) - now)
        return 0.0

    async def changed(self, table: str = "") -> None:
        """Return at the next commit to ``table`` ("": to any watched table)."""
        await self._event(table).wait()

    def wait_change(self, timeout: float, table: str = "") -> None:
        """Block until the next commit to ``table`` ("": to any watched table), at most ``timeout`` s."""
        if not table:
            with self._condition:
                seen = self._changes
            self._wait_past(seen, timeout)
            return
        with self._condition:
            condition = self._table_conditions.setdefault(table, threading.Condition(self._lock))
            seen = self._changes_of.get(table, 0)
            condition.wait_for(lambda: self._changes_of.get(table, 0) != seen, timeout)

    def _wait_past(self, seen: int, timeout: float) -> None:
        with self._condition:
            self._condition.wait_for(lambda: self._changes != seen, timeout)


def read_lease_row(db: psycopg.Connection, session: str) -> LeaseRecord | None:
    """The session's lease as stored (None: never leased)."""
    row = db.execute("SELECT node_id, epoch, expires_at FROM leases WHERE session_id = %s", (session,)).fetchone()
    if row is None or not row[0]:
        return None
    return LeaseRecord(session_id=session, node_id=str(row[0]), epoch=int(row[1]), expires_at=float(row[2]))


async def wait_to_retry(watch: StoreWatch, session: str, ttl: float, bound: float, *, again: bool) -> bool:
    """After a refusal with ``Retry-After: bound``: wait until the session may be served (the
    instant its holder's lease ends or its heartbeat is a ttl old, :meth:`StoreWatch.retry_in`),
    at most ``bound`` s. With ``again`` (the last wait returned at once and the retry was
    refused anyway: the refusal was not about the owner) it first waits for the next heartbeat
    stored. True: it waited."""
    began = trio.current_time()
    with trio.move_on_after(bound):
        lease = await trio.to_thread.run_sync(watch.ask, lambda db: read_lease_row(db, session))
        if again:
            await watch.changed("nodes")
        while (left := watch.retry_in(lease, ttl)) > 0:
            with trio.move_on_after(left):
                await watch.changed("nodes")
    return trio.current_time() > began + 0.001


def wait_to_retry_blocking(watch: StoreWatch, session: str, ttl: float, bound: float, *, again: bool) -> bool:
    """:func:`wait_to_retry` for a thread."""
    began = time.monotonic()
    end = began + bound
    lease = watch.ask(lambda db: read_lease_row(db, session))
    if again:
        watch.wait_change(max(0.0, end - time.monotonic()), "nodes")
    while (left := watch.retry_in(lease, ttl)) > 0 and (rest := end - time.monotonic()) > 0:
        watch.wait_change(min(left, rest), "nodes")  # only a heartbeat moves ``retry_in``: not woken by every commit of a message
    return time.monotonic() > began + 0.001
