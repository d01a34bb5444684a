"""Model calls beside the plain stream: a stream that goes silent, endpoints that do not stream."""

from __future__ import annotations

import dataclasses

import trio

from actors.agent import ModelClients, ModelSettings
from actors.agent._model import call_model
from actors.chaos import TextReply, ToolCallsReply, open_model_server
from actors.chaos._script import ScriptedCall
from tests.agent.http1_kit import USER, failure_of, reply_of
from tests.conftest import DEADLINE


def settings(base_url: str, **changes: object) -> ModelSettings:
    return dataclasses.replace(ModelSettings(model="test-model", base_url=base_url, api_key="test-key"), **changes)  # type: ignore[arg-type]


async def call(clients: ModelClients, model: ModelSettings) -> object:
    with trio.fail_after(DEADLINE):
        return await call_model(clients, model, USER, [], hub=None, turn_id="t1", session_id="s1")


async def test_a_stream_that_goes_silent_fails_as_a_transport_error_after_the_read_timeout_not_the_call_timeout(clients: ModelClients) -> None:
    async with open_model_server() as server:
        server.script([TextReply(content="one two three", silent_after_chunks=2)])
        started = trio.current_time()
        failure = failure_of(await call(clients, settings(server.base_url, stream_read_timeout=0.3)))
        took = trio.current_time() - started
    assert failure.kind == "transport" and "sent nothing for 0.3 s" in failure.detail, failure
    assert 0.3 <= took < DEADLINE


async def test_streaming_false_makes_a_whole_request_and_reads_text_tool_calls_and_usage(clients: ModelClients) -> None:
    async with open_model_server() as server:
        call_ = ScriptedCall(name="read_file", arguments='{"path": "a"}', id="call_1")
        server.script([TextReply(content="whole answer"), ToolCallsReply(calls=(call_,))])
        first = reply_of(await call(clients, settings(server.base_url, stream=False)))
        second = reply_of(await call(clients, settings(server.base_url, stream=False)))
        bodies = [r.body for r in server.requests]
    assert first.content == "whole answer" and first.finish_reason == "stop" and first.input_tokens > 0
    assert [(c.id, c.name, c.arguments) for c in second.tool_calls] == [("call_1", "read_file", '{"path": "a"}')]
    assert all(b["stream"] is False and "stream_options" not in b for b in bodies)


async def test_an_endpoint_that_refuses_streaming_is_asked_again_whole_and_remembered(clients: ModelClients) -> None:
    async with open_model_server(refuse_stream=True) as server:
        server.script([TextReply(content="first"), TextReply(content="second")])
        first = reply_of(await call(clients, settings(server.base_url)))
        second = reply_of(await call(clients, settings(server.base_url)))
        streamed = [r.body["stream"] for r in server.requests]
    assert (first.content, second.content) == ("first", "second")
    assert streamed == [True, False, False], "one refused stream, then whole requests only"
