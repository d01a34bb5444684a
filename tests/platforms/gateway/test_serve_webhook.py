"""The webhook adapter through a real ``hermes serve``: a signed POST starts a turn whose
answer is POSTed, signed, to the route's ``deliver_url`` (retried after a 503); a bad
signature is refused with 401 and reaches no agent."""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from actors.chaos import ModelServer
from tests.conftest import DEADLINE
from tests.platforms.serve_process import launched

SECRET = "route-secret-0123"


class Receiver:
    """Where answers are delivered: the first POST gets a 503, the rest 200."""

    def __init__(self) -> None:
        self.posts: list[tuple[int, dict[str, str], bytes]] = []
        self.cond = threading.Condition()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with receiver.cond:
                    status = 503 if not receiver.posts else 200
                    receiver.posts.append((status, {k.lower(): v for k, v in self.headers.items()}, body))
                    receiver.cond.notify_all()
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/hook"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def wait_delivered(self) -> tuple[dict[str, str], bytes]:
        end = time.monotonic() + DEADLINE
        with self.cond:
            while not any(status == 200 for status, _, _ in self.posts):
                left = end - time.monotonic()
                assert left > 0, f"no delivery succeeded: {self.posts}"
                self.cond.wait(left)
            return next((h, b) for status, h, b in self.posts if status == 200)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.http.shutdown()
    server.http.server_close()


def test_a_signed_webhook_is_answered_at_its_deliver_url_and_a_bad_signature_is_refused(tmp_path: Path, receiver: Receiver) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with ModelServer(seed=2) as model:
        (home / "config.yaml").write_text(
            f'model:\n  default: test-model\n  base_url: "{model.base_url}"\n  api_key: unused\n'
            "platforms:\n  webhook:\n    enabled: true\n    extra:\n      port: 0\n      routes:\n"
            f'        ci:\n          secret: {SECRET}\n          prompt: "Build {{build.id}} is {{build.status}}"\n          deliver_url: "{receiver.url}"\n'
        )
        (home / ".env").write_text("API_SERVER_KEY=sk-hermes-webhook-test\n")
        with launched(home) as (process, _):
            assert process.stdout is not None
            line = process.stdout.readline()
            found = re.search(r"webhook adapter started on (http://\S+)/webhooks/", line)
            assert found, line
            url = f"{found.group(1)}/webhooks/ci"
            body = json.dumps({"build": {"id": 7, "status": "failed"}}).encode()
            good = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
            bad = httpx.post(url, content=body, headers={"x-hub-signature-256": "sha256=" + "0" * 64}, timeout=DEADLINE)
            unsigned = httpx.post(url, content=body, timeout=DEADLINE)
            accepted = httpx.post(url, content=body, headers={"x-hub-signature-256": f"sha256={good}", "x-github-delivery": "d-1"}, timeout=DEADLINE)
            headers, delivered = receiver.wait_delivered()
            missing = httpx.post(f"{found.group(1)}/webhooks/nope", content=body, timeout=DEADLINE)
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=DEADLINE)
            assert process.returncode == 0 and "Traceback" not in stderr, stderr
        prompts = [str(r.body["messages"][-1]) for r in model.requests if r.path == "/v1/chat/completions"]
    assert bad.status_code == 401 and bad.json()["error"]["code"] == "bad_signature"
    assert unsigned.status_code == 401 and "not signed" in unsigned.json()["error"]["message"]
    assert accepted.status_code == 202 and accepted.json() == {"status": "accepted", "delivery_id": "d-1"}
    assert missing.status_code == 404
    answer = json.loads(delivered)
    assert answer["text"] == "echo: Build 7 is failed"
    assert answer["delivery_id"] == "d-1" and answer["session_id"] == "agent:main:webhook:route:ci:d-1"
    assert headers["x-webhook-signature"] == hmac.new(SECRET.encode(), delivered, hashlib.sha256).hexdigest()
    assert [status for status, _, _ in receiver.posts] == [503, 200]  # retried after the 503
    assert len(prompts) == 1  # the refused requests reached no agent
