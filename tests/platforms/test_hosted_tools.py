"""Tools the server runs are hosted ``mcp_call`` items in the Responses API, never ``function_call``."""

from __future__ import annotations

from openai.types.responses import ResponseOutputMessage
from openai.types.responses.response_output_item import McpCall

from actors.chaos import ScriptedCall, TextReply, ToolCallsReply
from tests.platforms.server_kit import ServerKit

READ = ScriptedCall(name="read_file", arguments='{"path": "a", "seconds": 0.01}')
FAIL = ScriptedCall(name="terminal", arguments='{"command": "echo broken; exit 3"}')


def test_server_run_tools_come_back_as_mcp_calls_the_sdk_parses_with_output_and_status(api: ServerKit) -> None:
    api.model.script([ToolCallsReply(calls=(READ,)), ToolCallsReply(calls=(FAIL,)), TextReply(content="Done.")])
    response = api.client().responses.create(model="hermes-test", input="Read a, then run the command.")
    assert [type(item) for item in response.output] == [McpCall, McpCall, ResponseOutputMessage]
    read, failed = response.output[0], response.output[1]
    assert isinstance(read, McpCall) and isinstance(failed, McpCall)
    assert (read.server_label, read.name, read.arguments, read.status, read.error) == ("hermes", "read_file", READ.arguments, "completed", None)
    assert read.output == "contents of a"
    assert (failed.name, failed.status) == ("terminal", "failed")
    assert failed.error is not None and "broken" in failed.error
    assert read.id != failed.id
    assert response.output_text == "Done."
    assert api.client().responses.retrieve(response.id).output[0].type == "mcp_call"  # stored as shown


def test_a_streamed_tool_call_is_added_in_progress_then_done_with_its_output_at_one_output_index(api: ServerKit) -> None:
    api.model.script([ToolCallsReply(calls=(READ,), content="Let me look."), TextReply(content="It says hi.")])
    events = list(api.client().responses.create(model="hermes-test", input="What does a say?", stream=True))
    call_events = [e for e in events if "mcp_call" in e.type or getattr(getattr(e, "item", None), "type", None) == "mcp_call"]
    assert [e.type for e in call_events] == [
        "response.output_item.added",
        "response.mcp_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.output_item.done",
    ]
    added, done = call_events[0], call_events[-1]
    assert added.item.status == "in_progress" and added.item.output is None
    assert done.item.status == "completed" and done.item.output == "contents of a"
    assert {e.output_index for e in call_events} == {1}  # after the message streamed before the call
    assert {e.item_id for e in call_events if hasattr(e, "item_id")} == {added.item.id}
    final = events[-1].response
    assert [item.type for item in final.output] == ["message", "mcp_call", "message"]
    assert [item.content[0].text for item in final.output if isinstance(item, ResponseOutputMessage)] == ["Let me look.", "It says hi."]
    assert all(e.type != "response.function_call_arguments.delta" for e in events)


def test_the_sdk_stream_helper_accumulates_hosted_calls_and_messages_in_order(api: ServerKit) -> None:
    api.model.script([ToolCallsReply(calls=(READ,), content="Looking."), TextReply(content="Found it.")])
    with api.client().responses.stream(model="hermes-test", input="Find it.") as stream:
        for _event in stream:
            pass
        final = stream.get_final_response()
    assert [item.type for item in final.output] == ["message", "mcp_call", "message"]
    assert final.output_text == "Looking.Found it."


def test_a_previous_output_given_back_as_input_is_accepted_and_its_hosted_calls_skipped(api: ServerKit) -> None:
    client = api.client()
    api.model.script([ToolCallsReply(calls=(READ,)), TextReply(content="It says hi.")])
    first = client.responses.create(model="hermes-test", input="What does a say?", store=False)
    replay = [{"role": "user", "content": "What does a say?"}, *(item.model_dump(exclude_none=True) for item in first.output)]
    api.model.script([TextReply(content="Yes, hi.")])
    second = client.responses.create(model="hermes-test", input=[*replay, {"role": "user", "content": "Sure?"}], store=False)  # type: ignore[list-item]
    assert second.output_text == "Yes, hi."
    sent = [(m["role"], m.get("content")) for m in api.model.requests[-1].body["messages"] if m["role"] != "system"]
    assert sent == [("user", "What does a say?"), ("assistant", "It says hi."), ("user", "Sure?")]
