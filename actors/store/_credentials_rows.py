"""The SQL of the credential pools' saved state (table ``credential_pools``, schema 5).

One row per provider; each save replaces it in one statement (so it is atomic without a
SAVEPOINT, like the other writes). The state is JSON text the store never reads: the pool
actor encodes and decodes it (``actors.credentials``), and it holds no secret.
"""

from __future__ import annotations

import os

from protocols._base import Message
from protocols._credentials import PoolStateSaved, SavePoolState

from ._backend import Connection, open_store_reader

_UPSERT = (
    "INSERT INTO credential_pools (provider, state, saved_at) VALUES (?, ?, ?) "
    "ON CONFLICT (provider) DO UPDATE SET state = excluded.state, saved_at = excluded.saved_at"
)


def save_pool_state(db: Connection, c: SavePoolState) -> tuple[Message, int]:
    """The writer's half of :class:`SavePoolState`: the reply to tell after the commit."""
    db.execute(_UPSERT, (c.provider, c.state, c.saved_at))
    return PoolStateSaved(provider=c.provider, token=c.token), 0


def select_pool_state(db: Connection, provider: str) -> str | None:
    """The saved state of ``provider``'s pool (JSON text), or None if it never saved."""
    for (state,) in db.execute("SELECT state FROM credential_pools WHERE provider = ?", (provider,)):
        return str(state)
    return None


def read_pool_state(path: str | os.PathLike[str], provider: str) -> str | None:
    """Open ``path`` read-only and return :func:`select_pool_state` (blocking: a worker thread's job).

    Raises:
        StoreError: there is no store at ``path`` yet (the writer creates it).
        SchemaVersionError: the file has another schema version than this build reads.
    """
    db = open_store_reader(os.fspath(path))
    try:
        return select_pool_state(db, provider)
    finally:
        db.close()
