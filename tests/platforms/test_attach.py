"""Attaching over HTTP: a session's whole event stream, resumable, and commands from a person."""

from __future__ import annotations

import json

from actors.chaos import ScriptedCall, TextReply, ToolCallsReply
from protocols import AnySessionEvent, TurnCompleted, from_json
from tests.platforms.server_kit import SSE, ServerKit


def typed(event: dict[str, str]) -> object:
    return from_json(event["data"], AnySessionEvent)


def test_an_attached_client_sees_a_turn_an_api_client_started_and_resumes_by_sequence(api: ServerKit) -> None:
    api.model.script([TextReply(content="hello from the model")], session="shared")
    with api.http() as http, http.stream("GET", "/v1/sessions/shared/events") as response:
        stream = SSE(response)
        chat = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}, headers={"X-Hermes-Session-Id": "shared"})
        assert chat.status_code == 200
        seen = []
        while not seen or seen[-1]["event"] != "TurnCompleted":
            seen.append(stream.next())
        assert isinstance(typed(seen[-1]), TurnCompleted)
        assert [int(e["id"]) for e in seen] == list(range(1, len(seen) + 1))
        with http.stream("GET", "/v1/sessions/shared/events", headers={"Last-Event-ID": "2"}) as again:
            rest = SSE(again)
            replayed = [rest.next() for _ in range(len(seen) - 2)]
        assert replayed == seen[2:]


def test_turns_cancel_and_answers_can_be_sent_to_a_session(api: ServerKit) -> None:
    api.model.script([ToolCallsReply(calls=(ScriptedCall(name="guarded", arguments="{}"),)), TextReply(content="done")], session="ui")
    with api.http() as http, http.stream("GET", "/v1/sessions/ui/events") as response:
        stream = SSE(response)
        started = http.post("/v1/sessions/ui/turns", json={"text": "do the dangerous thing"})
        assert started.status_code == 202
        event = stream.next()
        while event["event"] != "ApprovalRequested":
            event = stream.next()
        request_id = json.loads(event["data"])["request_id"]
        assert http.post("/v1/sessions/ui/answer", json={"request_id": request_id, "choice": "once"}).status_code == 202
        while event["event"] != "TurnCompleted":
            event = stream.next()
    assert (api.store_file.parent / "marker").read_text() == "ran"
    with api.http() as http:
        assert http.post("/v1/sessions/ui/turns", json={}).json()["error"]["param"] == "text"
        assert http.post("/v1/sessions/ui/answer", json={"request_id": "x", "choice": "maybe"}).status_code == 400
        assert http.post("/v1/sessions/ui/cancel").status_code == 202
