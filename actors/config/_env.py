"""Where the home is, what ``.env`` holds, and ``${NAME}`` references: the one implementation
every reader of config.yaml uses (the typed loader, the provider settings, the model settings).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What an environment variable's name may be (``key_env`` values are checked against it)."""
_REFERENCE = re.compile(r"\$\{(" + VARIABLE_NAME.pattern + r")\}")


def hermes_home(env: Mapping[str, str] | None = None) -> Path:
    """``$HERMES_HOME``, else ``~/.hermes``."""
    env = os.environ if env is None else env
    return Path(env.get("HERMES_HOME") or Path.home() / ".hermes")


def read_dotenv(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines (``export`` and quotes allowed, ``#`` comments); missing file: empty."""
    values: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return values
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.removeprefix("export ").split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def has_reference(text: str) -> bool:
    """Whether ``text`` holds a ``${NAME}`` reference."""
    return _REFERENCE.search(text) is not None


def expand_references(text: str, values: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """``text`` with each ``${NAME}`` replaced by ``values[NAME]``, and the names that were empty or
    not set (their references are left as written: the caller decides whether that is an error)."""
    missing: list[str] = []

    def substitute(match: re.Match[str]) -> str:
        found = values.get(match.group(1), "")
        if not found:
            missing.append(match.group(1))
            return match.group(0)
        return found

    return _REFERENCE.sub(substitute, text), tuple(missing)
