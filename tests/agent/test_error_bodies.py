"""Reading providers' error bodies (``actors/agent/_retry.read_error_body``, ``_wire.error_details``).

The bodies are written as each provider documents them (see ``test_classify.py``'s docstring).
"""

import json
from typing import Any

import pytest
import trio

from actors.agent import ModelClients
from actors.agent._retry import classify, read_error_body
from actors.agent._wire import error_details
from tests.agent.http1_kit import Peer, ask, failure_of, response, tiny_server


def body(payload: Any) -> bytes:
    return json.dumps(payload).encode()


def test_the_openai_shape_gives_message_code_type_and_the_parameter() -> None:
    read = read_error_body(
        body({"error": {"message": "Invalid value for 'n': must be >= 1.", "type": "invalid_request_error", "param": "n", "code": "invalid_value"}})
    )
    assert (read.detail, read.code, read.type) == ("Invalid value for 'n': must be >= 1.", "invalid_value", "invalid_request_error")
    named = read_error_body(
        body(
            {
                "error": {
                    "message": "We could not parse the JSON body of your request.",
                    "type": "invalid_request_error",
                    "param": "tools[0].function",
                    "code": None,
                }
            }
        )
    )
    assert named.detail == "We could not parse the JSON body of your request. (param: tools[0].function)"
    assert named.code is None


def test_the_anthropic_shape_gives_its_type() -> None:
    read = read_error_body(
        body({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"})
    )
    assert (read.detail, read.code, read.type) == ("Overloaded", None, "overloaded_error")


def test_vllm_llama_cpp_and_ollama_shapes_are_read() -> None:
    vllm = read_error_body(body({"object": "error", "message": "The model `qwen` does not exist.", "type": "NotFoundError", "param": None, "code": 404}))
    assert (vllm.detail, vllm.code, vllm.type) == ("The model `qwen` does not exist.", "404", "NotFoundError")
    old_vllm = read_error_body(body({"message": "Loading", "type": "ServiceUnavailableError"}))
    assert (old_vllm.detail, old_vllm.type) == ("Loading", "ServiceUnavailableError")
    llama = read_error_body(
        body(
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 5000,
                    "n_ctx": 4096,
                }
            }
        )
    )
    assert (llama.code, llama.type) == ("400", "exceed_context_size_error")
    ollama = read_error_body(body({"error": 'model "llama3.3:70b" not found, try pulling it first'}))
    assert (ollama.detail, ollama.code, ollama.type) == ('model "llama3.3:70b" not found, try pulling it first', None, None)


def test_openrouter_metadata_brings_the_upstream_providers_words() -> None:
    upstream = json.dumps(
        {
            "object": "error",
            "message": "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens.",
            "type": "BadRequestError",
            "code": 400,
        }
    )
    raw = body({"error": {"message": "Provider returned error", "code": 400, "metadata": {"raw": upstream, "provider_name": "DeepInfra"}}})
    read = read_error_body(raw)
    assert (
        read.detail
        == "Provider returned error (upstream: DeepInfra: This model's maximum context length is 32768 tokens. However, you requested 40000 tokens.)"
    )
    assert classify(400, read.detail, code=read.code).kind == "context_overflow"
    text = read_error_body(
        body({"error": {"message": "Provider returned error", "code": 502, "metadata": {"raw": "upstream connect error", "provider_name": None}}})
    )
    assert text.detail == "Provider returned error (upstream: upstream connect error)"
    flagged = read_error_body(body({"error": {"code": 403, "message": "Input flagged", "metadata": {"reasons": ["violence", "hate"], "flagged_input": "..."}}}))
    assert flagged.detail == "Input flagged (upstream: flagged for violence, hate)"


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        (b"", "no detail"),
        (b"   ", "no detail"),
        (b"Bad Gateway", "Bad Gateway"),
        (b"x" * 5000, "x" * 300),
        (b"<!DOCTYPE html><html><head><title>Attention Required! | Cloudflare</title></head><body>...</body></html>", "Attention Required! | Cloudflare"),
        (b"<html><body><h1>503</h1>\n<p>Service   Unavailable</p></body></html>", "503 Service Unavailable"),
        (b'"just a string"', "just a string"),
        (b"42", "42"),
        (b"[]", "[]"),
        (b'[{"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}}]', "Resource exhausted"),
        (b'{"error": {}}', "{}"),
        (b'{"error": ""}', "no detail"),
        (b'{"detail": "Not Found"}', "Not Found"),
        (b"\xff\xfe not utf-8", "\ufffd\ufffd not utf-8"),
    ],
)
def test_odd_bodies_become_a_short_detail(raw: bytes, detail: str) -> None:
    assert read_error_body(raw).detail == detail


def test_error_details_keeps_its_detail_and_code_pair() -> None:
    assert error_details(body({"error": {"message": "slow down", "type": "rate_limit_error", "code": "rate_limit_exceeded"}})) == (
        "slow down",
        "rate_limit_exceeded",
    )
    assert error_details(b"oops") == ("oops", None)


# -- through the model call -----------------------------------------------------------------------


async def test_the_model_call_classifies_an_http_error_by_its_body_type(clients: ModelClients) -> None:
    raw = body({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})

    async def handler(stream: trio.SocketStream) -> None:
        peer = Peer(stream)
        while await peer.request() is not None:
            await stream.send_all(response(raw, status=500, headers=b"content-type: application/json\r\n"))

    async with tiny_server(handler) as base_url:
        failure = failure_of(await ask(clients, base_url))
    assert (failure.kind, failure.status, failure.detail, failure.retry_after) == ("overloaded", 500, "Overloaded", None)
