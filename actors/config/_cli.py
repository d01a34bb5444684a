"""``hermes config path|show|get|set``: where the files are, the effective configuration (file
values over this build's defaults, secrets redacted), one value, and a change that is validated
before it is written. Exit status: 0 done, 1 refused (unknown key, invalid value), 2 the file as
it stands cannot be read.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import msgspec
import yaml

from ._edit import EditRefused, edited_text, parse_value, split_key, write_atomically
from ._env import has_reference, hermes_home, read_dotenv
from ._errors import ConfigError
from ._known import HERMES_ROOT_KEYS, HERMES_SECTION_KEYS, is_secret_key
from ._loader import KeyPath, LoadedConfig, dotted, load_config, parse_config
from ._redact import redact
from ._schema import HermesConfig
from ._types import bare, is_struct, struct_fields, takes_text, type_at

EXIT_OK, EXIT_REFUSED, EXIT_UNREADABLE = 0, 1, 2


def run_config(action: str, *, home: Path | None = None, key: str = "", value: str = "", env: Mapping[str, str] | None = None) -> int:
    environ = os.environ if env is None else env
    home = home or hermes_home(environ)
    if action == "path":
        print(home / "config.yaml")
        print(home / ".env")
        return EXIT_OK
    if action == "set":
        return _set(home, key, value, environ)
    try:
        loaded = load_config(home, environ)
    except ConfigError as exc:
        print(f"hermes config: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    _print_warnings(loaded, sys.stderr)
    secrets = read_dotenv(loaded.dotenv).values()
    effective = redact(msgspec.to_builtins(loaded.config), loaded.references, secrets)
    if action == "show":
        source = str(loaded.file) if loaded.exists else f"{loaded.file} (missing: all defaults)"
        print(f"# effective configuration: {source} over this build's defaults; secrets redacted")
        print(_yaml(effective), end="")
        return EXIT_OK
    return _get(loaded, effective, key, secrets)


def _get(loaded: LoadedConfig, effective: dict[str, Any], key: str, secrets: Any) -> int:
    try:
        parts = split_key(key)
    except EditRefused as exc:
        print(f"hermes config get: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    found, path, missing_at = _find(effective, parts)
    if missing_at is None:
        print(_scalar(found))
        return EXIT_OK
    in_file, file_path, lacking = _find(redact(loaded.data, loaded.references, secrets), parts)
    if lacking is None:  # a key the file has that this build does not apply (a Hermes key, say)
        print(_scalar(in_file))
        print(f"hermes config get: {dotted(file_path)} is in {loaded.file} but not used by this build", file=sys.stderr)
        return EXIT_OK
    where = dotted(path) or "the top level"
    candidates = _candidates(path, found)
    close = difflib.get_close_matches(str(missing_at), candidates, n=1, cutoff=0.6)
    hint = f"; did you mean {dotted((*path, close[0]))!r}?" if close else (f"; known here: {', '.join(sorted(candidates)[:12])}" if candidates else "")
    print(f"hermes config get: {key!r}: {where} has no key {str(missing_at)!r}{hint}", file=sys.stderr)
    return EXIT_REFUSED


def _find(data: Any, parts: list[str | int]) -> tuple[Any, KeyPath, str | int | None]:
    """(value, path walked, None) when found; else (the last container, its path, the part it lacks)."""
    node: Any = data
    path: KeyPath = ()
    i = 0
    while i < len(parts):
        part = parts[i]
        if isinstance(node, list) and isinstance(part, int) and part < len(node):
            node, path, i = node[part], (*path, part), i + 1
            continue
        if isinstance(node, dict):
            taken = next((n for n in range(len(parts) - i, 0, -1) if ".".join(map(str, parts[i : i + n])) in node), 0)
            if taken:
                name = ".".join(map(str, parts[i : i + taken]))
                node, path, i = node[name], (*path, name), i + taken
                continue
        return node, path, part
    return node, path, None


def _candidates(path: KeyPath, container: Any) -> list[str]:
    """The keys known at ``path``: what the container has, the schema's fields there, Hermes's keys there."""
    names = [str(k) for k in container] if isinstance(container, dict) else []
    tp = bare(type_at(list(path), HermesConfig)) if path else HermesConfig
    if is_struct(tp):
        names += list(struct_fields(tp))
        names += HERMES_ROOT_KEYS if not path else HERMES_SECTION_KEYS.get(tp.__name__, frozenset())
    return sorted(set(names))


def _set(home: Path, key: str, text: str, env: Mapping[str, str]) -> int:
    file, dotenv = home / "config.yaml", home / ".env"
    if not home.is_dir():
        print(f"hermes config set: {home} does not exist; create it (mkdir -p {home}) or set HERMES_HOME", file=sys.stderr)
        return EXIT_REFUSED
    try:
        old = file.read_text(encoding="utf-8") if file.exists() else None
    except (OSError, UnicodeDecodeError) as exc:
        print(f"hermes config set: {file} cannot be read ({exc})", file=sys.stderr)
        return EXIT_UNREADABLE
    dotenv_values = read_dotenv(dotenv)

    def parse(source: str | None) -> LoadedConfig:
        return parse_config(source, file=file, dotenv=dotenv, env=env, dotenv_values=dotenv_values)

    try:
        before = {(w.kind, w.path) for w in parse(old).warnings}
    except ConfigError:
        before = set()  # the file is invalid now; the new text must be valid all the same
    try:
        parts = split_key(key)
        tp = type_at(parts, HermesConfig)
        new = edited_text(old, key, parse_value(text, tp is not None and takes_text(tp, text)))
        after = parse(new)
    except ConfigError as exc:
        print(f"hermes config set: refused, {file} is unchanged: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    added = [w for w in after.warnings if (w.kind, w.path) not in before]
    target = dotted(tuple(parts))
    unknown = [w for w in after.warnings if w.kind == "unknown" and (target == w.path or target.startswith((w.path + ".", w.path + "[")))]
    if unknown:
        hint = f" (did you mean {unknown[0].suggestion!r}?)" if unknown[0].suggestion else ""
        print(f"hermes config set: refused, {file} is unchanged: {unknown[0].path!r} is not a known key{hint}", file=sys.stderr)
        return EXIT_REFUSED
    write_atomically(file, new)
    name = str(parts[-1])
    if is_secret_key(name) and not has_reference(text):
        print(
            f"hermes config set: warning: {key} now holds a secret in {file}; better: put it in {dotenv} (NAME=...) and write {key}: ${{NAME}}",
            file=sys.stderr,
        )
    for warning in added:
        print(f"hermes config set: note: {warning.path} is not supported by this build and is ignored", file=sys.stderr)
    print(f"{key} set in {file}")
    return EXIT_OK


def _print_warnings(loaded: LoadedConfig, out: TextIO) -> None:
    for line in loaded.warning_lines():
        print(f"hermes config: {line}", file=out)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict | list):
        return _yaml(value).rstrip("\n")
    return str(value)


def _yaml(value: Any) -> str:
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False, width=4096)
