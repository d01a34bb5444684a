"""LangChain's ``ChatOpenAI`` against ``hermes serve``: bound tools and structured output."""

from __future__ import annotations

from collections.abc import Iterator

import pydantic
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI

from tests.clients.client_kit import calls, model_requests, model_saw, offered, says
from tests.conftest import DEADLINE
from tests.platforms.server_kit import KEY, ServerKit


class City(pydantic.BaseModel):
    """A city and its temperature."""

    city: str
    temperature_c: int


def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city's name.
    """
    return f"sunny in {city}"


@pytest.fixture
def chat(api: ServerKit) -> Iterator[ChatOpenAI]:
    model = ChatOpenAI(base_url=api.base_url + "/v1", api_key=pydantic.SecretStr(KEY), model="hermes-test", max_retries=0, timeout=DEADLINE)
    try:
        yield model
    finally:
        model.root_client.close()


def test_a_bound_python_function_is_called_and_its_tool_message_resumes_the_turn(api: ServerKit, chat: ChatOpenAI) -> None:
    api.model.script([calls("get_weather", '{"city": "Porto"}', "call_lc1"), says("It is sunny in Porto.")])
    model = chat.bind_tools([get_weather])
    messages: list[BaseMessage] = [HumanMessage("weather in Porto?")]
    first = model.invoke(messages)
    assert isinstance(first, AIMessage)
    assert [(c["name"], c["args"], c["id"]) for c in first.tool_calls] == [("get_weather", {"city": "Porto"}, "call_lc1")]
    assert "get_weather" in offered(api) and "read_file" in offered(api)
    messages += [first, ToolMessage(get_weather(**first.tool_calls[0]["args"]), tool_call_id="call_lc1")]
    second = model.invoke(messages)
    assert second.content == "It is sunny in Porto." and not second.tool_calls
    assert [(m["role"], m.get("content")) for m in model_saw(api)][-1] == ("tool", "sunny in Porto")


def test_structured_output_by_json_schema_arrives_as_the_pydantic_model(api: ServerKit, chat: ChatOpenAI) -> None:
    api.model.script([says('{"city": "Porto", "temperature_c": 24}')])
    answer = chat.with_structured_output(City, method="json_schema").invoke("the weather in Porto, as data")
    assert answer == City(city="Porto", temperature_c=24)
    response_format = model_requests(api)[-1]["response_format"]
    assert response_format["type"] == "json_schema" and response_format["json_schema"]["name"] == "City"


def test_structured_output_by_function_calling_forces_the_schema_tool(api: ServerKit, chat: ChatOpenAI) -> None:
    api.model.script([calls("City", '{"city": "Porto", "temperature_c": 24}', "call_lc2")])
    answer = chat.with_structured_output(City, method="function_calling").invoke("the weather in Porto, as data")
    assert answer == City(city="Porto", temperature_c=24)
    assert model_requests(api)[-1]["tool_choice"] == {"type": "function", "function": {"name": "City"}}


def test_streaming_with_usage_yields_the_text_that_follows_a_server_tool(api: ServerKit, chat: ChatOpenAI) -> None:
    api.model.script([calls("read_file", '{"path": "notes.txt", "seconds": 0}', "call_lc3"), says("The notes say hello.")])
    chunks = list(chat.stream("what do my notes say?", stream_usage=True))
    assert "".join(str(c.content) for c in chunks) == "The notes say hello."
    assert not any(c.tool_call_chunks for c in chunks)  # the server ran read_file itself
    assert any(c.usage_metadata for c in chunks)  # from the chunk without choices
    assert model_requests(api)[-1]["messages"][-1]["content"] == "contents of notes.txt"
