"""The API key: checked in constant time; made for a newcomer on first start."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from actors import HermesError

PLACEHOLDERS = frozenset({"changeme", "change-me", "your-api-key", "your_api_key", "secret", "password", "test", "apikey", "api-key"})
MIN_LENGTH = 16
ENV_NAME = "API_SERVER_KEY"


class KeyError_(HermesError):
    """The configured API key cannot be used; the message says what to do."""


def check_key(key: str) -> None:
    if len(key) < MIN_LENGTH:
        msg = f"{ENV_NAME} is {len(key)} characters; use at least {MIN_LENGTH} (delete it to have one generated)"
        raise KeyError_(msg)
    if key.lower() in PLACEHOLDERS or len(set(key)) < 4:
        msg = f"{ENV_NAME} looks like a placeholder; set a real secret (delete it to have one generated)"
        raise KeyError_(msg)


def load_or_create_key(home: Path, env: dict[str, str]) -> tuple[str, bool]:
    """Return ``(key, created)``: from the environment or ``HERMES_HOME/.env``, else a new one saved there."""
    from actors.agent._config import read_dotenv

    key = env.get(ENV_NAME) or read_dotenv(home / ".env").get(ENV_NAME)
    if key:
        check_key(key)
        return key, False
    key = "hk-" + secrets.token_urlsafe(32)
    home.mkdir(parents=True, exist_ok=True)
    path = home / ".env"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a") as f:
        f.write(f"{ENV_NAME}={key}\n")
    os.chmod(path, 0o600)
    return key, True


def authorized(header: str | None, key: str) -> bool:
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[7:].strip().encode(), key.encode())
