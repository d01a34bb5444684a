"""Hostile requests on every route: a 4xx with the OpenAI error envelope (or the route's normal
answer, when the input is acceptable), never a 5xx, never a traceback in the log.

Hostile bodies: nested past the depth limit, huge (within and past the size limit), a wrong
type in any field, invalid UTF-8, lone surrogate escapes, duplicate keys, NaN and Infinity,
numbers out of range, a top level that is not an object, an empty body. Hostile numbers in
queries and headers: "²" (a digit to ``str.isdigit``), thousands of digits, zero, negatives.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.platforms._asgi import MAX_BODY, MAX_DEPTH, HttpError, decode_body, nests_deeper_than
from actors.platforms._routes import ROUTES
from tests.platforms.server_kit import ServerKit

ENVELOPE = {"message", "type", "param", "code"}
FIELDS = (
    *("messages", "role", "content", "tool_calls", "tool_call_id", "name", "function", "arguments", "id", "type"),
    *("text", "image_url", "url", "input", "call_id", "output", "model", "stream", "stream_options", "include_usage"),
    *("store", "instructions", "previous_response_id", "conversation", "tools", "tool_choice", "response_format"),
    *("json_schema", "schema", "format", "temperature", "top_p", "n", "stop", "seed", "max_tokens", "max_output_tokens"),
    *("max_completion_tokens", "presence_penalty", "logit_bias", "user", "parallel_tool_calls", "reasoning_effort"),
    *("title", "policy", "turn_id", "request_id", "choice", "answer", "session_id", "metadata"),
)
"""Every field name a route reads, at any level."""
WORDS = (
    "",
    " ",
    "\x00",
    "\u2028",
    "a/b",
    "..",
    "true",
    "1",
    "NaN",
    "once",
    "deny",
    "user",
    "tool",
    "function",
    "function_call",
    "message",
    "queue",
    "text",
    "x" * 300,
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**64, max_value=10**400)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(WORDS)
)
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), inner, max_size=3), max_leaves=8
)
MESSAGE = {"role": "user", "content": "hi"}
VALID = {
    "messages": [MESSAGE],
    "input": "hi",
    "title": "hostile",
    "text": "hi",
    "request_id": "req-1",
    "choice": "deny",
    "stream": False,
}
"""One body every body-taking route accepts: a wrong value in one field is then what it answers."""
MARK = "\u2603MARK\u2603"
"""A string a mangled body replaces at the byte level."""

WRONG_TYPE = st.builds(lambda field, value: {**VALID, field: value}, st.sampled_from(FIELDS), VALUES)
WRONG_NESTED = st.one_of(
    st.builds(lambda field, value: {**VALID, "messages": [{**MESSAGE, field: value}]}, st.sampled_from(FIELDS), VALUES),
    st.builds(
        lambda field, value: {**VALID, "messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", field: value}}]}, MESSAGE]},
        st.sampled_from(FIELDS),
        VALUES,
    ),
    st.builds(lambda field, value: {**VALID, "input": [{"type": "message", "role": "user", "content": "hi", field: value}]}, st.sampled_from(FIELDS), VALUES),
    st.builds(
        lambda field, value: {**VALID, "input": [{"type": "function_call_output", "call_id": "c", "output": "x", field: value}]},
        st.sampled_from(FIELDS),
        VALUES,
    ),
    st.builds(
        lambda field, value: {**VALID, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}, field: value}]},
        st.sampled_from(FIELDS),
        VALUES,
    ),
)
# What replaces MARK (with its quotes) in an encoded body.
MANGLES = st.sampled_from(
    [
        b'"\\ud800"',
        b'"a\\udc00b"',
        b'"\\ud800\\u0041"',
        b'"\\udfff\\ud800"',  # lone surrogate escapes
        b'"\xff"',
        b'"\xed\xa0\x80"',
        b'"\xc0\x80"',
        b'"\xf4\x90\x80\x80"',
        b'"\xe2\x82"',  # invalid UTF-8
        b"NaN",
        b"Infinity",
        b"-Infinity",
        b"1e999",
        b"-1e999",
        b"9" * 5000,
        b"1.0e-400",  # not numbers JSON has
        b'"a\x01b"',
        b"'single'",
        b"undefined",
        b'"unterminated',
        b"[1,]",
        b"{,}",  # malformed
    ]
)
MANGLED = st.builds(
    lambda body, bad: msgspec.json.encode(body).replace(msgspec.json.encode(MARK), bad),
    st.builds(lambda field: {**VALID, field: MARK}, st.sampled_from(FIELDS)),
    MANGLES,
)
NESTED_MANGLED = st.builds(
    lambda field, bad: msgspec.json.encode({**VALID, "messages": [{**MESSAGE, field: MARK}]}).replace(msgspec.json.encode(MARK), bad),
    st.sampled_from(FIELDS),
    MANGLES,
)


def _deep(depth: int, kind: str, closed: bool) -> bytes:
    opener, closer = (b"[", b"]") if kind == "array" else (b'{"a":', b"}")
    inner = b"1" if kind == "object" else b""
    return opener * depth + inner + (closer * depth if closed else b"")


DEEP = st.builds(
    lambda field, depth, kind, closed: b'{"' + field.encode() + b'":' + _deep(depth, kind, closed) + (b"}" if closed else b""),
    st.sampled_from(FIELDS),
    st.integers(MAX_DEPTH, 150) | st.integers(150, 120_000),
    st.sampled_from(["array", "object"]),
    st.booleans(),
)
DUPLICATES = st.builds(
    lambda field, first, second: (
        b'{"'
        + field.encode()
        + b'":'
        + msgspec.json.encode(first)
        + b',"'
        + field.encode()
        + b'":'
        + msgspec.json.encode(second)
        + b","
        + msgspec.json.encode(VALID)[1:]
    ),
    st.sampled_from(FIELDS),
    VALUES,
    VALUES,
)
NOT_OBJECTS = st.sampled_from(
    [b"", b" \n", b"null", b"true", b"0", b'"hi"', b"[]", b"[{}]", b"\xef\xbb\xbf{}", b"{}garbage", b"\x00", b"\xff\xfe{\x00}\x00", b"{"]
) | st.builds(msgspec.json.encode, st.lists(VALUES, max_size=3))
HOSTILE = st.one_of(
    st.builds(msgspec.json.encode, WRONG_TYPE),
    st.builds(msgspec.json.encode, WRONG_NESTED),
    MANGLED,
    NESTED_MANGLED,
    DEEP,
    DUPLICATES,
    NOT_OBJECTS,
)


@pytest.fixture
def quiet_log(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fails the test if anything logged an error or a traceback meanwhile (server threads too)."""
    for name in (None, "actors", "supervisor"):  # conftest silences the last two for intentional crashes
        caplog.set_level(logging.WARNING, logger=name)
    yield
    records = caplog.get_records("setup") + caplog.get_records("call")  # caplog.records is this phase's only
    loud = [f"{r.name}: {r.getMessage()}" for r in records if r.levelno >= logging.ERROR or r.exc_info]
    assert loud == []


def _patterns() -> list[str]:
    return [pattern for method, pattern, _ in ROUTES if not (pattern.endswith("/events") or (method == "DELETE" and "{" in pattern))]


def _paths(http: httpx.Client) -> list[tuple[str, str]]:
    """Every route but the event streams, with ids that exist (so a body is what decides)."""
    session_id = http.post("/v1/sessions", json={"title": "target"}).json()["id"]
    run_id = http.post("/v1/runs", json={"input": "hi"}).json()["run_id"]
    response_id = http.post("/v1/responses", json={"input": "hi", "stream": False}).json()["id"]
    ids = {"{session_id}": session_id, "{run_id}": run_id, "{response_id}": response_id}
    out = []
    for method, pattern, _ in ROUTES:
        if pattern.endswith("/events") or (method == "DELETE" and "{" in pattern):
            continue  # streams are tested elsewhere; a delete would remove the targets
        path = pattern
        for name, value in ids.items():
            path = path.replace(name, value)
        out.append((method, path))
    return out


def _check(response: httpx.Response, context: object) -> None:
    assert response.status_code < 500, (context, response.text[:500])
    if response.status_code >= 400:
        error = response.json()["error"]
        assert set(error) == ENVELOPE and isinstance(error["message"], str) and error["message"], (context, error)


def test_hostile_bodies_on_every_route_get_a_4xx_envelope_or_the_normal_answer(api: ServerKit, quiet_log: None) -> None:
    with api.http() as http:
        paths = _paths(http)

        @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)
        @given(route=st.sampled_from(paths), raw=HOSTILE)
        def probe(route: tuple[str, str], raw: bytes) -> None:
            method, path = route
            _check(http.request(method, path, content=raw, headers={"content-type": "application/json"}), (method, path, raw[:200]))

        probe()


WRONG: tuple[Any, ...] = (None, True, 2**70, -1.5, "\x00", "", [[]], {"a": {}})
"""One value of each JSON type that no field wants (or not like this)."""
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
ASSISTANT = {"role": "assistant", "content": None, "tool_calls": [CALL]}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
# Where a wrong value goes: a route, and a body with one hole in it. Each hole takes every key
# its route reads there; the sweep found the 500s the random probe met only now and then.
HOLES: tuple[tuple[str, tuple[str, ...], Any], ...] = (
    ("/v1/chat/completions", FIELDS, lambda k, v: {**VALID, k: v}),
    ("/v1/chat/completions", ("role", "content", "name", "tool_calls", "tool_call_id"), lambda k, v: {**VALID, "messages": [{**MESSAGE, k: v}]}),
    ("/v1/chat/completions", ("tool_calls", "content"), lambda k, v: {**VALID, "messages": [{**ASSISTANT, k: v}, MESSAGE]}),
    ("/v1/chat/completions", ("id", "type", "function"), lambda k, v: {**VALID, "messages": [{**ASSISTANT, "tool_calls": [{**CALL, k: v}]}, MESSAGE]}),
    (
        "/v1/chat/completions",
        ("name", "arguments"),
        lambda k, v: {**VALID, "messages": [{**ASSISTANT, "tool_calls": [{**CALL, "function": {"name": "f", "arguments": "{}", k: v}}]}, MESSAGE]},
    ),
    (
        "/v1/chat/completions",
        ("tool_call_id", "content", "name"),
        lambda k, v: {**VALID, "messages": [ASSISTANT, {"role": "tool", "tool_call_id": "c1", "content": "r", k: v}]},
    ),
    (
        "/v1/chat/completions",
        ("type", "text", "image_url"),
        lambda k, v: {**VALID, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", k: v}]}]},
    ),
    (
        "/v1/chat/completions",
        ("url",),
        lambda k, v: {**VALID, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png", k: v}}]}]},
    ),
    ("/v1/chat/completions", ("type", "function"), lambda k, v: {**VALID, "tools": [{**TOOL, k: v}]}),
    ("/v1/chat/completions", ("name", "parameters", "description"), lambda k, v: {**VALID, "tools": [{**TOOL, "function": {"name": "f", k: v}}]}),
    ("/v1/chat/completions", ("name",), lambda k, v: {**VALID, "tools": [TOOL], "tool_choice": {"type": "function", "function": {k: v}}}),
    ("/v1/chat/completions", ("type", "json_schema"), lambda k, v: {**VALID, "response_format": {"type": "json_object", k: v}}),
    ("/v1/chat/completions", ("include_usage",), lambda k, v: {**VALID, "stream_options": {k: v}}),
    ("/v1/responses", FIELDS, lambda k, v: {**VALID, k: v}),
    ("/v1/responses", ("type", "role", "content"), lambda k, v: {**VALID, "input": [{"type": "message", "role": "user", "content": "hi", k: v}]}),
    (
        "/v1/responses",
        ("type", "text"),
        lambda k, v: {**VALID, "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi", k: v}]}]},
    ),
    (
        "/v1/responses",
        ("call_id", "name", "arguments"),
        lambda k, v: {**VALID, "input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", k: v}, MESSAGE]},
    ),
    ("/v1/responses", ("call_id", "output"), lambda k, v: {**VALID, "input": [{"type": "function_call_output", "call_id": "c", "output": "x", k: v}]}),
    ("/v1/responses", ("type", "name", "parameters"), lambda k, v: {**VALID, "tools": [{"type": "function", "name": "f", k: v}]}),
    ("/v1/responses", ("format",), lambda k, v: {**VALID, "text": {k: v}}),
    ("/v1/responses", ("id",), lambda k, v: {**VALID, "conversation": {k: v}}),
)


def test_a_wrong_value_in_any_field_of_a_chat_or_responses_body_is_a_4xx_or_answered(api: ServerKit, quiet_log: None) -> None:
    with api.http() as http:
        for path, keys, hole in HOLES:
            for key in keys:
                for value in WRONG:
                    body = hole(key, value)
                    answer = http.post(path, content=msgspec.json.encode(body))
                    if answer.status_code == 502 and "response_format" in body:
                        continue  # the test model answers in prose: its answer broke the format, not our door
                    _check(answer, (path, body))


@pytest.mark.parametrize("kind", ["array", "object"])
def test_a_body_nested_past_the_limit_is_a_400_naming_it_and_one_at_the_limit_is_decoded(api: ServerKit, quiet_log: None, kind: str) -> None:
    with api.http() as http:
        for depth in (MAX_DEPTH, MAX_DEPTH + 1, 100_000):
            body = b'{"messages":' + _deep(depth - 1, kind, closed=True) + b"}"
            answer = http.post("/v1/chat/completions", content=body)
            assert answer.status_code == 400, answer.text
            error = answer.json()["error"]
            if depth > MAX_DEPTH:
                assert (error["code"], error["message"]) == (
                    "json_too_deep",
                    f"the JSON body nests deeper than {MAX_DEPTH} levels; no API request needs that many",
                )
            else:
                assert error["param"].startswith("messages")  # decoded; the route then refused the value itself


def _depth(value: Any) -> int:
    """The reference: levels of arrays and objects, counted recursively."""
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


@settings(max_examples=300, database=None, derandomize=True)
@given(value=VALUES, spine=st.integers(0, 3), leaf=st.sampled_from([1, "s", [], {}, {"k": 1}, [1], [[]]]), limit=st.integers(1, 8))
def test_the_depth_check_agrees_with_a_recursive_count(value: Any, spine: int, leaf: Any, limit: int) -> None:
    for _ in range(spine):  # a deep branch beside shallow ones
        value = [value, {"a": leaf}] if spine % 2 else {"a": value, "b": [leaf]}
    decoded = msgspec.json.decode(msgspec.json.encode(value))  # built by the decoder, as a body is
    assert nests_deeper_than(decoded, limit) is (_depth(decoded) > limit)


def test_the_depth_limit_is_exact_for_arrays_and_objects() -> None:
    for kind in ("array", "object"):
        for depth in (MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1):
            raw = b'{"a":' + _deep(depth - 1, kind, closed=True) + b"}"
            if depth > MAX_DEPTH:
                with pytest.raises(HttpError, match=f"nests deeper than {MAX_DEPTH} levels"):
                    decode_body(raw)
            else:
                assert _depth(decode_body(raw)) == depth


@pytest.mark.parametrize("escape", [b"\\ud800", b"\\udc00", b"\\ud800\\u0041", b"\\udbff\\udbff"])
def test_a_lone_surrogate_is_refused_at_the_door_and_never_reaches_the_model_or_the_store(api: ServerKit, quiet_log: None, escape: bytes) -> None:
    with api.http() as http:
        asked = len(api.model.requests)
        answer = http.post(
            "/v1/chat/completions", content=b'{"messages":[{"role":"user","content":"a' + escape + b'b"}]}', headers={"X-Hermes-Session-Id": "surrogate"}
        )
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_json"
        assert "surrogate" in answer.json()["error"]["message"]
        assert len(api.model.requests) == asked
        assert http.get("/v1/sessions/surrogate").status_code == 404
        # A well-formed pair is a character like any other, end to end.
        fine = http.post(
            "/v1/chat/completions", content=b'{"messages":[{"role":"user","content":"a\\ud83d\\ude00b"}]}', headers={"X-Hermes-Session-Id": "pair"}
        )
        assert fine.status_code == 200, fine.text
        assert fine.json()["choices"][0]["message"]["content"] == "echo: a\U0001f600b"
        stored = http.get("/v1/sessions/pair/messages").json()["data"]
        assert [m["content"] for m in stored] == ["a\U0001f600b", "echo: a\U0001f600b"]


BODY_ROUTES = {
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/responses"),
    ("POST", "/v1/sessions"),
    ("PATCH", "/v1/sessions/{session_id}"),
    ("POST", "/v1/runs"),
}
BODY_ROUTES |= (
    {("POST", f"/v1/sessions/{{session_id}}/{name}") for name in ("turns", "cancel", "answer", "compress")}
    | {("POST", "/v1/runs/{run_id}/approval")}
    | {("POST", "/api/jobs"), ("PATCH", "/api/jobs/{job_id}")}
)
"""The routes that read a body (the others answer without reading it)."""


def test_bodies_past_the_size_limit_are_413_on_every_route_and_the_connection_stays_usable(api: ServerKit, quiet_log: None) -> None:
    over = b'{"title":"' + b"x" * MAX_BODY + b'"}'
    with api.http() as http:
        for (method, path), pattern in zip(_paths(http), _patterns(), strict=True):
            answer = http.request(method, path, content=over)
            _check(answer, (method, path))
            assert (answer.status_code == 413) is ((method, pattern) in BODY_ROUTES), (method, path, answer.text)
            assert http.get("/v1/models").status_code == 200
        # Without a Content-Length the limit is found while reading; the rest is read and dropped.
        streamed = http.post("/v1/chat/completions", content=iter([b'{"title":"', *[b"x" * (1024 * 1024)] * 11, b'"}']))
        assert streamed.status_code == 413 and streamed.json()["error"]["code"] == "body_too_large"


def test_huge_values_within_the_size_limit_are_refused_or_answered_never_a_server_error(api: ServerKit, quiet_log: None) -> None:
    near = MAX_BODY - 4096
    everywhere = [{**VALID, "metadata": "x" * near}]
    turns = [
        {**VALID, "messages": [0] * (near // 2)},
        {**VALID, "tools": [{}] * (near // 3)},
        {**VALID, "messages": [{"role": "assistant", "content": "ok"}, MESSAGE] * 5_000 + [MESSAGE]},
    ]
    # Far past any field's own limit; the user's text stays short (the test model echoes it).
    fields = [{**VALID, field: "x" * 65_536} for field in FIELDS if field not in ("input", "text", "content", "messages")]
    with api.http() as http:
        routes = [(method, path) for method, path in _paths(http) if method in ("POST", "PATCH")]
        sent = [(route, body) for route in routes for body in everywhere]
        sent += [(route, body) for route in routes if route[1] in ("/v1/chat/completions", "/v1/responses") for body in turns]
        sent += [(routes[index % len(routes)], body) for index, body in enumerate(fields)]
        for (method, path), body in sent:
            _check(http.request(method, path, content=msgspec.json.encode(body)), (method, path, str(body)[:100]))


def test_numbers_in_queries_and_event_ids_are_clamped_or_a_400_never_a_server_error(api: ServerKit, quiet_log: None) -> None:
    with api.http() as http:
        run_id = http.post("/v1/runs", json={"input": "hi"}).json()["run_id"]
        for path, query in (("/v1/sessions", {}), ("/v1/sessions/search", {"q": "hi"})):
            for bad in ("0", "-1", "\u00b2", "lots", "1.5"):
                refused = http.get(path, params={**query, "limit": bad})
                assert refused.status_code == 400 and refused.json()["error"]["param"] == "limit", (path, bad)
            assert http.get(path, params={**query, "limit": "9" * 5000}).status_code == 200
        assert http.get("/v1/sessions", params={"offset": "9" * 5000}).json()["data"] == []
        for path in ("/v1/sessions/s1/events", f"/v1/runs/{run_id}/events"):
            refused = http.get(path, headers={b"Last-Event-ID": b"\xb2"})  # latin-1 "²"
            assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_last_event_id"
            with http.stream("GET", path, headers={"Last-Event-ID": "9" * 5000}) as far:
                assert far.status_code == 200  # after everything: nothing to replay


def test_surrogate_bytes_in_a_path_or_query_are_replaced_not_a_crash(api: ServerKit, quiet_log: None) -> None:
    with api.http() as http:
        assert http.get("/v1/sessions/%ED%A0%80").status_code == 404
        assert http.get("/v1/sessions/search?q=%ED%A0%80").status_code == 200
        refused = http.post("/v1/chat/completions", json={"messages": [MESSAGE]}, headers={b"X-Hermes-Session-Id": b"\xed\xa0\x80"})
        assert refused.status_code == 400 and refused.json()["error"]["param"] == "X-Hermes-Session-Id"
