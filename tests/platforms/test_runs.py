"""Runs: 202 and a status, SSE events resumable with Last-Event-ID, stop, approvals."""

from __future__ import annotations

import json

from actors.chaos import ScriptedCall, TextReply, ToolCallsReply
from tests.platforms.server_kit import SSE, ServerKit


def events_until(stream: SSE, name: str) -> list[dict[str, str]]:
    seen = []
    while True:
        event = stream.next()
        seen.append(event)
        if event.get("event") == name:
            return seen


def test_a_run_is_accepted_streams_its_events_and_reports_its_output(api: ServerKit) -> None:
    api.model.script(
        [ToolCallsReply(calls=(ScriptedCall(name="read_file", arguments='{"path": "x", "seconds": 0.01}'),)), TextReply(content="finished the run")],
        session="run-session",
    )
    with api.http() as http:
        created = http.post("/v1/runs", json={"input": "go", "session_id": "run-session"})
        assert created.status_code == 202
        run_id = created.json()["run_id"]
        with http.stream("GET", f"/v1/runs/{run_id}/events") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            seen = events_until(SSE(response), "run.completed")
        names = [e["event"] for e in seen]
        assert names[:2] == ["tool.started", "tool.completed"] and names[-1] == "run.completed"
        assert json.loads(seen[-1]["data"])["output"] == "finished the run"
        ids = [int(e["id"]) for e in seen]
        assert ids == sorted(ids)
        status = http.get(f"/v1/runs/{run_id}").json()
        assert (status["status"], status["output"]) == ("completed", "finished the run")
        # Reconnecting after the second event replays exactly the rest.
        with http.stream("GET", f"/v1/runs/{run_id}/events", headers={"Last-Event-ID": seen[1]["id"]}) as response:
            rest = events_until(SSE(response), "run.completed")
        assert rest == seen[2:]


def test_stopping_a_run_cancels_it(api: ServerKit) -> None:
    api.model.script([TextReply(content="a b c d e f", stall_after_chunks=2, stall_seconds=30)], session="stop-me")
    with api.http() as http:
        run_id = http.post("/v1/runs", json={"input": "talk", "session_id": "stop-me"}).json()["run_id"]
        with http.stream("GET", f"/v1/runs/{run_id}/events") as response:
            stream = SSE(response)
            events_until(stream, "message.delta")
            assert http.post(f"/v1/runs/{run_id}/stop").json()["stopping"]
            events_until(stream, "run.cancelled")
        assert http.get(f"/v1/runs/{run_id}").json()["status"] == "cancelled"


def test_an_approval_answered_once_runs_the_tool_and_deny_never_does(api: ServerKit) -> None:
    marker = api.store_file.parent / "marker"
    for choice, expected in (("deny", False), ("once", True)):
        session = f"approve-{choice}"
        api.model.script([ToolCallsReply(calls=(ScriptedCall(name="guarded", arguments="{}"),)), TextReply(content="ok")], session=session)
        with api.http() as http:
            run_id = http.post("/v1/runs", json={"input": "do it", "session_id": session}).json()["run_id"]
            with http.stream("GET", f"/v1/runs/{run_id}/events") as response:
                stream = SSE(response)
                request = json.loads(events_until(stream, "approval.request")[-1]["data"])
                assert http.get(f"/v1/runs/{run_id}").json()["status"] == "waiting_for_approval"
                answered = http.post(f"/v1/runs/{run_id}/approval", json={"choice": choice})
                assert answered.status_code == 200 and answered.json()["request_id"] == request["request_id"]
                responded = json.loads(events_until(stream, "approval.responded")[-1]["data"])
                assert responded["choice"] == choice
                events_until(stream, "run.completed")
            late = http.post(f"/v1/runs/{run_id}/approval", json={"choice": "once"})
            assert late.status_code == 409  # a late answer never runs anything
        assert marker.exists() is expected


def test_run_errors_use_the_openai_envelope(api: ServerKit) -> None:
    with api.http() as http:
        assert http.get("/v1/runs/run_nope").status_code == 404
        assert http.post("/v1/runs", json={}).json()["error"]["param"] == "input"
        bad = http.get("/v1/runs/run_nope/events", headers={"Last-Event-ID": "x"})
        assert bad.status_code == 404
