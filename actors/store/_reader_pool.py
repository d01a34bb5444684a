"""Readers kept between the session loads of one runtime, for a Postgres store.

A Postgres connection is a server process: opening one (fork, authentication, the layout check)
cost 8.7 ms of wall time and 1.8 ms of this process's CPU per load here, where the load's three
reads cost 0.7 ms, and a node taking 200 sessions over opens 200 of them at once. A
:class:`ReaderPool` lends a kept :class:`StoreReader` for the length of a ``with`` and takes it
back; one whose reads raised, or whose connection psycopg found broken, is closed, not kept (a
connection the server ended is not lent again); at most ``keep`` wait idle. :meth:`ReaderPool.close` (the runtime's stop) closes them.

A SQLite file keeps opening a reader per load (``reader_opener``): opening a file is cheap, and a
kept reader would be one more connection that may pin the write-ahead log.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from ._reader import StoreReader

KEEP = 8
"""Idle readers kept at most (more are opened while more loads run at once, and closed after)."""


class ReaderPool:
    """Lends kept read-only connections to ``location`` (a Postgres URL); thread-safe."""

    def __init__(self, location: str, *, keep: int = KEEP) -> None:
        self.location = location
        self._keep = keep
        self._idle: list[StoreReader] = []
        self._lock = threading.Lock()
        self._closed = False
        self.opened = 0
        """Readers opened so far (the others were lent again)."""

    @contextlib.contextmanager
    def __call__(self) -> Iterator[StoreReader]:
        """A reader for the ``with`` block (kept, or opened now: ``StoreError`` when the store cannot be reached)."""
        with self._lock:
            reader = self._idle.pop() if self._idle else None
        if reader is None:
            reader = StoreReader(self.location)
            with self._lock:
                self.opened += 1
        try:
            yield reader
        except BaseException:
            reader.close()
            raise
        with self._lock:
            if not self._closed and len(self._idle) < self._keep and not reader.broken:
                self._idle.append(reader)
                return
        reader.close()

    def close(self) -> None:
        """Close the idle readers; those lent now are closed when they come back (idempotent)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for reader in idle:
            reader.close()

    async def aclose(self) -> None:
        """:meth:`close`, for ``Reactor.at_stop``."""
        self.close()
