"""The openai SDK, used the way its documentation shows, against ``hermes serve``.

The streaming loops here are the documented ones: read ``chunk.choices[0].delta`` after an
``if chunk.choices`` guard (the usage chunk of ``stream_options.include_usage`` has none),
and accumulate ``delta.tool_calls`` by ``index``.
"""

from __future__ import annotations

from typing import Any

import openai
import pydantic
from openai.types.chat import ChatCompletionChunk

from tests.clients.client_kit import calls, model_saw, offered, says
from tests.platforms.server_kit import ServerKit

WEATHER: Any = {  # a plain dict, as a client writes it (the SDK takes TypedDicts)
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def read_stream(stream: Any) -> tuple[str, list[ChatCompletionChunk], dict[int, dict[str, str]]]:
    """(text, every chunk, tool calls by index) of a chat completion stream, read as the SDK docs do."""
    text = ""
    chunks: list[ChatCompletionChunk] = []
    tool_calls: dict[int, dict[str, str]] = {}
    for chunk in stream:
        chunks.append(chunk)
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            text += delta.content
        for call in delta.tool_calls or []:
            entry = tool_calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
            if call.id:
                entry["id"] = call.id
            if call.function and call.function.name:
                entry["name"] += call.function.name
            if call.function and call.function.arguments:
                entry["arguments"] += call.function.arguments
    return text, chunks, tool_calls


def test_the_documented_streaming_loop_reads_an_answer_that_followed_a_server_tool(api: ServerKit) -> None:
    api.model.script([calls("read_file", '{"path": "notes.txt", "seconds": 0}', "call_r1"), says("The notes say hello.")])
    client = api.client()
    stream = client.chat.completions.create(
        model="hermes-test",
        messages=[{"role": "user", "content": "what do my notes say?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, chunks, tool_calls = read_stream(stream)
    assert text == "The notes say hello."
    assert tool_calls == {}  # the server ran read_file: nothing for the client to run
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)  # no progress frame as data
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None  # include_usage: the last chunk
    assert [m["role"] for m in model_saw(api)] == ["user", "assistant", "tool"]
    assert model_saw(api)[-1]["content"] == "contents of notes.txt"


def test_the_streaming_loop_is_undisturbed_when_tool_progress_is_asked_for(api: ServerKit) -> None:
    api.model.script([calls("read_file", '{"path": "a.txt", "seconds": 0}', "call_p1"), says("done")])
    client = api.client()
    stream = client.chat.completions.create(
        model="hermes-test", messages=[{"role": "user", "content": "read a.txt"}], stream=True, extra_headers={"X-Hermes-Tool-Progress": "true"}
    )
    text, chunks, tool_calls = read_stream(stream)
    assert (text, tool_calls) == ("done", {})
    assert all(c.object == "chat.completion.chunk" for c in chunks)  # progress travels as SSE comments


def test_a_client_tool_round_trip_accumulates_streamed_tool_call_deltas_and_resumes(api: ServerKit) -> None:
    api.model.script([calls("get_weather", '{"city": "Porto"}', "call_w1"), says("It is sunny in Porto.")])
    client = api.client()
    messages: list[Any] = [{"role": "user", "content": "weather in Porto?"}]
    stream = client.chat.completions.create(model="hermes-test", messages=messages, tools=[WEATHER], stream=True)
    text, chunks, tool_calls = read_stream(stream)
    assert "get_weather" in offered(api) and "read_file" in offered(api)  # the client's tool beside the server's
    assert text == ""
    assert tool_calls == {0: {"id": "call_w1", "name": "get_weather", "arguments": '{"city": "Porto"}'}}
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]
    call = tool_calls[0]
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}],
        }
    )
    messages.append({"role": "tool", "tool_call_id": call["id"], "content": "sunny, 24C"})
    resumed = client.chat.completions.create(model="hermes-test", messages=messages, tools=[WEATHER], stream=True)
    answer, _, more_calls = read_stream(resumed)
    assert (answer, more_calls) == ("It is sunny in Porto.", {})
    seen = model_saw(api)
    assert [m["role"] for m in seen] == ["user", "assistant", "tool"]
    assert seen[1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert (seen[2]["tool_call_id"], seen[2]["content"]) == ("call_w1", "sunny, 24C")


def test_a_client_tool_round_trip_with_parse_and_pydantic_tools_needs_no_stream(api: ServerKit) -> None:
    class GetWeather(pydantic.BaseModel):
        """The weather in a city."""

        city: str

    api.model.script([calls("GetWeather", '{"city": "Porto"}', "call_p2"), says("Sunny.")])
    client = api.client()
    messages: list[Any] = [{"role": "user", "content": "weather in Porto?"}]
    tools = [openai.pydantic_function_tool(GetWeather)]
    paused = client.chat.completions.parse(model="hermes-test", messages=messages, tools=tools)
    message = paused.choices[0].message
    assert paused.choices[0].finish_reason == "tool_calls" and message.tool_calls
    parsed = message.tool_calls[0].function.parsed_arguments
    assert parsed == GetWeather(city="Porto")
    messages += [message.model_dump(exclude_none=True, exclude={"parsed"}), {"role": "tool", "tool_call_id": "call_p2", "content": "sunny"}]
    final = client.chat.completions.parse(model="hermes-test", messages=messages, tools=tools)
    assert final.choices[0].message.content == "Sunny."


def test_parse_with_a_pydantic_response_format_returns_the_parsed_model(api: ServerKit) -> None:
    class City(pydantic.BaseModel):
        city: str
        temperature_c: int

    api.model.script([says('{"city": "Porto", "temperature_c": 24}')])
    reply = api.client().chat.completions.parse(model="hermes-test", messages=[{"role": "user", "content": "Porto, as data"}], response_format=City)
    assert reply.choices[0].message.parsed == City(city="Porto", temperature_c=24)


def test_a_responses_function_tool_round_trip_continues_by_previous_response_id(api: ServerKit) -> None:
    tool: Any = {"type": "function", "name": "get_weather", "description": "The weather in a city.", "parameters": WEATHER["function"]["parameters"]}
    api.model.script([calls("get_weather", '{"city": "Porto"}', "call_r2"), says("It is sunny in Porto.")])
    client = api.client()
    paused = client.responses.create(model="hermes-test", input="weather in Porto?", tools=[tool])
    function_calls = [item for item in paused.output if item.type == "function_call"]
    assert [(c.call_id, c.name, c.arguments) for c in function_calls] == [("call_r2", "get_weather", '{"city": "Porto"}')]
    output: Any = {"type": "function_call_output", "call_id": "call_r2", "output": "sunny, 24C"}
    final = client.responses.create(model="hermes-test", previous_response_id=paused.id, input=[output], tools=[tool])
    assert final.output_text == "It is sunny in Porto."
    assert [(m["role"], m.get("content")) for m in model_saw(api)][-1] == ("tool", "sunny, 24C")


def test_a_streamed_response_shows_a_server_tool_as_a_hosted_mcp_call_and_streams_the_answer(api: ServerKit) -> None:
    api.model.script([calls("read_file", '{"path": "notes.txt", "seconds": 0}', "call_r3"), says("The notes say hello.")])
    client = api.client()
    text = ""
    kinds: list[str] = []
    with client.responses.stream(model="hermes-test", input="what do my notes say?") as stream:
        for event in stream:
            kinds.append(event.type)
            if event.type == "response.output_text.delta":
                text += event.delta
        final = stream.get_final_response()
    assert text == "The notes say hello." == final.output_text
    assert "response.mcp_call.completed" in kinds and not any("function_call" in k for k in kinds)
    hosted = [item for item in final.output if item.type == "mcp_call"]
    assert [(i.server_label, i.name, i.output) for i in hosted] == [("hermes", "read_file", "contents of notes.txt")]
