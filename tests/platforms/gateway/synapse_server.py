"""A real Synapse homeserver (``matrix-synapse`` from PyPI) for the Matrix tests: loopback, a
free port, SQLite, open registration, no federation, rate limits raised; started once per test
session in its own process group and reaped at the end. :class:`MatrixUser` is a small client
for the human side (register, rooms, send, react, wait for the bot's messages by ``/sync``)."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from tests.conftest import DEADLINE

START_DEADLINE = 60.0
"""Seconds Synapse may take to say it listens (its start is ~2.5 s on an idle machine)."""
SERVER_NAME = "hermes.test"
_LOOSE = {"per_second": 10_000, "burst_count": 10_000}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(root: Path, port: int, shared_secret: str) -> str:
    import yaml  # synapse's own dependency (PyYAML)

    config = {
        "server_name": SERVER_NAME,
        "pid_file": str(root / "homeserver.pid"),
        "listeners": [
            {
                "port": port,
                "bind_addresses": ["127.0.0.1"],
                "type": "http",
                "tls": False,
                "x_forwarded": False,
                "resources": [{"names": ["client"], "compress": False}],
            }
        ],
        "database": {"name": "sqlite3", "args": {"database": str(root / "homeserver.db")}},
        "media_store_path": str(root / "media"),
        "signing_key_path": str(root / "signing.key"),
        "registration_shared_secret": shared_secret,
        "macaroon_secret_key": secrets.token_hex(16),
        "form_secret": secrets.token_hex(16),
        "report_stats": False,
        "enable_registration": True,
        "enable_registration_without_verification": True,
        "trusted_key_servers": [],
        "suppress_key_server_warning": True,
        "federation_domain_whitelist": [],
        "presence": {"enabled": False},
        "url_preview_enabled": False,
        "rc_message": _LOOSE,
        "rc_registration": _LOOSE,
        "rc_login": {"address": _LOOSE, "account": _LOOSE, "failed_attempts": _LOOSE},
        "rc_joins": {"local": _LOOSE, "remote": _LOOSE},
        "rc_invites": {"per_room": _LOOSE, "per_user": _LOOSE, "per_issuer": _LOOSE},
        "rc_3pid_validation": _LOOSE,
    }
    return yaml.safe_dump(config)


def _signing_key(path: Path) -> None:
    from signedjson.key import generate_signing_key, write_signing_keys  # synapse's own dependency

    with path.open("w") as f:
        write_signing_keys(f, [generate_signing_key("a_test")])


class Synapse:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self._drain = threading.Thread()
        self.shared_secret = secrets.token_hex(16)
        self._admin: MatrixUser | None = None

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "homeserver.yaml").write_text(_config(self.root, self.port, self.shared_secret))
        _signing_key(self.root / "signing.key")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "synapse.app.homeserver", "-c", str(self.root / "homeserver.yaml")],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=self.root,
            start_new_session=True,
        )
        ready = threading.Event()
        self._drain = threading.Thread(target=self._copy_log, args=(self.process, ready), daemon=True)
        self._drain.start()
        if not ready.wait(START_DEADLINE):
            raise RuntimeError(f"synapse did not start listening within {START_DEADLINE:g} s:\n{self._log_tail()}")
        if self.process.poll() is not None:
            raise RuntimeError(f"synapse exited with {self.process.returncode}:\n{self._log_tail()}")

    def _copy_log(self, process: subprocess.Popen[bytes], ready: threading.Event) -> None:
        """Synapse's output into ``synapse.log``; ``ready`` once it listens (or its output ends)."""
        assert process.stdout is not None
        with (self.root / "synapse.log").open("wb") as log:
            for line in process.stdout:
                log.write(line)
                log.flush()
                if b"Synapse now listening on TCP port" in line:
                    ready.set()
        ready.set()

    def _log_tail(self) -> str:
        return (self.root / "synapse.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=DEADLINE)
        if self.process is not None:
            self._drain.join(timeout=DEADLINE)
            if self.process.stdout is not None:
                self.process.stdout.close()

    def register(self, name: str) -> MatrixUser:
        """A new user on this server (open registration, the dummy flow)."""
        answer = httpx.post(
            f"{self.base_url}/_matrix/client/v3/register",
            json={"username": name, "password": secrets.token_hex(8), "auth": {"type": "m.login.dummy"}, "inhibit_login": False},
            timeout=DEADLINE,
        )
        answer.raise_for_status()
        data = answer.json()
        return MatrixUser(self.base_url, data["user_id"], data["access_token"])

    def admin(self) -> MatrixUser:
        """An admin user, registered once through the shared-secret admin API."""
        if self._admin is None:
            url = f"{self.base_url}/_synapse/admin/v1/register"
            nonce = httpx.get(url, timeout=DEADLINE).json()["nonce"]
            name, password = f"admin{secrets.token_hex(4)}", secrets.token_hex(8)
            mac = hmac.new(self.shared_secret.encode(), b"\0".join([nonce.encode(), name.encode(), password.encode(), b"admin"]), hashlib.sha1).hexdigest()
            answer = httpx.post(url, json={"nonce": nonce, "username": name, "password": password, "admin": True, "mac": mac}, timeout=DEADLINE)
            answer.raise_for_status()
            self._admin = MatrixUser(self.base_url, answer.json()["user_id"], answer.json()["access_token"])
        return self._admin

    def limit_messages(self, user: MatrixUser, *, per_second: float, burst: int) -> None:
        """The homeserver's own message rate limit for ``user`` (429 ``M_LIMIT_EXCEEDED`` past it)."""
        answer = httpx.post(
            f"{self.base_url}/_synapse/admin/v1/users/{quote(user.user_id)}/override_ratelimit",
            json={"messages_per_second": per_second, "burst_count": burst},
            headers={"authorization": f"Bearer {self.admin().token}"},
            timeout=DEADLINE,
        )
        answer.raise_for_status()


@contextlib.contextmanager
def running_synapse(root: Path) -> Iterator[Synapse]:
    server = Synapse(root)
    try:
        server.start()
        yield server
    finally:
        server.stop()


class MatrixUser:
    def __init__(self, base_url: str, user_id: str, token: str) -> None:
        self.base_url = base_url
        self.user_id = user_id
        self.token = token
        self.since = ""
        self.events: list[dict[str, Any]] = []
        """Every room event this user's syncs saw, in order (each with its ``room_id``)."""
        self._txn = 0

    def call(self, method: str, path: str, body: Any = None, **params: str) -> Any:
        answer = httpx.request(
            method,
            f"{self.base_url}/_matrix/client/v3{path}",
            json=body,
            params=params,
            headers={"authorization": f"Bearer {self.token}"},
            timeout=DEADLINE + 5,
        )
        assert answer.status_code == 200, answer.text
        return answer.json()

    def create_room(self, invite: list[str], *, direct: bool) -> str:
        body = {"invite": invite, "is_direct": direct, "preset": "private_chat"}
        return str(self.call("POST", "/createRoom", body)["room_id"])

    def join(self, room_id: str) -> None:
        self.call("POST", f"/join/{quote(room_id)}", {})

    def send(self, room_id: str, text: str, **extra: Any) -> str:
        self._txn += 1
        content = {"msgtype": "m.text", "body": text} | extra
        return str(self.call("PUT", f"/rooms/{quote(room_id)}/send/m.room.message/t{self._txn}-{time.time_ns()}", content)["event_id"])

    def send_file(self, room_id: str, name: str, data: bytes, mime: str, *, image: bool, caption: str = "") -> str:
        """Upload ``data`` to the media repository, then post it as an ``m.image`` / ``m.file``
        (the caption as body and ``filename`` for the name, Matrix 1.10's form, when there is one)."""
        uploaded = httpx.post(
            f"{self.base_url}/_matrix/media/v3/upload",
            params={"filename": name},
            content=data,
            headers={"authorization": f"Bearer {self.token}", "content-type": mime},
            timeout=DEADLINE,
        )
        assert uploaded.status_code == 200, uploaded.text
        info = {"mimetype": mime, "size": len(data)}
        naming = {"body": caption, "filename": name} if caption else {"body": name}
        return self.send(room_id, "", msgtype="m.image" if image else "m.file", url=uploaded.json()["content_uri"], info=info, **naming)

    def download(self, mxc: str) -> bytes:
        """The bytes behind an ``mxc://`` URL (authenticated media, this user's token)."""
        server, _, media_id = mxc.removeprefix("mxc://").partition("/")
        answer = httpx.get(
            f"{self.base_url}/_matrix/client/v1/media/download/{quote(server)}/{quote(media_id)}",
            headers={"authorization": f"Bearer {self.token}"},
            timeout=DEADLINE,
        )
        assert answer.status_code == 200, answer.text
        return answer.content

    def react(self, room_id: str, event_id: str, key: str) -> str:
        self._txn += 1
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
        return str(self.call("PUT", f"/rooms/{quote(room_id)}/send/m.reaction/r{self._txn}-{time.time_ns()}", content)["event_id"])

    def sync_once(self, timeout_ms: int = 1000) -> str:
        params = {"timeout": str(timeout_ms)} | ({"since": self.since} if self.since else {})
        data = self.call("GET", "/sync", **params)
        for room_id, room in (data.get("rooms", {}).get("join") or {}).items():
            for event in room.get("timeline", {}).get("events", []):
                self.events.append({**event, "room_id": room_id})
        self.since = str(data["next_batch"])
        return self.since

    def from_user(self, room_id: str, sender: str, kind: str = "m.room.message") -> list[dict[str, Any]]:
        return [e for e in self.events if e["room_id"] == room_id and e["sender"] == sender and e["type"] == kind]

    def wait_messages(self, room_id: str, sender: str, count: int, deadline: float = DEADLINE * 3) -> list[dict[str, Any]]:
        """The first ``count`` messages ``sender`` posted in ``room_id``, waiting by long-poll syncs."""
        end = time.monotonic() + deadline
        while len(found := self.from_user(room_id, sender)) < count:
            assert time.monotonic() < end, f"only {len(found)} of {count} messages from {sender}: {[e['content'].get('body') for e in found]}"
            self.sync_once()
        return found[:count]

    def wait_joined(self, room_id: str, user_id: str, deadline: float = DEADLINE * 3) -> None:
        end = time.monotonic() + deadline
        while True:
            members = self.call("GET", f"/rooms/{quote(room_id)}/joined_members")["joined"]
            if user_id in members:
                return
            assert time.monotonic() < end, f"{user_id} did not join {room_id}"
            self.sync_once(500)  # a barrier: returns when the room changes (or after 0.5 s)
