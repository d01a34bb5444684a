"""The session store: one writer actor per SQLite file, read-only readers, full-text search.

- :class:`StoreWriter` — the supervised actor that owns the file and writes it with group
  commit; its commands and replies are in ``protocols._store``.
- :class:`StoreReader` — a read-only connection for one thread: sessions, transcripts,
  FTS5 search.
- :func:`fts5_query` — any user text to a safe FTS5 query.
- :func:`settle_interrupted` — at a runtime's start, before the writer: fail the turns a
  stopped process left running and give their unanswered tool calls a result.
- :func:`import_hermes_store` — at a runtime's start, with the store claimed: a ``state.db``
  Hermes wrote (recognised by its shape) is backed up and converted in place
  (:class:`ImportReport`, :class:`HermesImportError`).
- :func:`search_facts` / :class:`FactHit` — the ``store`` memory provider's facts ranked by
  bm25 on a reader's connection (written by the writer's ``SaveFact`` / ``DeleteFact``).
- :func:`store_location` — where the store lives: ``HERMES_DATABASE_URL``, ``database.url``, else
  ``state.db`` in HERMES_HOME. A ``postgresql://`` URL anywhere a store path is taken (writer,
  readers, settle, jobs, pools) selects the Postgres backend (``_backend``, ``_pg``).
- :func:`open_writer` / :func:`open_reader` — the schema (Hermes's ``state.db`` layout),
  for tools and benchmarks that need a raw connection.

Imports nothing from ``actors.agent``, ``actors.tools``, ``actors.platforms`` or
``actors.memory``.
"""

from ._backend import is_database_url as is_database_url
from ._errors import SchemaVersionError as SchemaVersionError
from ._errors import StoreConnectionBroken as StoreConnectionBroken
from ._errors import StoreError as StoreError
from ._facts_rows import FactHit as FactHit
from ._facts_rows import count_facts as count_facts
from ._facts_rows import search_facts as search_facts
from ._hermes_import import HermesImportError as HermesImportError
from ._hermes_import import ImportReport as ImportReport
from ._hermes_import import import_hermes_store as import_hermes_store
from ._location import DATABASE_URL_ENV as DATABASE_URL_ENV
from ._location import store_description as store_description
from ._location import store_location as store_location
from ._reader import StoreReader as StoreReader
from ._reader_pool import ReaderPool as ReaderPool
from ._schema import SCHEMA_VERSION as SCHEMA_VERSION
from ._schema import open_reader as open_reader
from ._schema import open_writer as open_writer
from ._search import fts5_query as fts5_query
from ._settle import SettleReport as SettleReport
from ._settle import settle_interrupted as settle_interrupted
from ._writer import DEFAULT_BATCH_CAP as DEFAULT_BATCH_CAP
from ._writer import STORE_PATH as STORE_PATH
from ._writer import StoreWriter as StoreWriter
from ._writer import store_address as store_address

__all__ = [
    "DATABASE_URL_ENV",
    "DEFAULT_BATCH_CAP",
    "FactHit",
    "HermesImportError",
    "ImportReport",
    "ReaderPool",
    "SCHEMA_VERSION",
    "STORE_PATH",
    "SchemaVersionError",
    "SettleReport",
    "StoreConnectionBroken",
    "StoreError",
    "StoreReader",
    "StoreWriter",
    "count_facts",
    "fts5_query",
    "import_hermes_store",
    "is_database_url",
    "open_reader",
    "open_writer",
    "search_facts",
    "settle_interrupted",
    "store_address",
    "store_description",
    "store_location",
]
