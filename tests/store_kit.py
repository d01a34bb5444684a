"""The store writer's test kit: a real ``StoreWriter`` with test controls (``Hold``, a crash, a
broken connection), a probe it replies to, and the few commands most store tests send."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actors import Address
from actors.store import StoreReader, StoreWriter
from protocols import ChatMessage, ToolCall
from protocols._store import AppendMessages, CreateSession, SessionCreated
from supervisor import ChildSpec, Runtime
from tests.conftest import DEADLINE, Probe

StartRuntime = Callable[..., Runtime]


class Replies(Probe):
    """A probe the writer can reply to: anything with ``.tell``."""

    def tell(self, message: Any) -> None:
        self.put(message)


class VisibilityProbe(Probe):
    """On each reply, reads the store through its own read-only connection, at that moment."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def tell(self, message: Any) -> None:
        with StoreReader(self.path) as reader:
            visible = [m.id for m in reader.load_stored_messages(message.session_id)]
        self.put((message, visible))


class Hold:
    """Parks the writer's thread until ``release`` is set, so that commands queue up. What the
    writer took before is sent first (appends waiting for the batch's end on Postgres, not
    committed): the writer parks mid-batch as a process stopped there would."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.release = threading.Event()


class ControlledWriter(StoreWriter):
    """The real writer plus test controls: ``Hold``, "crash" (raise) and "break" (close the connection)."""

    def receive(self, message: Any) -> Any:
        if isinstance(message, Hold):
            if self._appends_waiting():
                self._append_deferred()
            message.held.set()
            message.release.wait(DEADLINE)
            return None
        if isinstance(message, str) and message == "crash":
            raise RuntimeError("asked to crash")
        if isinstance(message, str) and message == "break":
            assert self._db is not None
            self._db.close()
            return None
        return super().receive(message)


def start_store(start_runtime: StartRuntime, path: Path | str, **options: Any) -> tuple[Runtime, Address[Any]]:
    runtime = start_runtime([ChildSpec(id="store", actor=ControlledWriter, args=(path,), kwargs=options)])
    return runtime, runtime.lookup("/store")


def create(store: Address[Any], replies: Replies, session_id: str, **fields: Any) -> None:
    store.tell(CreateSession(session_id=session_id, source=fields.pop("source", "cli"), token=session_id, reply_to=replies, **fields))
    assert replies.get() == SessionCreated(session_id=session_id, token=session_id)


def append(store: Address[Any], replies: Replies, session_id: str, *messages: ChatMessage, token: str = "t") -> Any:
    store.tell(AppendMessages(session_id=session_id, messages=messages, token=token, reply_to=replies))
    return replies.get()


def asking(store: Address[Any], replies: Replies) -> Callable[[Any], Any]:
    """``ask(command)``: tell the writer ``command`` (whose ``reply_to`` is ``replies``), return its reply."""

    def ask(command: Any) -> Any:
        store.tell(command)
        return replies.get()

    return ask


def hold(store: Address[Any]) -> Hold:
    gate = Hold()
    store.tell(gate)
    assert gate.held.wait(DEADLINE), "the writer did not take the Hold within the deadline"
    return gate


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


TRANSCRIPT = (
    ChatMessage(role="system", content="You are Hermes."),
    ChatMessage(role="user", content="What is in /tmp? Also the weather in Paris."),
    ChatMessage(
        role="assistant",
        content=None,
        reasoning="List the directory, and look the weather up in parallel.",
        tool_calls=(
            ToolCall(id="call_1", name="terminal", arguments='{"command": "ls /tmp"}'),
            ToolCall(id="call_2", name="weather", arguments='{"city": "Paris", "unit": "°C"}'),
        ),
        finish_reason="tool_calls",
    ),
    ChatMessage(role="tool", content="a.txt\nb.txt", tool_call_id="call_1", name="terminal"),
    ChatMessage(role="tool", content="12 °C, rain", tool_call_id="call_2", name="weather"),
    ChatMessage(role="assistant", content="Two files; 12 °C and rain in Paris. 🌧", finish_reason="stop"),
)
