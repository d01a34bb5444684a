"""``hermes doctor``: check a Hermes home and what it points at, one line a check, each problem
with what to do about it.

Local checks first (the home, ``.env``'s mode, config.yaml and every section the runtime reads,
the sessions' settings, platforms, MCP servers and shell hooks (``_doctor_attached``), the
session store's integrity and schema, free disk, the programs some tools use), then the
network: the model endpoint, and every key of every provider's pool with one cheap call each
(``GET /models``, which costs no tokens). Exit 0 when nothing failed, 1 otherwise; warnings do
not fail. Nothing here writes to the home.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import httpx

Status = Literal["ok", "warn", "fail"]
MIN_FREE_BYTES = 200 * 1024 * 1024
"""Below this much free disk the store and logs may fail to write."""
PROBE_TIMEOUT = httpx.Timeout(5.0, connect=3.0)
MARKS: Mapping[Status, str] = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}


@dataclasses.dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""
    """What to do (empty when nothing is wrong)."""


def render(checks: list[Check]) -> str:
    lines = [f"[{MARKS[c.status]}] {c.name}: {_indented(c.detail)}" + (f"\n       -> {_indented(c.fix)}" if c.fix else "") for c in checks]
    failed = sum(c.status == "fail" for c in checks)
    warned = sum(c.status == "warn" for c in checks)
    lines.append(f"{len(checks)} checks: {failed} failed, {warned} warnings" if failed or warned else f"{len(checks)} checks: all good")
    return "\n".join(lines)


def _indented(text: str) -> str:
    return text.replace("\n", "\n          ")


def diagnose(home: Path, env: Mapping[str, str], *, network: bool = True) -> list[Check]:
    """Every check, in order; a check that cannot run reports why instead of raising."""
    checks = [*_home(home), *_config(home, env), *_attached(home, env, network=network), *_store(home, env), _disk(home), *_programs()]
    if network:
        checks += _endpoints(home, env)
    return checks


def _home(home: Path) -> Iterator[Check]:
    if not home.is_dir():
        yield Check("home", "fail", f"{home} does not exist", f"create it (mkdir -p {home}) and write config.yaml there, or set HERMES_HOME")
        return
    if not os.access(home, os.W_OK):
        yield Check("home", "fail", f"{home} is not writable by this user", f"fix its owner or mode: chmod u+rwx {home}")
    else:
        yield Check("home", "ok", str(home))
    dotenv = home / ".env"
    if dotenv.exists():
        mode = stat.S_IMODE(dotenv.stat().st_mode)
        if mode & 0o077:
            yield Check(".env", "fail", f"{dotenv} is readable by others (mode {mode:o}); it holds API keys", f"chmod 600 {dotenv}")
        else:
            yield Check(".env", "ok", f"mode {mode:o}")


def _config(home: Path, env: Mapping[str, str]) -> Iterator[Check]:
    from actors.agent._approval_settings import load_approval_settings
    from actors.agent._compression_settings import load_compression
    from actors.agent._config import ConfigError, read_config
    from actors.credentials._settings import load_providers

    loaders: list[tuple[str, Callable[[], object]]] = [
        ("config.yaml", lambda: read_config(home)),
        ("model and providers", lambda: load_providers(home, env=env)),
        ("compression", lambda: load_compression(home, "")),
        ("approvals", lambda: load_approval_settings(home, env=env)),
    ]
    for name, load in loaders:
        try:
            load()
        except ConfigError as exc:
            first, _, rest = str(exc).partition("\n")
            yield Check(name, "fail", first, rest or f"edit {home / 'config.yaml'}")
            if name == "config.yaml":
                return  # every later section reads the same file
        else:
            yield Check(name, "ok", "read")
            if name == "config.yaml":
                yield _config_keys(home, env)


def _attached(home: Path, env: Mapping[str, str], *, network: bool) -> Iterator[Check]:
    """The sessions' settings, platforms, MCP servers and hooks (``_doctor_attached``), when config.yaml loads."""
    from actors.config import ConfigError, load_config

    from ._doctor_attached import attached_checks

    try:
        loaded = load_config(home, env)
    except ConfigError:
        return  # reported with the config
    yield from attached_checks(home, env, loaded, network=network)


def _config_keys(home: Path, env: Mapping[str, str]) -> Check:
    """Every key typed and used, or each one that has no effect: unknown (with a did-you-mean) or ignored."""
    from actors.config import ConfigError, load_config

    try:
        loaded = load_config(home, env)
    except ConfigError as exc:
        return Check("config keys", "fail", str(exc), f"edit {home / 'config.yaml'}, or use hermes config set KEY VALUE")
    lines = [line.removeprefix(f"{loaded.file}: ") for line in loaded.warning_lines()]
    if lines:
        return Check(
            "config keys", "warn", "\n".join(lines), "fix typos; ignored keys are Hermes's, without effect here (hermes config show lists what is used)"
        )
    return Check("config keys", "ok", "every key is known and used" if loaded.exists else "no config.yaml: defaults")


def _store(home: Path, env: Mapping[str, str]) -> Iterator[Check]:
    import apsw

    from actors.store._schema import SCHEMA_VERSION, read_version

    postgres = _postgres_store(home, env)
    if postgres is not None:
        yield postgres
        return
    path = home / "state.db"
    if not path.exists():
        yield Check("store", "ok", f"{path} does not exist yet (the first 'hermes serve' or 'hermes chat' makes it)")
        return
    damaged = f"move it away (mv {path} {path}.broken) and restart, or restore a backup"
    try:
        db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error as exc:
        yield Check("store", "fail", f"{path} cannot be opened ({exc})", damaged)
        return
    try:
        db.set_busy_timeout(2_000)
        problems = [str(row[0]) for row in db.execute("PRAGMA quick_check")]
        version = read_version(db)
        hermes = hermes_import_state(db)
    except apsw.Error as exc:
        yield Check("store", "fail", f"{path} is not a readable SQLite database ({exc})", damaged)
        return
    finally:
        db.close()
    if problems == ["ok"] and hermes is not None:
        yield hermes
        if hermes.status == "warn":
            return  # Hermes's own version number says nothing about ours
    if problems != ["ok"]:
        yield Check("store", "fail", f"{path} is damaged: {'; '.join(problems[:3])}", damaged)
    elif version is None:
        yield Check("store", "fail", f"{path} has no schema_version table: it is not a Hermes store", damaged)
    elif version > SCHEMA_VERSION:
        yield Check(
            "store", "fail", f"schema version {version} is newer than this build's {SCHEMA_VERSION}", "upgrade hermes-actors, or use a copy of the file"
        )
    elif version < SCHEMA_VERSION:
        yield Check(
            "store", "warn", f"schema version {version}; this build migrates it to {SCHEMA_VERSION} on the next start", "back it up first if you may go back"
        )
    else:
        yield Check("store", "ok", f"integrity ok, schema version {version}")


def _postgres_store(home: Path, env: Mapping[str, str]) -> Check | None:
    """The check of a Postgres store (HERMES_DATABASE_URL / database.url); None for the SQLite file."""
    from actors.config import ConfigError, load_config
    from actors.config._env import read_dotenv
    from actors.store import StoreError, store_location
    from actors.store._pg_schema import describe_pg_store

    try:
        configured = load_config(home, env).config.database.url
    except ConfigError:
        configured = ""  # reported by the config check
    try:
        location = store_location(home, {**read_dotenv(home / ".env"), **env}, configured)
        if not isinstance(location, str):
            return None
        return Check("store", "ok", describe_pg_store(location))
    except StoreError as exc:
        return Check("store", "fail", str(exc), "start the server, or fix HERMES_DATABASE_URL / database.url (unset: the SQLite store in the home)")


def hermes_import_state(db: Any) -> Check | None:
    """A check line for a store Hermes wrote: not imported yet (warn), or imported (ok), else None."""
    from actors.store._hermes_plan import MARKER_TABLE
    from actors.store._schema import _TABLES
    from actors.store._shape import classify_file

    verdict = classify_file(db, _TABLES)
    if verdict.kind == "hermes":
        return Check(
            "hermes state.db",
            "warn",
            f"written by Hermes ({verdict.signs[0]}), not imported yet",
            "start 'hermes serve' or 'hermes chat' once: it backs the file up (state.db.hermes-backup-<time>) and imports it in place",
        )
    if db.table_exists(None, MARKER_TABLE):
        row = db.execute(f"SELECT hermes_version, sessions, messages, backup FROM {MARKER_TABLE} ORDER BY imported_at DESC LIMIT 1").fetchone()
        if row is not None:
            version, sessions, messages, backup = row
            return Check(
                "hermes state.db", "ok", f"imported from Hermes schema v{version}: {sessions} session(s), {messages} message(s); the original is at {backup}"
            )
    return None


def _disk(home: Path) -> Check:
    where = home if home.exists() else home.parent
    try:
        free = shutil.disk_usage(where).free
    except OSError as exc:
        return Check("disk", "warn", f"free space unknown ({exc})")
    mib = free // (1024 * 1024)
    if free < MIN_FREE_BYTES:
        return Check("disk", "fail", f"{mib} MiB free where {home} lives", "free some space: the store and logs need room to write")
    return Check("disk", "ok", f"{mib:,} MiB free")


def _programs() -> Iterator[Check]:
    for program, used_by, install in (
        ("rg", "search_files then walks the tree in Python, slower on large trees", "apt install ripgrep (or brew install ripgrep)"),
        ("tmux", "Hermes's tmux terminal backend needs it; this build's tools do not use it yet", "apt install tmux (or brew install tmux)"),
    ):
        if shutil.which(program):
            yield Check(program, "ok", "found")
        else:
            yield Check(program, "warn", f"not installed ({used_by})", install)


def _endpoints(home: Path, env: Mapping[str, str]) -> Iterator[Check]:
    from actors.agent._config import ConfigError
    from actors.credentials._settings import load_providers

    try:
        chain = load_providers(home, env=env)
    except ConfigError:
        return  # reported with the config
    with httpx.Client(timeout=PROBE_TIMEOUT) as client:
        for spec in chain.providers:
            for key in spec.keys:
                yield _probe(client, spec.name, spec.base_url, key.api_key, f"{spec.name} key {key.shown}", dict(spec.extra_headers))


def _probe(client: httpx.Client, provider: str, base_url: str, api_key: str, what: str, headers: dict[str, str]) -> Check:
    url = base_url.rstrip("/") + "/models"
    try:
        answer = client.get(url, headers={**headers, "authorization": f"Bearer {api_key}"})
    except httpx.HTTPError as exc:
        return Check(what, "fail", f"{url} does not answer ({type(exc).__name__})", "start the model server, or fix base_url in config.yaml")
    if answer.status_code in (401, 403):
        return Check(what, "fail", f"refused by {provider} ({answer.status_code}): revoked or mistyped", "replace the key in .env, config.yaml or auth.json")
    if answer.status_code == 402:
        return Check(what, "warn", f"{provider} says the account is out of credit (402)", "top up the account, or remove the key from the pool")
    if answer.status_code == 429:
        return Check(what, "warn", f"{provider} rate-limits this key right now (429)", "nothing to do if it passes; else add another key")
    if answer.status_code >= 400:
        return Check(what, "warn", f"{url} answered {answer.status_code}; the endpoint may not list models", "check base_url; chat may still work")
    return Check(what, "ok", f"{url} answers")


def run_doctor(home: Path | None = None, *, env: Mapping[str, str] | None = None, network: bool = True) -> int:
    """Print the checks; 0 when none failed, 1 otherwise."""
    from actors.agent._config import hermes_home

    environ = dict(os.environ if env is None else env)
    home = home or hermes_home(environ)
    checks = diagnose(home, environ, network=network)
    print(render(checks))
    return 1 if any(c.status == "fail" for c in checks) else 0
