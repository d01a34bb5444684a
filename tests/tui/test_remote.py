"""``hermes attach``: the remote handle against a running API server, and the UI on top of it."""

from __future__ import annotations

import asyncio
import io
import socket
from collections.abc import AsyncIterator

import httpx
import pytest
from textual.pilot import Pilot

from actors.chaos import ScriptedCall, TextReply, ToolCallsReply
from actors.platforms.tui import ChatApp, RemoteSession, RequestRefused, ServerUnreachable, StreamItem, StreamNotice
from actors.platforms.tui._plain import Interrupt, PlainChat
from actors.platforms.tui._prompt import PromptArea
from actors.platforms.tui._remote import base_url_of
from actors.platforms.tui._widgets import AssistantBlock, ToolLine
from protocols import SessionEvent, ToolStarted, TurnCancelled, TurnCompleted
from tests.conftest import DEADLINE
from tests.platforms.server_kit import KEY, ServerKit
from tests.tui.tui_kit import drive, kind, make_app, texts, type_text


def test_attach_sees_a_turn_an_api_client_started_live_and_can_cancel_the_next_one(api: ServerKit) -> None:
    api.model.script(
        [TextReply(content="hello from the model"), ToolCallsReply(calls=(ScriptedCall(name="read_file", arguments='{"path": "big", "seconds": 30}'),))],
        session="shared",
    )

    def chat_completion() -> httpx.Response:
        with api.http() as http:
            return http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}, headers={"X-Hermes-Session-Id": "shared"})

    def start_turn() -> httpx.Response:
        with api.http() as http:
            return http.post("/v1/sessions/shared/turns", json={"text": "read the big file"})

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        reply = await asyncio.to_thread(chat_completion)
        assert reply.status_code == 200
        await app.wait_for_event(kind(TurnCompleted))
        await pilot.pause()
        assert texts(app, ".user") == ["hi"]
        assert [b.text for b in app.query(AssistantBlock)] == ["hello from the model"]
        mark = len(app.seen)
        assert (await asyncio.to_thread(start_turn)).status_code == 202
        await app.wait_for_event(kind(ToolStarted), start=mark)
        await pilot.press("escape")
        await app.wait_for_event(kind(TurnCancelled), start=mark)
        await pilot.pause()
        assert [t.state for t in app.query(ToolLine)] == ["cancelled"]
        assert app.state == "idle"

    drive(make_app(RemoteSession(api.base_url, KEY), session_id="shared", resume=True), scenario)


def test_a_turn_typed_in_the_attached_ui_runs_on_the_server_and_commands_read_it(api: ServerKit) -> None:
    api.model.script([TextReply(content="served")], session="typed")

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await type_text(pilot, "from the terminal")
        done = await app.wait_for_event(kind(TurnCompleted))
        assert done.text == "served"  # type: ignore[union-attr]
        await type_text(pilot, "/tree")
        await type_text(pilot, "/tools")
        await type_text(pilot, "/cron")
        await app.workers.wait_for_complete()
        await pilot.pause()
        tree, tools, cron = texts(app, ".notice")[-3:]
        assert "platforms" in tree and "api" in tree and "typed" in tree
        assert tools == "the server does not publish its tool list"
        assert cron.startswith("no scheduler runs here")  # this test server is built without /scheduler
        assert app.query_one("#status").render() is not None

    drive(make_app(RemoteSession(api.base_url + "/v1/", KEY), session_id="typed", resume=True), scenario)
    with api.http() as http:
        record = http.get("/v1/sessions/typed").json()
    assert record["title"] == "from the terminal"


def test_undo_and_model_work_on_a_session_of_the_server(api: ServerKit) -> None:
    api.model.script([TextReply(content="one"), TextReply(content="two")], session="remote-undo")

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        for question in ("first", "second"):
            mark = len(app.seen)
            await type_text(pilot, question)
            await app.wait_for_event(kind(TurnCompleted), start=mark)
        await type_text(pilot, "/undo")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert texts(app, ".user") == ["first"]
        prompt = app.query_one(PromptArea)
        assert prompt.text == "second"
        prompt.put("")
        await type_text(pilot, "/model served-model")
        await app.workers.wait_for_complete()
        assert app.model_name == "served-model"

    drive(make_app(RemoteSession(api.base_url, KEY), session_id="remote-undo", resume=True), scenario)
    with api.http() as http:
        assert [m["content"] for m in http.get("/v1/sessions/remote-undo/messages").json()["data"]] == ["first", "one"]
        assert http.get("/v1/sessions/remote-undo").json()["model"] == "served-model"


class _CutOnce(httpx.AsyncByteStream):
    """A response body that fails (as a dropped connection does) after ``events`` whole events."""

    def __init__(self, inner: httpx.AsyncByteStream, events: int) -> None:
        self.inner = inner
        self.events = events

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.inner:
            yield chunk
            seen += chunk.count(b"\n\n")
            if seen >= self.events:
                raise httpx.ReadError("connection cut by the test")

    async def aclose(self) -> None:
        await self.inner.aclose()


class CuttingTransport(httpx.AsyncBaseTransport):
    """Cuts the first event stream after a few events; records each stream's Last-Event-ID."""

    def __init__(self, events: int) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.events = events
        self.resumed_from: list[str | None] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if not request.url.path.endswith("/events"):
            return response
        self.resumed_from.append(request.headers.get("last-event-id"))
        if len(self.resumed_from) > 1:
            return response
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(response.status_code, headers=response.headers, stream=_CutOnce(response.stream, self.events), request=request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_a_dropped_event_stream_resumes_with_last_event_id_and_loses_nothing(api: ServerKit) -> None:
    api.model.script(
        [ToolCallsReply(calls=(ScriptedCall(name="read_file", arguments='{"path": "a", "seconds": 0.05}'),)), TextReply(content="all there")],
        session="flaky",
    )
    transport = CuttingTransport(events=3)

    async def main() -> list[StreamItem]:
        handle = RemoteSession(api.base_url, KEY, transport=transport)
        items: list[StreamItem] = []
        ended = asyncio.Event()

        def sink(item: StreamItem) -> None:
            items.append(item)
            if isinstance(item, TurnCompleted):
                ended.set()

        try:
            await handle.open()
            await handle.attach("flaky", sink, after_seq=0)
            await handle.start_turn("flaky", "go")
            await asyncio.wait_for(ended.wait(), DEADLINE)
        finally:
            await handle.aclose()
        return items

    items = asyncio.run(main())
    events = [i for i in items if isinstance(i, SessionEvent)]
    notices = [i.kind for i in items if isinstance(i, StreamNotice)]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert notices == ["reconnecting", "connected"]
    assert transport.resumed_from == ["0", "3"]


def test_a_wrong_key_and_a_missing_server_are_told_apart(api: ServerKit) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]

    async def main() -> None:
        wrong = RemoteSession(api.base_url, "hk-not-the-key-0123456789")
        with pytest.raises(RequestRefused, match="refused the API key"):
            await wrong.open()
        await wrong.aclose()
        missing = RemoteSession(f"127.0.0.1:{free_port}", KEY)
        with pytest.raises(ServerUnreachable, match="no hermes server answers"):
            await missing.open()
        await missing.aclose()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("typed", "url"),
    [("127.0.0.1:8642", "http://127.0.0.1:8642"), ("http://h:1/v1/", "http://h:1"), ("https://h/v1", "https://h")],
)
def test_the_server_url_is_taken_the_way_people_type_it(typed: str, url: str) -> None:
    assert base_url_of(typed) == url


def test_plain_attach_prints_the_turns_of_the_session_and_ctrl_c_at_idle_leaves(api: ServerKit) -> None:
    api.model.script([TextReply(content="watched answer")], session="watched")

    async def main() -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        handle = RemoteSession(api.base_url, KEY)
        await handle.open()
        chat = PlainChat(handle, "watched", out=out, err=err, ask=None)
        watching = asyncio.create_task(chat.watch())
        await asyncio.wait_for(chat.attached.wait(), DEADLINE)
        await handle.start_turn("watched", "a question from elsewhere")
        await asyncio.wait_for(chat.wait_turns_ended(1), DEADLINE)
        chat.sink(Interrupt())
        status = await asyncio.wait_for(watching, DEADLINE)
        await handle.aclose()
        return status, out.getvalue(), err.getvalue()

    status, out, err = asyncio.run(main())
    assert status == 0
    assert out == "> a question from elsewhere\nwatched answer\n"
    assert "following session watched" in err


def test_compress_in_the_attached_ui_runs_on_the_server_and_reports_on_the_stream(api: ServerKit) -> None:
    api.model.script([TextReply(content="one")], session="remote-compress")

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await type_text(pilot, "first")
        await app.wait_for_event(kind(TurnCompleted))
        mark = len(app.seen)
        await type_text(pilot, "/compress")
        done = await app.wait_for_event(kind(TurnCompleted), start=mark)
        assert done.text.startswith("Nothing to compress")  # type: ignore[union-attr]
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert texts(app, ".user") == ["first", "/compress"]

    drive(make_app(RemoteSession(api.base_url, KEY), session_id="remote-compress", resume=True), scenario)
