"""session_search's summaries: a real store file, the test model server over loopback, our own model client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import actors.tools._session_search  # noqa: F401 - registers the tool
from actors.agent import MachineConfig, ModelClients, ModelSettings, ToolContext, ToolOutput, Workspace
from actors.agent._auxiliary import AuxiliaryModel, auxiliary_model
from actors.chaos import HttpError, ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.tools import REGISTRY
from actors.tools._session_search_plan import EXCERPT_CHARS, excerpt
from protocols import ChatMessage, StoredMessage, ToolFinished, TurnCompleted
from tests.agent.session_kit import start_kit, until
from tests.conftest import DEADLINE

from .test_session_search_tool import write_store


@pytest.fixture
async def clients() -> AsyncIterator[ModelClients]:
    made = ModelClients()
    try:
        yield made
    finally:
        await made.aclose()


def model_of(server: ModelServer, clients: ModelClients, *, timeout: float = 30.0, summary_model: str = "") -> AuxiliaryModel:
    settings = ModelSettings(model="test-model", base_url=server.base_url, api_key="sk-test")
    return auxiliary_model(clients, settings, "now", summary_model=summary_model, timeout=timeout)


async def search(store_file: Path, model: AuxiliaryModel | None, **arguments: Any) -> ToolOutput:
    call = ToolContext(
        session_id="now", turn_id="t", call_id="c", home=Path("/nonexistent"), workspace=Workspace(Path(".")), store_file=store_file, auxiliary=model
    )
    return await REGISTRY.get("session_search").run(arguments, call)


def asked(server: ModelServer) -> list[str]:
    """The user message of every summary request the model server received."""
    return [r.body["messages"][-1]["content"] for r in server.requests if r.path.endswith("/chat/completions")]


async def test_the_summary_comes_from_the_model_which_was_sent_the_sessions_transcript(
    tmp_path: Path, model_server: ModelServer, clients: ModelClients
) -> None:
    store = tmp_path / "state.db"
    write_store(store)
    model_server.script([TextReply(content="The user upgraded the cluster with kubeadm after draining the nodes.")], model="small-model")
    result = await search(store, model_of(model_server, clients, summary_model="small-model"), query="kubernetes", limit=1)
    assert result.ok
    assert "1. session old, 'Kubernetes upgrade', cli, 1970-01-02 00:00 UTC (4 matching messages)" in result.content
    assert "   The user upgraded the cluster with kubeadm after draining the nodes." in result.content
    assert ">>>" not in result.content  # no raw snippets where there is a summary
    (request,) = [r for r in model_server.requests if r.path.endswith("/chat/completions")]
    assert request.body["model"] == "small-model"  # compression.summary_model, when config names one
    sent = request.body["messages"][-1]["content"]
    assert "Search: kubernetes" in sent and "session old, 'Kubernetes upgrade'" in sent
    assert "[user] How do I upgrade the kubernetes cluster?" in sent
    assert "[assistant] Drain each node, then upgrade kubernetes with kubeadm." in sent
    assert "Search my history" not in sent  # the calling session is never summarised


async def test_every_matching_session_is_summarised_in_parallel_and_the_current_one_is_left_out(
    tmp_path: Path, model_server: ModelServer, clients: ModelClients
) -> None:
    store = tmp_path / "state.db"
    write_store(store)
    model_server.script([TextReply(content="first summary"), TextReply(content="second summary")])
    result = await search(store, model_of(model_server, clients), query="kubernetes")
    assert "(2 sessions, best first)" in result.content
    assert "   first summary" in result.content and "   second summary" in result.content
    sent = asked(model_server)
    assert len(sent) == 2
    assert sorted("Pods drift like clouds." in text for text in sent) == [False, True]  # one request per session
    assert not any("Search my history" in text for text in sent)


async def test_a_model_that_fails_leaves_the_raw_hits_with_a_note_and_the_other_summary_stands(
    tmp_path: Path, model_server: ModelServer, clients: ModelClients
) -> None:
    store = tmp_path / "state.db"
    write_store(store)
    model_server.script([TextReply(content="the one summary"), HttpError(status=400, message="bad request for this model")])
    result = await search(store, model_of(model_server, clients), query="kubernetes")
    assert result.ok
    assert result.content.count("   the one summary") == 1
    assert result.content.count("[no summary: the model test-model failed:") == 1
    assert ">>>kubernetes<<<" in result.content  # the failed session's hits are still there


async def test_a_model_past_the_deadline_gives_the_raw_hits_with_a_note(tmp_path: Path, model_server: ModelServer, clients: ModelClients) -> None:
    store = tmp_path / "state.db"
    write_store(store)
    model_server.script([TextReply(content="too late", latency=60.0)])
    result = await search(store, model_of(model_server, clients, timeout=0.3), query="kubernetes", limit=1)
    assert result.ok
    assert "[no summary: the model test-model did not answer within 0.3 s; the matching messages:]" in result.content
    assert "   - user at 1970-01-02 00:01 UTC: How do I upgrade the >>>kubernetes<<< cluster?" in result.content
    assert "too late" not in result.content


async def test_an_unreachable_model_gives_the_raw_hits_with_a_note(tmp_path: Path, clients: ModelClients) -> None:
    store = tmp_path / "state.db"
    write_store(store)
    closed = ModelSettings(model="test-model", base_url="http://127.0.0.1:9/v1", api_key="sk-test")  # discard port: refused
    result = await search(store, auxiliary_model(clients, closed, "now", timeout=10.0), query="kubernetes", limit=1)
    assert result.ok
    assert "[no summary: the model test-model" in result.content and ">>>kubernetes<<<" in result.content


def stored(n: int, text: str) -> StoredMessage:
    message = ChatMessage(role="user", content=text) if n % 2 == 0 else ChatMessage(role="assistant", content=text)
    return StoredMessage(id=n, session_id="s", timestamp=float(n), message=message)


def test_an_excerpt_keeps_every_hit_first_then_its_neighbours_within_the_budget() -> None:
    messages = [stored(n, f"message {n} " + "x" * 980) for n in range(100)]
    text = excerpt(messages, [90, 10])
    assert len(text) <= EXCERPT_CHARS + 200  # the gap markers are extra
    assert "[user] message 90 " in text and "[user] message 10 " in text
    assert "message 89 " in text and "message 91 " in text and "message 9 " in text
    assert "message 50 " not in text
    assert text.startswith("[... ") and "messages left out ...]" in text
    lines = [line for line in text.splitlines() if not line.startswith("[...")]
    numbers = [int(line.split()[2]) for line in lines]
    assert numbers == sorted(numbers)  # in transcript order


def test_one_huge_message_is_clipped_and_a_short_session_is_whole() -> None:
    text = excerpt([stored(0, "a" * 50_000), stored(1, "short answer")], [0])
    assert "[...]" in text and len(text) < 2_200 and text.endswith("[assistant] short answer")
    assert excerpt([stored(0, "hello"), stored(1, "hi")], [1]) == "[user] hello\n[assistant] hi"


def test_in_a_running_session_the_tool_asks_the_summary_model_and_the_model_sees_the_summary(tmp_path: Path, model_server: ModelServer) -> None:
    """Through the session actor: its tool context carries the side-call model (``compression.summary_model``)."""
    store = tmp_path / "state.db"
    write_store(store)
    tools = {"session_search": REGISTRY.get("session_search").spec()}
    config = MachineConfig(traits={n: t.traits for n, t in tools.items()}, retry_base=0.01, turn_timeout=60.0, summary_model="small-model")
    kit = start_kit(store, model_server, tools=tools, config=config)
    try:
        search_call = ToolCallsReply(calls=(ScriptedCall(name="session_search", arguments=json.dumps({"query": "kubernetes", "limit": 1})),))
        model_server.script([search_call, TextReply(content="Found it: kubeadm.")], session="u")
        model_server.script([TextReply(content="They drained the nodes and upgraded with kubeadm.")], model="small-model")
        probe = kit.subscribe("u")
        kit.start_turn("u", "what did we do about kubernetes?")
        events = until(probe, TurnCompleted)
        finished = next(e for e in events if isinstance(e, ToolFinished))
        assert finished.ok and "   They drained the nodes and upgraded with kubeadm." in finished.preview
        assert events[-1].text == "Found it: kubeadm."
        summary = next(r for r in model_server.requests if r.body.get("model") == "small-model")
        assert "Drain each node" in summary.body["messages"][-1]["content"] and "tools" not in summary.body
        last = [r for r in model_server.requests if r.session == "u"][-1]
        assert "They drained the nodes" in json.dumps(last.body["messages"])  # the tool result reached the model
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)
