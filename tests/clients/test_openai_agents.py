"""The OpenAI Agents SDK against ``hermes serve``: its function tools, and the server's own tools.

Each test runs the SDK on an asyncio loop of its own (``asyncio.run``) with an ``AsyncOpenAI``
client closed inside that loop. Tracing is off, so nothing is exported anywhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import openai
import pydantic
from agents import (
    Agent,
    Model,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RawResponsesStreamEvent,
    Runner,
    ToolCallItem,
    function_tool,
    set_tracing_disabled,
)
from agents.result import RunResultBase
from openai.types.responses import ResponseTextDeltaEvent
from openai.types.responses.response_output_item import McpCall

from tests.clients.client_kit import calls, model_requests, model_saw, offered, says
from tests.conftest import DEADLINE
from tests.platforms.server_kit import KEY, ServerKit

set_tracing_disabled(True)

ModelMaker = Callable[[openai.AsyncOpenAI], Model]

ran: list[str] = []
"""The cities :func:`get_weather` was called with, in this process."""


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city's name.
    """
    ran.append(city)
    return f"sunny in {city}"


def run_agent(api: ServerKit, make_model: ModelMaker, prompt: str, *, streamed: bool = False, **agent: Any) -> tuple[RunResultBase, str]:
    """(result, streamed text) of an agent on the model ``make_model(client)`` builds, run by
    ``Runner.run`` or, when ``streamed``, ``Runner.run_streamed`` read to its end (else the text is "")."""

    async def main() -> tuple[RunResultBase, str]:
        async with openai.AsyncOpenAI(base_url=api.base_url + "/v1", api_key=KEY, max_retries=0, timeout=DEADLINE) as client:
            assistant = Agent(name="assistant", instructions="Be brief.", model=make_model(client), **agent)
            if not streamed:
                return await Runner.run(assistant, prompt, max_turns=4), ""
            result = Runner.run_streamed(assistant, prompt, max_turns=4)
            text = ""
            async for event in result.stream_events():
                if isinstance(event, RawResponsesStreamEvent) and isinstance(event.data, ResponseTextDeltaEvent):
                    text += event.data.delta
            return result, text

    return asyncio.run(main())


def hosted_calls(result: RunResultBase) -> list[McpCall]:
    """The run's tool calls, checked to be hosted ``mcp_call`` items (none the SDK runs)."""
    raw = [item.raw_item for item in result.new_items if isinstance(item, ToolCallItem)]
    hosted = [call for call in raw if isinstance(call, McpCall)]
    assert hosted == raw, f"tool calls that are not hosted mcp_call items: {raw}"
    return hosted


def chat_model(client: openai.AsyncOpenAI) -> OpenAIChatCompletionsModel:
    return OpenAIChatCompletionsModel(model="hermes-test", openai_client=client)


def responses_model(client: openai.AsyncOpenAI) -> OpenAIResponsesModel:
    return OpenAIResponsesModel(model="hermes-test", openai_client=client)


def test_an_agents_function_tool_is_called_by_the_model_and_its_result_answered(api: ServerKit) -> None:
    api.model.script([calls("get_weather", '{"city": "Porto"}', "call_ag1"), says("It is sunny in Porto.")])
    ran.clear()
    result, _ = run_agent(api, chat_model, "weather in Porto?", tools=[get_weather])
    assert result.final_output == "It is sunny in Porto."
    assert ran == ["Porto"]
    assert "get_weather" in offered(api) and "read_file" in offered(api)
    seen = model_saw(api)
    assert [m["role"] for m in seen] == ["user", "assistant", "tool"]
    assert (seen[-1]["tool_call_id"], seen[-1]["content"]) == ("call_ag1", "sunny in Porto")


def test_a_server_tool_in_a_responses_run_is_shown_as_a_hosted_call_the_sdk_never_runs(api: ServerKit) -> None:
    api.model.script([calls("read_file", '{"path": "notes.txt", "seconds": 0}', "call_ag2"), says("The notes say hello.")])
    ran.clear()
    result, _ = run_agent(api, responses_model, "what do my notes say?", tools=[get_weather])
    assert result.final_output == "The notes say hello."
    assert ran == []
    hosted = hosted_calls(result)
    assert [(i.server_label, i.name, i.output) for i in hosted] == [("hermes", "read_file", "contents of notes.txt")]
    tool = model_saw(api)[-1]
    assert (tool["role"], tool["tool_call_id"], tool["content"]) == ("tool", "call_ag2", "contents of notes.txt")


def test_an_agents_function_tool_in_a_responses_run_is_called_and_its_output_answered(api: ServerKit) -> None:
    api.model.script([calls("get_weather", '{"city": "Porto"}', "call_ag3"), says("It is sunny in Porto.")])
    ran.clear()
    result, _ = run_agent(api, responses_model, "weather in Porto?", tools=[get_weather])
    assert result.final_output == "It is sunny in Porto."
    assert ran == ["Porto"]
    assert "get_weather" in offered(api) and "read_file" in offered(api)
    seen = model_saw(api)
    assert [m["role"] for m in seen] == ["user", "assistant", "tool"]
    assert (seen[-1]["tool_call_id"], seen[-1]["content"]) == ("call_ag3", "sunny in Porto")


def test_a_streamed_chat_completions_run_calls_the_agents_function_tool_and_streams_the_answer(api: ServerKit) -> None:
    api.model.script([calls("get_weather", '{"city": "Porto"}', "call_ag4"), says("It is sunny in Porto.")])
    ran.clear()
    result, text = run_agent(api, chat_model, "weather in Porto?", streamed=True, tools=[get_weather])
    assert (result.final_output, text, ran) == ("It is sunny in Porto.", "It is sunny in Porto.", ["Porto"])


def test_a_streamed_responses_run_shows_the_server_tool_and_streams_the_answer(api: ServerKit) -> None:
    api.model.script([calls("read_file", '{"path": "notes.txt", "seconds": 0}', "call_ag5"), says("The notes say hello.")])
    ran.clear()
    result, text = run_agent(api, responses_model, "what do my notes say?", streamed=True, tools=[get_weather])
    assert (result.final_output, text, ran) == ("The notes say hello.", "The notes say hello.", [])
    assert [(i.server_label, i.name) for i in hosted_calls(result)] == [("hermes", "read_file")]


def test_a_second_run_on_the_first_runs_input_list_continues_one_session_with_the_whole_history(api: ServerKit) -> None:
    api.model.script([calls("get_weather", '{"city": "Porto"}', "call_ag6"), says("Sunny in Porto."), says("Yes, warm.")])

    async def main() -> tuple[RunResultBase, RunResultBase]:
        async with openai.AsyncOpenAI(base_url=api.base_url + "/v1", api_key=KEY, max_retries=0, timeout=DEADLINE) as client:
            assistant = Agent(name="assistant", instructions="Be brief.", model=chat_model(client), tools=[get_weather])
            first = await Runner.run(assistant, "weather in Porto?")
            return first, await Runner.run(assistant, [*first.to_input_list(), {"role": "user", "content": "warm?"}])

    first, second = asyncio.run(main())
    assert (first.final_output, second.final_output) == ("Sunny in Porto.", "Yes, warm.")
    assert [(m["role"], m.get("content") or "") for m in model_saw(api)] == [
        ("user", "weather in Porto?"),
        ("assistant", ""),
        ("tool", "sunny in Porto"),
        ("assistant", "Sunny in Porto."),
        ("user", "warm?"),
    ]
    assert len({r.session for r in api.model.requests}) == 1  # the exact history continued its session


class City(pydantic.BaseModel):
    city: str
    temperature_c: int


def test_an_agents_output_type_arrives_through_the_json_schema_response_format(api: ServerKit) -> None:
    api.model.script([says('{"city": "Porto", "temperature_c": 24}')])
    result, _ = run_agent(api, chat_model, "the weather in Porto, as data", output_type=City)
    assert result.final_output == City(city="Porto", temperature_c=24)
    assert model_requests(api)[-1]["response_format"]["type"] == "json_schema"
