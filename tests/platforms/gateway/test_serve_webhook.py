"""The webhook adapter through a real ``hermes serve``: a signed POST starts a turn whose
answer is POSTed, signed, to the route's ``deliver_url`` (retried after a 503); a bad
signature is refused with 401 and reaches no agent. A turn's dangerous command is approved
(or denied) by a signed decision POSTed back; a long answer comes once, in numbered pieces."""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import json
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
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

    def delivered(self) -> list[dict[str, Any]]:
        """The bodies of the POSTs answered 200, in order (with their signature header as ``_signature``)."""
        return [json.loads(b) | {"_signature": h.get("x-webhook-signature")} for status, h, b in self.posts if status == 200]

    def wait_for(self, found: Callable[[list[dict[str, Any]]], list[dict[str, Any]]], count: int) -> list[dict[str, Any]]:
        """The first ``count`` of ``found(delivered bodies)``, once there are that many."""
        end = time.monotonic() + DEADLINE
        with self.cond:
            while len(found(self.delivered())) < count:
                left = end - time.monotonic()
                assert left > 0, f"not delivered: {self.delivered()}"
                self.cond.wait(left)
            return found(self.delivered())[:count]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.http.shutdown()
    server.http.server_close()


def _write_home(home: Path, model: ModelServer, receiver: Receiver, route: str, *, prompt: str, more: str = "", top: str = "") -> None:
    """config.yaml with one webhook route (``more``: its extra lines) and ``top`` lines; .env with an API key."""
    (home / "config.yaml").write_text(
        f'model:\n  default: test-model\n  base_url: "{model.base_url}"\n  api_key: unused\n{top}'
        "platforms:\n  webhook:\n    enabled: true\n    extra:\n      port: 0\n      routes:\n"
        f'        {route}:\n          secret: {SECRET}\n          prompt: "{prompt}"\n          deliver_url: "{receiver.url}"\n{more}'
    )
    (home / ".env").write_text("API_SERVER_KEY=sk-hermes-secret-value\n")


def _base(process: Any) -> str:
    """The receiver's base URL, from serve's first line."""
    line = process.stdout.readline()
    found = re.search(r"webhook adapter started on (http://\S+)/webhooks/", line)
    assert found, line
    return found.group(1)


def test_a_signed_webhook_is_answered_at_its_deliver_url_and_a_bad_signature_is_refused(tmp_path: Path, receiver: Receiver) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with ModelServer(seed=2) as model:
        _write_home(home, model, receiver, "ci", prompt="Build {build.id} is {build.status}")
        with launched(home) as (process, _):
            base = _base(process)
            url = f"{base}/webhooks/ci"
            body = json.dumps({"build": {"id": 7, "status": "failed"}}).encode()
            good = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
            bad = httpx.post(url, content=body, headers={"x-hub-signature-256": "sha256=" + "0" * 64}, timeout=DEADLINE)
            unsigned = httpx.post(url, content=body, timeout=DEADLINE)
            accepted = httpx.post(url, content=body, headers={"x-hub-signature-256": f"sha256={good}", "x-github-delivery": "d-1"}, timeout=DEADLINE)
            headers, delivered = receiver.wait_delivered()
            missing = httpx.post(f"{base}/webhooks/nope", content=body, timeout=DEADLINE)
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


def _signed(url: str, payload: dict[str, Any], **headers: str) -> httpx.Response:
    body = json.dumps(payload).encode()
    signature = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return httpx.post(url, content=body, headers={"x-webhook-signature": signature} | headers, timeout=DEADLINE)


def _of(kind: str, delivery: str) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    return lambda posts: [p for p in posts if p["type"] == kind and p["delivery_id"] == delivery]


def test_a_dangerous_command_is_approved_or_denied_by_a_signed_decision_and_the_answer_comes_once_in_pieces(tmp_path: Path, receiver: Receiver) -> None:
    home = tmp_path / "home"
    (home / "work").mkdir(parents=True)
    (home / "keep").mkdir()
    steps = "\n".join(f"rm -rf work/part-{i}" for i in range(10))
    answer = f"**Cleaned** the `work` folder:\n\n```sh\n{steps}\n```\n\nNothing else was touched."
    remove = [ScriptedCall(name="terminal", arguments=json.dumps({"command": f"rm -rf {home / name}"})) for name in ("work", "keep")]
    with ModelServer(seed=2) as model:
        model.script([ToolCallsReply(calls=(remove[0],)), TextReply(content=answer), ToolCallsReply(calls=(remove[1],)), TextReply(content="I left it alone.")])
        _write_home(home, model, receiver, "ops", prompt="{task}", more="          max_chars: 120\n")
        with launched(home) as (process, _):
            base = _base(process)
            started = _signed(f"{base}/webhooks/ops", {"task": "clean the work folder"}, **{"x-webhook-id": "d-1"})
            (ask,) = receiver.wait_for(_of("approval", "d-1"), 1)  # its first POST got a 503: retried
            decide = f"{base}{ask['decision_path']}"
            approve = {"decision": "approve", "request_id": ask["request_id"]}
            forged = httpx.post(decide, json=approve, headers={"x-webhook-signature": "0" * 64}, timeout=DEADLINE)
            stale = _signed(f"{base}/webhooks/ops/approvals/call_gone:9", {"decision": "approve", "request_id": "call_gone:9"})
            vague = _signed(decide, {"decision": "maybe", "request_id": ask["request_id"]})
            unbound = _signed(decide, {"decision": "approve", "request_id": "call_other:1"})  # a signed body of another request
            approved = _signed(decide, approve)
            again = _signed(decide, approve)
            first = receiver.wait_for(_of("answer", "d-1"), 1)[0]
            pieces = receiver.wait_for(_of("answer", "d-1"), first["parts"])
            _signed(f"{base}/webhooks/ops", {"task": "clean the keep folder"}, **{"x-webhook-id": "d-2"})
            (ask2,) = receiver.wait_for(_of("approval", "d-2"), 1)
            denied = _signed(f"{base}{ask2['decision_path']}", {"decision": "deny", "request_id": ask2["request_id"]})
            (refused,) = receiver.wait_for(_of("answer", "d-2"), 1)
            after = _signed(decide, approve)  # its turn ended: stale
            document = httpx.get(f"{base}/openapi.json", timeout=DEADLINE)  # unsigned: the document is public
            health = httpx.get(f"{base}/health", timeout=DEADLINE)
            undocumented = [
                httpx.request(m, f"{base}{p}", timeout=DEADLINE).status_code
                for m, p in (("POST", "/v1/chat/completions"), ("GET", "/webhooks/ops"), ("POST", "/openapi.json"))
            ]
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=DEADLINE)
            assert process.returncode == 0 and "Traceback" not in stderr, stderr
    assert started.status_code == 202
    assert ask["command"] == f"rm -rf {home / 'work'}" and ask["reasons"] and ask["session_id"] == "agent:main:webhook:route:ops:d-1"
    assert ask["decision_path"] == f"/webhooks/ops/approvals/{ask['request_id']}"
    assert forged.status_code == 401 and forged.json()["error"]["code"] == "bad_signature"
    assert stale.status_code == 404 and stale.json()["error"]["code"] == "no_pending_approval"
    assert vague.status_code == 400 and "'decision' must be one of" in vague.json()["error"]["message"]
    assert unbound.status_code == 400 and "request_id" in unbound.json()["error"]["message"]
    assert approved.status_code == 202 and approved.json() == {"status": "accepted", "request_id": ask["request_id"], "choice": "once"}
    assert again.status_code == 404 and after.status_code == 404  # answered once; then its turn ended
    assert not (home / "work").exists()  # the approved command ran
    assert (home / "keep").exists() and denied.status_code == 202 and refused["text"] == "I left it alone."
    total = len(pieces)
    assert total > 1 and [p["part"] for p in pieces] == list(range(1, total + 1)) and {p["parts"] for p in pieces} == {total}
    for i, piece in enumerate(pieces, 1):  # the model's Markdown as it was, cut at 120 characters, fences closed in each piece
        assert len(piece["text"]) <= 120 and piece["text"].endswith(f"({i}/{total})") and piece["text"].count("```") % 2 == 0, piece
    assert pieces[0]["text"].startswith("**Cleaned** the `work` folder:")
    joined = "\n".join(p["text"] for p in pieces)
    assert [line for line in joined.splitlines() if line.startswith("rm -rf")] == steps.splitlines()
    sent = receiver.delivered()
    assert len(_of("answer", "d-1")(sent)) == total and len(_of("answer", "d-2")(sent)) == 1  # exactly once, after the process ended
    assert len(_of("approval", "d-1")(sent)) == 1
    ids = [h["x-webhook-id"] for status, h, _ in receiver.posts if status == 200]
    assert len(ids) == len(set(ids)) and f"d-1:approval:{ask['request_id']}" in ids and f"d-1-{total}" in ids  # distinct: a receiver may dedup by them
    assert all(h["x-webhook-signature"] == hmac.new(SECRET.encode(), b, hashlib.sha256).hexdigest() for _, h, b in receiver.posts)
    assert receiver.posts[0][0] == 503
    # what the receiver sent and answered is what its OpenAPI document says
    assert document.status_code == 200
    paths, outbound = document.json()["paths"], document.json()["webhooks"]
    assert paths["/webhooks/{route}"]["post"]["parameters"][0]["schema"]["enum"] == ["ops"]
    for body in sent:
        schema = outbound[body["type"]]["post"]["requestBody"]["content"]["application/json"]["schema"]
        jsonschema.validate({k: v for k, v in body.items() if k != "_signature"}, schema)
    decided = paths["/webhooks/{route}/approvals/{request_id}"]["post"]
    jsonschema.validate(approve, decided["requestBody"]["content"]["application/json"]["schema"])
    for response in (forged, stale, vague, unbound, approved, again):
        assert str(response.status_code) in decided["responses"]
        jsonschema.validate(
            response.json(),
            decided["responses"][str(response.status_code)]["content"]["application/json"]["schema"] | {"components": document.json()["components"]},
        )
    assert str(started.status_code) in paths["/webhooks/{route}"]["post"]["responses"]
    assert health.status_code == 200 and "200" in paths["/health"]["get"]["responses"]
    assert undocumented == [404, 405, 404]  # what the document does not name is not answered


def test_an_answers_media_files_ride_base64_in_its_post_and_a_secret_or_a_path_never_does(tmp_path: Path, receiver: Receiver) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / "report.csv").write_bytes(b"day,total\nmon,3\n")
    (work / "sneaky.txt").symlink_to(home / ".env")  # a link in the workspace to the home's secrets
    answer = f"Here is the report.\nMEDIA:report.csv\nMEDIA:/etc/passwd\nMEDIA:{work / 'sneaky.txt'}"
    with ModelServer(seed=2) as model:
        model.script([TextReply(content=answer)])
        _write_home(home, model, receiver, "ci", prompt="{task}", top=f'terminal:\n  cwd: "{work}"\n')
        with launched(home) as (process, _):
            base = _base(process)
            accepted = _signed(f"{base}/webhooks/ci", {"task": "send the report"}, **{"x-webhook-id": "d-9"})
            (body,) = receiver.wait_for(_of("answer", "d-9"), 1)
            document = httpx.get(f"{base}/openapi.json", timeout=DEADLINE).json()
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=DEADLINE)
            assert process.returncode == 0 and "Traceback" not in stderr, stderr
    assert accepted.status_code == 202
    assert body["text"] == (
        "Here is the report.\n\n"
        "passwd was not attached: only files in the workspace or the Hermes cache can be sent\n\n"
        ".env was not attached: only files in the workspace or the Hermes cache can be sent"
    )
    assert body["attachments"] == [
        {"name": "report.csv", "kind": "document", "mime": "text/csv", "size": 16, "data_base64": base64.b64encode(b"day,total\nmon,3\n").decode()}
    ]
    jsonschema.validate(
        {k: v for k, v in body.items() if k != "_signature"}, document["webhooks"]["answer"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    )
    raw = b"".join(b for _, _, b in receiver.posts)
    assert b"secret-value" not in raw and b"MEDIA:" not in raw and str(work).encode() not in raw


async def test_a_scheduled_answers_media_files_ride_base64_in_its_post_and_a_secret_never_does(tmp_path: Path, receiver: Receiver) -> None:
    from actors.platforms.gateway._scheduled import webhook_sender
    from actors.platforms.gateway._webhook import Route
    from actors.scheduler._delivery import DeliveryFailed

    home, work = tmp_path / "home", tmp_path / "work"
    (home / "cache").mkdir(parents=True)
    work.mkdir()
    (home / ".env").write_text("API_SERVER_KEY=sk-hermes-secret-value\n")
    (home / "cache" / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    send = webhook_sender({"ci": Route(name="ci", secret=SECRET, deliver_url=receiver.url)}, workspace=work, home=home)
    media = (str(home / "cache" / "chart.png"), str(home / ".env"))
    with pytest.raises(DeliveryFailed) as refused:  # the receiver's first answer is a 503: the scheduler retries
        await send("ci", "", "The report", media)
    assert refused.value.retry
    await send("ci", "", "Again", ())
    (status, headers, raw) = receiver.posts[1]
    body = json.loads(raw)
    assert status == 200 and headers["x-webhook-signature"] == hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()
    assert receiver.posts[0][0] == 503 and json.loads(receiver.posts[0][2])["attachments"][0]["name"] == "chart.png"
    assert body["text"] == "Again" and "attachments" not in body
    first = json.loads(receiver.posts[0][2])
    assert first["text"] == "The report\n\n.env was not attached: only files in the workspace or the Hermes cache can be sent"
    assert first["attachments"] == [
        {"name": "chart.png", "kind": "photo", "mime": "image/png", "size": 8, "data_base64": base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()}
    ]
    assert all(b"secret-value" not in b for _, _, b in receiver.posts)
