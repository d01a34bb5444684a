"""``hermes serve`` with a pool of three keys and a fallback provider, against two model servers
that fail the way real providers do, key by key (issue 14's acceptance)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from actors.chaos import HttpError, ModelServer, TextReply
from tests.conftest import DEADLINE
from tests.platforms.serve_process import serving

KEYS = {"one": "sk-primary-key-0001", "two": "sk-primary-key-0002", "three": "sk-primary-key-0003"}
BACKUP_KEY = "sk-backup-key-0009"
TURN_DEADLINE = 20.0


def config(primary: ModelServer, backup: ModelServer) -> str:
    return f"""
model:
  default: test-model
  provider: custom:primary
custom_providers:
  - {{name: primary, base_url: "{primary.base_url}", api_key: "${{PRIMARY_KEY_ONE}}"}}
  - {{name: backup, base_url: "{backup.base_url}", api_key: {BACKUP_KEY}, model: backup-model}}
credential_pool:
  custom:primary:
    - {{label: one, key_env: PRIMARY_KEY_ONE}}
    - {{label: two, api_key: {KEYS["two"]}}}
    - {{label: three, api_key: {KEYS["three"]}}}
fallback_providers:
  - {{provider: "custom:backup", model: backup-model}}
timeouts: {{turn: {TURN_DEADLINE:g}}}
"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str, ModelServer, ModelServer]]:
    with ModelServer(seed=1) as primary, ModelServer(seed=2, model="backup-model") as backup:
        home = tmp_path / "home"
        home.mkdir()
        (home / "config.yaml").write_text(config(primary, backup))
        (home / ".env").write_text(f"PRIMARY_KEY_ONE={KEYS['one']}\nAPI_SERVER_KEY=sk-hermes-test-key\n")
        with serving(home) as base:
            yield base, "sk-hermes-test-key", primary, backup


def chat(base: str, key: str, text: str) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    body = {"model": "hermes-agent", "messages": [{"role": "user", "content": text}]}
    headers = {"authorization": f"Bearer {key}", "x-hermes-session-id": "pooled"}
    reply = httpx.post(f"{base}/v1/chat/completions", json=body, headers=headers, timeout=DEADLINE)
    assert reply.status_code == 200, reply.text
    return reply.json(), time.monotonic() - started


def pool(base: str, key: str, provider: str) -> dict[str, dict[str, Any]]:
    body = httpx.get(f"{base}/health/detailed", headers={"authorization": f"Bearer {key}"}, timeout=DEADLINE).json()
    (found,) = [p for p in body["credentials"] if p["provider"] == provider]
    return {k["key_id"]: k for k in found["keys"]}


def test_each_bad_key_is_benched_for_its_own_time_the_fallback_answers_and_the_next_turn_is_back_on_the_primary(
    served: tuple[str, str, ModelServer, ModelServer],
) -> None:
    base, key, primary, backup = served
    primary.fail_key(KEYS["one"], HttpError.rate_limited(seconds=1.0))
    primary.fail_key(KEYS["two"], HttpError.insufficient_credits())
    primary.fail_key(KEYS["three"], HttpError.invalid_api_key(KEYS["three"]))
    backup.script([TextReply(content="from the backup")])

    reply, took = chat(base, key, "hello")
    assert reply["choices"][0]["message"]["content"] == "from the backup"
    assert took < TURN_DEADLINE
    tried = [r.api_key for r in primary.requests if r.path == "/v1/chat/completions"]
    assert tried == [KEYS["one"], KEYS["two"], KEYS["three"]], "each key is tried once, in fill_first order, then the pool has none"
    assert [r.api_key for r in backup.requests] == [BACKUP_KEY]
    assert all(r.body["model"] == "backup-model" for r in backup.requests)

    keys = pool(base, key, "custom:primary")
    now = time.time()
    assert keys["one"]["kind"] == "rate_limit" and 0 < keys["one"]["cooling_until"] - now <= 1.0, keys["one"]
    assert keys["two"]["kind"] == "billing" and 3590 < keys["two"]["cooling_until"] - now <= 3600, keys["two"]
    assert keys["three"]["kind"] == "auth_permanent" and keys["three"]["cooling_until"] - now > 3600, keys["three"]
    assert all(KEYS[name] not in str(k) for name, k in keys.items()), "/health/detailed never shows a secret"
    assert all(k["shown"].endswith(f"(…{KEYS[name][-4:]})") for name, k in keys.items())

    # Once the rate limit has passed, the next turn starts on the primary again, with key one.
    primary.clear_key(KEYS["one"])
    primary.script([TextReply(content="from the primary")], key=KEYS["one"])
    deadline = time.monotonic() + DEADLINE
    while pool(base, key, "custom:primary")["one"]["condition"] != "available":
        assert time.monotonic() < deadline, "key one never came back"
        time.sleep(0.05)
    reply, took = chat(base, key, "again")
    assert reply["choices"][0]["message"]["content"] == "from the primary"
    assert took < TURN_DEADLINE
    assert len(backup.requests) == 1, "the backup was not called again"


def test_a_rate_limit_longer_than_the_turn_deadline_falls_back_at_once_and_without_a_fallback_fails_saying_when(
    served: tuple[str, str, ModelServer, ModelServer],
) -> None:
    base, key, primary, backup = served
    for secret in KEYS.values():
        primary.fail_key(secret, HttpError.rate_limited(seconds=600, spelling="openai"))
    backup.fail_key(BACKUP_KEY, HttpError.rate_limited(seconds=600, spelling="anthropic"))
    started = time.monotonic()
    body = {"model": "hermes-agent", "messages": [{"role": "user", "content": "hello"}]}
    reply = httpx.post(f"{base}/v1/chat/completions", json=body, headers={"authorization": f"Bearer {key}", "x-hermes-session-id": "limited"}, timeout=DEADLINE)
    assert time.monotonic() - started < TURN_DEADLINE
    assert reply.status_code >= 400, reply.text
    error = reply.json()["error"]["message"]
    assert "rate limit" in error.lower() and "back in" in error and "deadline" in error, error
    keys = pool(base, key, "custom:primary")
    assert all(590 < k["cooling_until"] - time.time() <= 600 for k in keys.values()), keys
