"""The busy policy, pure: which turn each chat runs, what waits behind it, and which turn's end
is answered.

Per chat (session key) at most one turn is followed. A message that arrives while one runs:

- ``interrupt``: starts at once; the session cancels the running turn, whose end is not answered.
- ``queue``: waits in the gateway's queue (at most ``limit``, then it is refused with a notice);
  each queued message is a turn of its own.
- ``steer``: waits like ``queue``, but everything that waited is sent as one message when the
  turn ends (the session core cannot yet add text to a running model call; this is the nearest
  it allows).

Invariant: a turn's end produces at most one :class:`Reply`, and only for the chat's current
turn; a second end for the same turn id produces nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import msgspec

from protocols import PlatformMessage

from ._resets import chat_key_of
from ._session_key import key_of, turn_id_of

BusyMode = Literal["interrupt", "queue", "steer"]
QUEUE_LIMIT = 32


@dataclasses.dataclass(frozen=True)
class Start:
    message: PlatformMessage
    turn_id: str
    interrupt: bool
    session_id: str = ""
    """The chat's current session (empty: the chat's key, its first session)."""


@dataclasses.dataclass(frozen=True)
class Reply:
    message: PlatformMessage
    """The message answered (the chat, the thread, the id to reply to)."""
    text: str
    final: bool = True
    """False for notices (queue full, stopped) that are not a turn's answer."""
    turn_id: str = ""
    """The turn a final reply answers (the outbox's key)."""


@dataclasses.dataclass(frozen=True)
class Cancel:
    session_id: str
    turn_id: str


Action = Start | Reply | Cancel


@dataclasses.dataclass(frozen=True)
class Chat:
    running: str
    message: PlatformMessage
    queue: tuple[PlatformMessage, ...] = ()
    stopping: bool = False
    session_id: str = ""
    """The session the chat's turns run in (empty: the chat's key)."""

    def session(self) -> str:
        return self.session_id or key_of(self.message)


@dataclasses.dataclass(frozen=True)
class Chats:
    mode: BusyMode = "queue"
    limit: int = QUEUE_LIMIT
    chats: dict[str, Chat] = dataclasses.field(default_factory=dict)

    def on_message(self, message: PlatformMessage, session_id: str = "") -> tuple[Chats, list[Action]]:
        """A message for the agent; ``session_id``: the chat's current session (empty: its key)."""
        key = key_of(message)
        chat = self.chats.get(key)
        turn = turn_id_of(message)
        if chat is None:
            return self._with(key, Chat(running=turn, message=message, session_id=session_id)), [Start(message, turn, interrupt=False, session_id=session_id)]
        if self.mode == "interrupt":
            again = Chat(running=turn, message=message, queue=chat.queue, session_id=chat.session_id)
            return self._with(key, again), [Start(message, turn, interrupt=True, session_id=chat.session_id)]
        if len(chat.queue) >= self.limit:
            text = f"Still working on your earlier message and {self.limit} more are waiting; this one was not taken. Send it again later, or /stop."
            return self, [Reply(message, text, final=False)]
        return self._with(key, dataclasses.replace(chat, queue=(*chat.queue, message))), []

    def answer_to(self, key: str, turn_id: str) -> PlatformMessage | None:
        """The message a *completed* end of ``turn_id`` will answer, decided now (``_answer_plan``):
        the chat's message while ``turn_id`` runs it. None in ``interrupt`` mode, where a new
        message supersedes the turn before its end; in the other modes only that end changes the
        chat's running turn, and :meth:`on_end` of a completed turn always replies to it."""
        chat = self.chats.get(key)
        if self.mode == "interrupt" or chat is None or chat.running != turn_id:
            return None
        return chat.message

    def on_stop(self, message: PlatformMessage) -> tuple[Chats, list[Action]]:
        """``/stop``: cancel the chat's running turn (its end is answered "Stopped."), drop the queue."""
        key = key_of(message)
        chat = self.chats.get(key)
        if chat is None:
            return self, [Reply(message, "Nothing is running.", final=False)]
        return self._with(key, dataclasses.replace(chat, queue=(), stopping=True)), [Cancel(chat.session(), chat.running)]

    def on_end(self, session_id: str, turn_id: str, text: str, *, cancelled: bool = False) -> tuple[Chats, list[Action]]:
        """A followed turn ended with ``text`` (its answer, or what went wrong)."""
        key = chat_key_of(session_id)
        chat = self.chats.get(key)
        if chat is None or chat.running != turn_id:
            return self, []  # superseded (interrupted) or already answered
        actions: list[Action] = []
        if not cancelled or chat.stopping:
            actions.append(Reply(chat.message, "Stopped." if cancelled else text, turn_id=turn_id))
        if not chat.queue:
            chats = dict(self.chats)
            del chats[key]
            return dataclasses.replace(self, chats=chats), actions
        if self.mode == "steer":
            last = chat.queue[-1]
            joined = "\n\n".join(m.text for m in chat.queue)
            nxt, rest = msgspec.structs.replace(last, text=joined), tuple[PlatformMessage, ...]()
        else:
            nxt, rest = chat.queue[0], chat.queue[1:]
        actions.append(Start(nxt, turn_id_of(nxt), interrupt=False, session_id=chat.session_id))
        return self._with(key, Chat(running=turn_id_of(nxt), message=nxt, queue=rest, session_id=chat.session_id)), actions

    def _with(self, key: str, chat: Chat) -> Chats:
        return dataclasses.replace(self, chats={**self.chats, key: chat})
