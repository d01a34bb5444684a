"""What ``hermes config show`` and ``get`` may print: the configuration with every secret
replaced. A value is shown as written when it used ``${NAME}`` (the reference, not the secret);
otherwise it is replaced when its key holds a credential (``api_key``, ``token``, ``*_secret``,
any header value) or when it contains a value of ``.env``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._known import holds_secrets, is_secret_key
from ._loader import KeyPath

REDACTED = "<redacted>"
_SHORTEST_SECRET = 4
"""``.env`` values shorter than this (``1``, ``on``) are too common to be told apart from settings."""


def redact(value: Any, references: Mapping[KeyPath, str], dotenv_values: Iterable[str], path: KeyPath = ()) -> Any:
    """``value`` (plain data at ``path``) with its secrets replaced; the input is not changed."""
    secrets = [s for s in dotenv_values if len(s) >= _SHORTEST_SECRET]
    return _redact(value, path, references, secrets)


def _redact(value: Any, path: KeyPath, references: Mapping[KeyPath, str], secrets: list[str]) -> Any:
    if isinstance(value, dict):
        return {key: _redact(item, (*path, str(key)), references, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [_redact(item, (*path, i), references, secrets) for i, item in enumerate(value)]
    if not isinstance(value, str) or not value:
        return value
    if path in references:
        value = references[path]  # as written: ${NAME} instead of what it expands to
        return REDACTED if any(secret in value for secret in secrets) else value
    names = [part for part in path if isinstance(part, str)]
    if names and (is_secret_key(names[-1]) or (len(names) >= 2 and holds_secrets(names[-2]) and path[-1] == names[-1])):
        return REDACTED
    return REDACTED if any(secret in value for secret in secrets) else value
