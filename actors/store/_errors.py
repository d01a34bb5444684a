"""Errors of the session store.

HermesError (actors)
└── StoreError              the store could not do what was asked
    ├── SchemaVersionError    the file's schema version is not the one this build reads
    └── StoreConnectionBroken the writer's connection failed; the writer crashes and restarts

RunAlone (not a HermesError: it never leaves the writer) is a grouped write's way of saying
that its commands are to be undone and written one by one.
"""

from __future__ import annotations

import apsw

from .._errors import ExternalFailure, HermesError


class StoreError(HermesError):
    """The session store could not do what was asked; the message says why and what to do."""


class SchemaVersionError(StoreError):
    """The database file has a schema version this build neither reads nor migrates."""


class StoreConnectionBroken(StoreError, ExternalFailure):
    """The writer's connection is unusable (I/O error, corruption, closed); restart needed."""


class RunAlone(Exception):
    """Writes sent together where one failed a check: undo them all, and write each alone."""


BROKEN = (
    apsw.IOError,
    apsw.CorruptError,
    apsw.NotADBError,
    apsw.CantOpenError,
    apsw.ConnectionClosedError,
    apsw.CursorClosedError,
    apsw.ReadOnlyError,
    apsw.InternalError,
    apsw.MisuseError,
    apsw.ProtocolError,
    apsw.NoMemError,
)
"""Errors after which the writer's connection is unusable (it breaks, and restarts)."""


def describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
