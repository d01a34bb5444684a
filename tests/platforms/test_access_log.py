"""The access log: one structured line per request on ``hermes.access``."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pytest

from actors.chaos import TextReply
from tests.conftest import Probe
from tests.platforms.server_kit import ServerKit


class _ToProbe(logging.Handler):
    def __init__(self, probe: Probe) -> None:
        super().__init__()
        self.probe = probe

    def emit(self, record: logging.LogRecord) -> None:
        self.probe.put(record)


@pytest.fixture
def access() -> Iterator[Probe]:
    """The access log's records, as they are logged (from the server's thread)."""
    probe = Probe()
    logger = logging.getLogger("hermes.access")
    handler = _ToProbe(probe)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield probe
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)


def test_each_request_logs_one_line_with_its_id_route_status_duration_session_and_bytes(api: ServerKit, access: Probe) -> None:
    api.model.script([TextReply(content="hello there")], session="logged")
    with api.http() as http:
        answer = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}, headers={"X-Hermes-Session-Id": "logged"})
    assert answer.status_code == 200
    record = access.get_matching(lambda r: r.access["route"] == "/v1/chat/completions")
    fields = record.access
    assert fields["request_id"] == answer.headers["x-request-id"] and fields["request_id"].startswith("req_")
    assert (fields["method"], fields["status"], fields["session"]) == ("POST", 200, "logged")
    assert fields["bytes_out"] == len(answer.content) and fields["bytes_in"] == len(answer.request.content)
    assert fields["duration_ms"] >= 0
    line = record.getMessage()
    assert re.fullmatch(
        rf"request_id={fields['request_id']} method=POST route=/v1/chat/completions status=200 duration_ms=[0-9.]+ session=logged bytes_in=\d+ bytes_out=\d+",
        line,
    ), line


def test_route_templates_not_paths_are_logged_and_a_clients_request_id_is_kept(api: ServerKit, access: Probe) -> None:
    with api.http() as http:
        missing = http.get("/v1/sessions/some%20one", headers={"X-Request-Id": "client-42"})
        unknown = http.get("/v1/nowhere")
    assert missing.status_code == 404 and missing.headers["x-request-id"] == "client-42"
    first = access.get_matching(lambda r: r.access["request_id"] == "client-42")
    assert (first.access["route"], first.access["status"], first.access["session"]) == ("/v1/sessions/{session_id}", 404, "some one")
    assert 'session="some one"' in first.getMessage()  # a value with a space is quoted
    second = access.get_matching(lambda r: r.access["request_id"] == unknown.headers["x-request-id"])
    assert (second.access["route"], second.access["status"], second.access["session"]) == ("-", 404, None)
    assert "route=- status=404" in second.getMessage() and "session=-" in second.getMessage()
