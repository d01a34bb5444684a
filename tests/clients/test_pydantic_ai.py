"""pydantic-ai against ``hermes serve``: an agent's structured output, by tool and by JSON schema.

Each test runs the agent on an asyncio loop of its own (``asyncio.run``) with an
``AsyncOpenAI`` client closed inside that loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pydantic
from pydantic_ai import Agent, NativeOutput
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tests.clients.client_kit import calls, model_requests, offered, says
from tests.conftest import DEADLINE
from tests.platforms.server_kit import KEY, ServerKit


class City(pydantic.BaseModel):
    """A city and its temperature."""

    city: str
    temperature_c: int


def run_agent(api: ServerKit, output_type: Any, prompt: str, *, streamed: bool = False) -> Any:
    """The output of an agent on the server's model, run (or, when ``streamed``, streamed) to its end."""

    async def main() -> Any:
        async with openai.AsyncOpenAI(base_url=api.base_url + "/v1", api_key=KEY, max_retries=0, timeout=DEADLINE) as client:
            model = OpenAIChatModel("hermes-test", provider=OpenAIProvider(openai_client=client))
            agent = Agent(model, output_type=output_type, instructions="Answer with data.")
            if not streamed:
                return (await agent.run(prompt)).output
            async with agent.run_stream(prompt) as result:
                return [text async for text in result.stream_text(delta=True)]

    return asyncio.run(main())


def test_an_agents_structured_output_arrives_through_its_output_tool(api: ServerKit) -> None:
    api.model.script([calls("final_result", '{"city": "Porto", "temperature_c": 24}', "call_pa1")])
    assert run_agent(api, City, "the weather in Porto") == City(city="Porto", temperature_c=24)
    assert "final_result" in offered(api) and "read_file" in offered(api)


def test_an_agents_native_structured_output_arrives_through_the_json_schema_response_format(api: ServerKit) -> None:
    api.model.script([says('{"city": "Porto", "temperature_c": 24}')])
    assert run_agent(api, NativeOutput(City), "the weather in Porto") == City(city="Porto", temperature_c=24)
    assert model_requests(api)[-1]["response_format"]["type"] == "json_schema"


def test_a_server_tool_runs_before_the_agents_structured_output_arrives(api: ServerKit) -> None:
    api.model.script(
        [calls("read_file", '{"path": "porto.txt", "seconds": 0}', "call_pa2"), calls("final_result", '{"city": "Porto", "temperature_c": 24}', "call_pa3")]
    )
    assert run_agent(api, City, "the weather in porto.txt") == City(city="Porto", temperature_c=24)
    tool_results = [m["content"] for m in model_requests(api)[-1]["messages"] if m["role"] == "tool"]
    assert tool_results == ["contents of porto.txt"]


def test_a_streamed_text_run_delivers_the_answer_that_follows_a_server_tool(api: ServerKit) -> None:
    api.model.script([calls("read_file", '{"path": "notes.txt", "seconds": 0}', "call_pa4"), says("The notes say hello.")])
    assert "".join(run_agent(api, str, "what do my notes say?", streamed=True)) == "The notes say hello."
    assert model_requests(api)[-1]["messages"][-1]["content"] == "contents of notes.txt"
