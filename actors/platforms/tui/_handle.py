"""The session handle: what the terminal UI needs of a session, wherever the session runs.

Two implementations: :class:`~actors.platforms.tui._local.LocalSession` (the runtime in
this process) and :class:`~actors.platforms.tui._remote.RemoteSession` (HTTP to a running
``hermes serve``). The UI and the plain mode are written against :class:`SessionHandle`
only.

Errors (all raised by handles; the root is the project's ``HermesError``)::

    HermesError
    └── TuiError
        ├── SetupFailed        the configuration is incomplete (no model, no key): exit 2
        ├── ServerUnreachable  no server answers at the URL, or the stream cannot connect
        └── RequestRefused     the session or the server answered a request with an error

This module is imported before the prompt is shown: it imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Literal, Protocol

from actors import HermesError
from protocols import ApprovalChoice, ChatMessage, SessionEvent, SessionRecord


class TuiError(HermesError):
    """Root of the terminal UI's errors; the message says what happened and what to do."""


class SetupFailed(TuiError):
    """The configuration is incomplete or unreadable (model, endpoint, API key)."""

    exit_code = 2


class ServerUnreachable(TuiError):
    """Nothing answers at the server's URL (it is not running, or the URL is wrong)."""

    exit_code = 1


class RequestRefused(TuiError):
    """The server or the session refused a request (wrong key, unknown session, bad input)."""

    exit_code = 1


@dataclasses.dataclass(frozen=True, slots=True)
class StreamNotice:
    """Something about the event stream itself rather than the session (remote handles)."""

    kind: Literal["connected", "reconnecting", "gap", "failed"]
    text: str
    session_id: str


StreamItem = SessionEvent | StreamNotice
"""What a handle hands to an :data:`EventSink`."""

EventSink = Callable[[StreamItem], None]
"""Receives a session's events in sequence order. It may be called from any thread, so it
must be thread-safe and must not block (post to the UI's loop, or put on a queue)."""


class Attachment(Protocol):
    """A live subscription to one session's events."""

    def close(self) -> None:
        """Stop receiving events (idempotent)."""
        ...


class SessionHandle(Protocol):
    """A session runtime the UI talks to; every session is named by its id."""

    @property
    def label(self) -> str:
        """Where the sessions run: ``local`` or the server's URL (for the status bar)."""
        ...

    @property
    def model(self) -> str:
        """The model the sessions call (as far as the handle knows)."""
        ...

    async def open(self) -> None:
        """Check the runtime can be reached (raises :class:`TuiError` with advice)."""
        ...

    async def attach(self, session_id: str, sink: EventSink, *, after_seq: int | None = None, observer: bool = False) -> Attachment:
        """Stream ``session_id``'s events to ``sink``: those after ``after_seq``, or only new ones (None).

        Returns once the subscription is in place, so a turn started afterwards is seen
        from its first event. ``observer`` attaches as a watcher, who is not asked
        clarifying questions.
        """
        ...

    async def start_turn(self, session_id: str, text: str, *, title: str | None = None) -> str:
        """Send a user message (queued if a turn runs); returns the turn id.

        ``title`` names the session when this message creates it.
        """
        ...

    async def compress(self, session_id: str, focus: str) -> str:
        """Compress the conversation now (queued if a turn runs), keeping ``focus`` in detail;
        returns the compression's turn id. Its outcome arrives as the turn's events."""
        ...

    async def cancel_turn(self, session_id: str) -> None:
        """Cancel whatever turn the session is running."""
        ...

    async def resolve_approval(self, session_id: str, request_id: str, choice: ApprovalChoice) -> None: ...

    async def answer_clarification(self, session_id: str, request_id: str, answer: str) -> None: ...

    async def undo(self, session_id: str) -> tuple[int, str | None]:
        """Take back the last exchange; returns (messages removed, the user's message).

        Raises :class:`RequestRefused` while a turn runs or when there is nothing to undo.
        """
        ...

    async def switch_model(self, session_id: str, model: str) -> None:
        """Make the session call ``model`` from its next turn on (saved with the session)."""
        ...

    async def list_sessions(self, limit: int = 100) -> list[SessionRecord]:
        """Sessions, most recent first."""
        ...

    async def get_session(self, session_id: str) -> SessionRecord | None: ...

    async def transcript(self, session_id: str) -> list[ChatMessage]:
        """The stored transcript (empty for a session without messages)."""
        ...

    async def tree(self) -> str:
        """The live supervision tree, as text lines."""
        ...

    async def tools(self) -> list[str] | None:
        """The tools a session may call; None when the handle cannot know."""
        ...

    async def jobs(self) -> list[str] | None:
        """The scheduled jobs, a line each; None where no scheduler runs (``hermes chat``'s own runtime)."""
        ...

    async def reset_session(self, old_session_id: str, new_session_id: str) -> None:
        """The chat moved from ``old_session_id`` to a new session (``/new``): tell the hooks
        (``on_session_finalize`` of the old, then ``on_session_reset`` of the new)."""
        ...

    async def reload(self) -> list[str]:
        """Read config.yaml again and apply what may change while running; what happened, a line each.

        Raises :class:`RequestRefused` where the runtime is another process's."""
        ...

    async def aclose(self) -> None:
        """Detach everything and release the runtime or connection (idempotent)."""
        ...
