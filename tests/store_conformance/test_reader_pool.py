"""Session loads on a Postgres store borrow kept reader connections (``ReaderPool``).

A real Postgres server. A reader is lent again after its ``with`` block (the same server
process answers); one whose reads raised (its connection ended by the server) is closed and
never lent again; closing the pool closes its idle readers and those still lent when they come
back. A real runtime's sessions load through the pool: many new sessions' loads use a few server
connections, and the runtime's stop leaves none of them open.
"""

from __future__ import annotations

import os
import select
import time

import psycopg
import pytest

from actors.agent import reader_opener
from actors.chaos import ModelServer, TextReply
from actors.store import ReaderPool
from protocols._session import TurnCompleted
from protocols._store import GetStoreStatistics
from tests.agent.session_kit import start_kit, until
from tests.conftest import DEADLINE
from tests.postgres_server import PostgresServer
from tests.store_kit import StartRuntime, start_store

READERS = (
    "SELECT pid FROM pg_stat_activity WHERE application_name = 'hermes-store' AND backend_type = 'client backend'"
    " AND datname = current_database() AND pid <> pg_backend_pid()"
)
"""The store's server processes on this test's own database (other tests share the server)."""


def backend(reader: object) -> int:
    row = reader._conn().execute("SELECT pg_backend_pid()").fetchone()  # type: ignore[attr-defined]
    assert row is not None
    return int(row[0])


def terminate(url: str, pid: int) -> None:
    with psycopg.connect(url, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", (pid,))


def backends(url: str) -> set[int]:
    """The server processes of the store's connections to ``url``'s database."""
    with psycopg.connect(url, autocommit=True) as db:
        return {int(row[0]) for row in db.execute(READERS).fetchall()}


def connections(url: str) -> int:
    return len(backends(url))


def exited(pids: set[int]) -> None:
    """Wait until each server process in ``pids`` has exited. A closed connection's process
    leaves ``pg_stat_activity`` only when it exits, a moment after the client closed it; the
    server runs on this machine, so a pidfd says when (a barrier, not a poll)."""
    fds = []
    for pid in pids:
        try:
            fds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            continue  # gone already
    try:
        deadline = time.monotonic() + DEADLINE
        while fds:
            ready, _, _ = select.select(fds, [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"server processes {sorted(pids)} still run {DEADLINE} s after their connections closed"
            fds = [fd for fd in fds if fd not in ready]
            for fd in ready:
                os.close(fd)
    finally:
        for fd in fds:
            os.close(fd)


def test_a_reader_is_lent_again_unless_its_reads_failed_and_closing_the_pool_closes_them(start_runtime: StartRuntime, postgres: PostgresServer) -> None:
    url = postgres.new_database()
    _, store = start_store(start_runtime, url)
    store.ask(GetStoreStatistics())  # the writer has made the tables
    writer = backends(url)
    pool = reader_opener(url)
    assert isinstance(pool, ReaderPool)
    with pool() as reader:
        first = backend(reader)
    with pytest.raises(Exception, match="connection"), pool() as reader:
        assert backend(reader) == first  # the same server process: no connection opened
        terminate(url, first)  # the server ends it meanwhile
        reader.get_session("s1")
    with pool() as reader:
        second = backend(reader)  # the failed one was closed, not lent again
        assert second != first and reader.get_session("s1") is None
    with pool() as reader:  # a load that met the broken connection and did not raise out of its block
        assert backend(reader) == second
        terminate(url, second)
        with pytest.raises(Exception, match="connection"):
            reader.get_session("s1")
    with pool() as reader:
        second = backend(reader)
        assert reader.get_session("s1") is None
        with pool() as another:  # two loads at once: two connections
            another_pid = backend(another)
            assert another_pid != second
    exited({first})
    assert backends(url) == writer | {second, another_pid}
    with pool() as lent:
        mine = backend(lent)
        pool.close()  # the runtime stops while a load runs
        exited({second, another_pid} - {mine})
        assert backends(url) == writer | {mine}  # the idle one closed at once
        assert lent.get_session("s1") is None  # the lent one still reads
    exited({mine})
    assert backends(url) == writer  # and it is closed when it comes back


def test_a_runtime_s_sessions_load_through_a_few_kept_connections_and_its_stop_closes_them(
    start_runtime: StartRuntime, postgres: PostgresServer, model_server: ModelServer
) -> None:
    url = postgres.new_database()
    kit = start_kit(url, model_server)  # type: ignore[arg-type]
    try:
        for n in range(12):  # one after another: each new session's load borrows the reader the last gave back
            sid = f"s{n}"
            model_server.script([TextReply(content=f"hello {n}")], session=sid)
            probe = kit.subscribe(sid)
            kit.start_turn(sid, "hi")
            assert isinstance(until(probe, TurnCompleted)[-1], TurnCompleted)
        assert 1 <= connections(url) - 1 <= 3  # the writer, and the loads' reader(s): not one per session
        running = backends(url)
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)
    exited(running)
    assert connections(url) == 0
