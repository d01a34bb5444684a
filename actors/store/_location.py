"""Where the store lives: ``HERMES_DATABASE_URL``, else ``database.url`` in config.yaml, else
the SQLite file ``state.db`` in ``HERMES_HOME`` (the default, as before).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ._backend import is_database_url
from ._errors import StoreError
from ._pg import redact

DATABASE_URL_ENV = "HERMES_DATABASE_URL"


def store_location(home: Path, env: Mapping[str, str], configured_url: str = "") -> str | Path:
    """The store of ``home``: a Postgres URL (str), or the ``state.db`` file (Path).

    Raises:
        StoreError: the URL set is not a ``postgresql://`` one.
    """
    from_env = env.get(DATABASE_URL_ENV, "").strip()
    url = from_env or configured_url.strip()
    if not url:
        return home / "state.db"
    if not is_database_url(url):
        where = DATABASE_URL_ENV if from_env else "database.url in config.yaml"
        msg = (
            f"{where} is {redact(url)!r}, not a Postgres URL; write postgresql://user:password@host:5432/dbname, "
            f"or unset it to keep the SQLite store in {home / 'state.db'}"
        )
        raise StoreError(msg)
    return url


def store_description(location: str | os.PathLike[str]) -> dict[str, str]:
    """``{"backend": "sqlite" | "postgres", "location": ...}`` (a URL without its password), for health pages."""
    name = os.fspath(location)
    if is_database_url(name):
        return {"backend": "postgres", "location": redact(name)}
    return {"backend": "sqlite", "location": name}
