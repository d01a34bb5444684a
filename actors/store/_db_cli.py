"""``hermes db migrate`` (its parser is in ``actors.cli``): the command line over :func:`~actors.store._migrate.migrate_to_postgres`.

The target is ``--to``, else the URL the home is configured with (``HERMES_DATABASE_URL`` in the
environment or the home's .env, ``database.url`` in config.yaml); the source is ``--from``,
else the home's ``state.db``. Exit 0 when copied, 2 with one line saying what to fix.
"""

from __future__ import annotations

import argparse
import os
import sys

from ._backend import is_database_url
from ._errors import StoreError
from ._location import DATABASE_URL_ENV, store_location


def run_db(args: argparse.Namespace) -> int:
    from actors.config import ConfigError, load_config
    from actors.config._env import hermes_home, read_dotenv

    from ._migrate import migrate_to_postgres

    home = args.home or hermes_home()
    source = args.source or home / "state.db"
    try:
        target = args.target
        if target is None:
            configured = load_config(home).config.database.url if (home / "config.yaml").exists() else ""
            found = store_location(home, {**read_dotenv(home / ".env"), **os.environ}, configured)
            if not isinstance(found, str):
                print(f"hermes db migrate: no Postgres URL; pass --to postgresql://... or set {DATABASE_URL_ENV} / database.url", file=sys.stderr)
                return 2
            target = found
        if not is_database_url(target):
            print(f"hermes db migrate: --to must be a postgresql:// URL, not {target.split('://')[0]!r}", file=sys.stderr)
            return 2
        report = migrate_to_postgres(source, target, progress=lambda line: print(f"hermes db migrate: {line}", flush=True))
    except (StoreError, ConfigError) as exc:
        print(f"hermes db migrate: {exc}", file=sys.stderr)
        return 2
    for line in report.lines():
        print(f"hermes db migrate: {line}", flush=True)
    return 0
