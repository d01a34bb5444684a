"""litellm's OpenAI-compatible provider (``openai/<model>``) against ``hermes serve``.

litellm is given an SDK client of ours (``client=``) so its sockets are closed by the test.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before the import: never the network
os.environ["LITELLM_OFFLINE_MODE"] = "true"

import litellm
import pytest

from tests.clients.client_kit import calls, model_saw, says
from tests.platforms.server_kit import KEY, ServerKit

# litellm imports its provider modules on the first completion; pydantic warns on their TypedDicts
# with ReadOnly items (litellm's types, harmless to these tests).
pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* on TypedDict class '\w+' (is|are) using the .ReadOnly. qualifier:UserWarning")


@pytest.fixture(autouse=True)
def _an_event_loop_for_litellm() -> Iterator[None]:
    """A loop litellm's sync calls find, closed afterwards.

    litellm's sync completion asks ``asyncio.get_event_loop()`` for its service hooks, which
    would make a loop for this thread and leave it open; a later ``asyncio.run`` (another
    client's test) then drops it unclosed, a ResourceWarning.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        yield
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def test_a_streamed_completion_delivers_the_text_that_follows_a_server_tool(api: ServerKit) -> None:
    api.model.script([calls("read_file", '{"path": "notes.txt", "seconds": 0}', "call_ll1"), says("The notes say hello.")])
    stream = litellm.completion(
        model="openai/hermes-test",
        api_base=api.base_url + "/v1",
        api_key=KEY,
        messages=[{"role": "user", "content": "what do my notes say?"}],
        stream=True,
        client=api.client(),
    )
    text = ""
    finishes = []
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            if chunk.choices[0].finish_reason:
                finishes.append(chunk.choices[0].finish_reason)
    assert text == "The notes say hello."
    assert finishes == ["stop"]
    assert model_saw(api)[-1]["content"] == "contents of notes.txt"


def test_a_client_tool_call_comes_back_from_a_stream_and_its_result_resumes_the_turn(api: ServerKit) -> None:
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
    api.model.script([calls("get_weather", '{"city": "Porto"}', "call_ll2"), says("Sunny in Porto.")])
    client = api.client()
    messages: list[dict[str, object]] = [{"role": "user", "content": "weather in Porto?"}]
    options = {"model": "openai/hermes-test", "api_base": api.base_url + "/v1", "api_key": KEY, "tools": [weather], "client": client}
    chunks = list(litellm.completion(messages=messages, stream=True, **options))
    paused = litellm.stream_chunk_builder(chunks, messages=messages)
    assert paused is not None
    message = paused.choices[0].message  # type: ignore[union-attr]
    assert paused.choices[0].finish_reason == "tool_calls"
    assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []] == [("call_ll2", "get_weather", '{"city": "Porto"}')]  # type: ignore[union-attr]
    messages += [message.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": "call_ll2", "content": "sunny"}]
    final = litellm.completion(messages=messages, **options)
    assert final.choices[0].message.content == "Sunny in Porto."
    assert [m["role"] for m in model_saw(api)] == ["user", "assistant", "tool"]
