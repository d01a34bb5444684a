"""The API's contract: the OpenAPI document, a property-based run, idempotency, limits, drain, CORS."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.chaos import ModelServer, TextReply
from actors.platforms._routes import ROUTES
from tests.conftest import DEADLINE
from tests.platforms.server_kit import ServerKit, start_server

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "messages": st.lists(
            st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant", "tool", "x"]), "content": st.one_of(st.text(max_size=20), JSON)}),
            max_size=3,
        )
        | JSON,
        "input": st.text(max_size=20) | JSON,
        "stream": st.sampled_from([False, "false", "maybe", 3]),
        "choice": st.sampled_from(["once", "deny", "nope"]) | JSON,
        "previous_response_id": st.text(max_size=12),
        "conversation": st.text(max_size=12) | JSON,
        "session_id": st.text(max_size=12) | JSON,
    },
)


def test_the_openapi_document_names_every_route_and_nothing_else(api: ServerKit) -> None:
    with api.http() as http:
        document = http.get("/openapi.json", headers={"Authorization": ""}).json()
    documented = {(method.upper(), path) for path, ops in document["paths"].items() for method in ops}
    assert documented == {(method, pattern) for method, pattern, _ in ROUTES}
    assert document["openapi"].startswith("3.")
    for path, ops in document["paths"].items():
        for op in ops.values():
            assert op["summary"] and "responses" in op
            assert [p["name"] for p in op.get("parameters", [])] == [part[1:-1] for part in path.split("/") if part.startswith("{")]


def test_random_requests_to_every_route_never_get_a_server_error(api: ServerKit) -> None:
    with api.http() as http:

        @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(
            route=st.sampled_from(ROUTES),
            body=FIELDS | JSON,
            ident=st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="/?#%"), min_size=1, max_size=12),
        )
        def probe(route: tuple[str, str, Any], body: Any, ident: str) -> None:
            method, pattern, _ = route
            if pattern.endswith("/events"):
                return  # an unknown run answers 404 at once; a known one streams (tested elsewhere)
            path = pattern.replace("{run_id}", ident).replace("{response_id}", ident)
            if method == "POST" and isinstance(body, dict):
                body = {**body, "stream": False}
            response = http.request(method, path, json=body) if method == "POST" else http.request(method, path)
            assert response.status_code < 500, (method, path, body, response.text)
            if response.status_code >= 400:
                assert set(response.json()["error"]) >= {"message", "type", "code"}

        probe()


def test_an_idempotency_key_returns_the_first_answer_and_shares_one_turn(api: ServerKit) -> None:
    api.model.script([TextReply(content="only once", latency=0.2)], session="idem")
    answers: list[httpx.Response] = []

    def post() -> None:
        with api.http() as http:
            answers.append(
                http.post(
                    "/v1/chat/completions",
                    json={"messages": [{"role": "user", "content": "hi"}]},
                    headers={"Idempotency-Key": "k-1", "X-Hermes-Session-Id": "idem"},
                )
            )

    threads = [threading.Thread(target=post) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert len({a.json()["id"] for a in answers}) == 1
    assert len([r for r in api.model.requests if r.session == "idem"]) == 1
    post()  # a later retry too
    assert answers[-1].json()["id"] == answers[0].json()["id"]


def test_admission_beyond_the_limit_is_429_and_draining_is_503(tmp_path: Path, model_server: ModelServer) -> None:
    kit = start_server(tmp_path, model_server, max_concurrent=1)
    try:
        model_server.script([TextReply(content="slow", latency=30)], session="busy")
        with kit.http() as http:
            run = http.post("/v1/runs", json={"input": "hold", "session_id": "busy"})
            assert run.status_code == 202
            refused = http.post("/v1/runs", json={"input": "more"})
            assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
            http.post(f"/v1/runs/{run.json()['run_id']}/stop")
            kit.runtime.lookup("/platforms/api").tell("drain")
            kit.runtime.lookup("/platforms/api").ask("active", timeout=DEADLINE)
            draining = http.post("/v1/runs", json={"input": "late"})
            assert draining.status_code == 503 and "retry-after" in draining.headers
    finally:
        assert kit.stop()


def test_an_allowed_origin_gets_cors_headers_and_a_preflight(tmp_path: Path, model_server: ModelServer) -> None:
    kit = start_server(tmp_path, model_server, allowed_origins=frozenset({"https://app.example"}))
    try:
        with kit.http() as http:
            ok = http.get("/v1/models", headers={"Origin": "https://app.example"})
            assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == "https://app.example"
            preflight = http.options("/v1/chat/completions", headers={"Origin": "https://app.example", "Authorization": ""})
            assert preflight.status_code == 204 and "authorization" in preflight.headers["access-control-allow-headers"]
            assert http.get("/v1/models", headers={"Origin": "https://other.example"}).status_code == 403
    finally:
        assert kit.stop()
