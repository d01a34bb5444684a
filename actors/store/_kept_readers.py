"""Readers of a Postgres store kept between uses (a session's load).

A Postgres connection is a server process: opening one (with the schema check) cost about
18 ms here against 2 ms for a load's three queries on a kept one, and 200 sessions taken over
at once opened 200. :class:`KeptReaders` lends a kept :class:`StoreReader` to each use (a
thread at a time) and takes it back after, keeping at most ``KEPT`` idle ones (a Postgres
server's connections are counted: a default one takes 100); one whose use failed is closed.
They are closed when the ``KeptReaders`` is collected. A SQLite file is opened per use as before.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator

from ._reader import StoreReader

KEPT = 8
"""Idle readers kept at most per store."""


def _close_all(idle: list[StoreReader]) -> None:
    for reader in idle:
        reader.close()
    idle.clear()


class KeptReaders:
    """``SessionDeps.open_reader`` for a Postgres URL: ``with readers() as reader: ...``."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._idle: list[StoreReader] = []
        self._lock = threading.Lock()
        weakref.finalize(self, _close_all, self._idle)

    @contextlib.contextmanager
    def __call__(self) -> Iterator[StoreReader]:
        with self._lock:
            reader = self._idle.pop() if self._idle else None
        if reader is None:
            reader = StoreReader(self.location)
        try:
            yield reader
        except BaseException:
            reader.close()  # a broken connection is not kept
            raise
        with self._lock:
            if len(self._idle) < KEPT:
                self._idle.append(reader)
                return
        reader.close()
