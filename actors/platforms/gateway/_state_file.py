"""An adapter's durable state, ``HERMES_HOME/gateway/<platform>.json``: what a restarted adapter
needs to answer every message exactly once.

- ``seen`` / ``offset``: the inbound dedup log and the platform's poll position;
- ``chats``: each chat's followed turn (the message that started it) and what waits behind it;
- ``outbox``: final replies decided but not yet confirmed sent;
- ``streams``: the platform message each streamed turn's answer is shown in (the final reply
  edits it, so a restart mid-stream still ends in one message with the complete answer).
- ``sessions``: each chat's session generation and last message time (``_resets``);
- ``held``: messages of a burst not yet sent to the agent (``_burst``; a restart sends them at once).

They are written together (one atomic write), *before* the effects they decide, except two
(``_effects.py``): a message is marked seen in the same write that records the turn it starts,
so a restart either sees neither (the platform delivers it again; the session knows the turn id
if its ``StartTurn``, told before the write, reached it, and the restarted adapter follows that
turn) or both (the restarted adapter re-attaches to the turn and sends its answer); a final
reply is sent while the write that records it and its chat's end is made, and once the platform
took it, that write (or a newer one) is made before the reply leaves the outbox. Writes are
serialised; an older version never replaces a newer one.

A graceful stop (:meth:`StateFile.settle`) waits for the final replies whose send is in flight
(:meth:`StateFile.sending`: the platform may have taken them; ``mark_sent`` follows), then
writes the adapter's last state: what was decided is on disk before the incarnation ends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import trio

from actors._atomic import write_atomic
from protocols import PlatformMessage

from ._chats import Chat, Chats
from ._dedup import SeenLog
from ._resets import ChatSession
from ._session_key import key_of


@dataclasses.dataclass(frozen=True)
class Outgoing:
    """A final reply owed to a chat: sent at most once more after a restart (dedup by ``turn_id``)."""

    turn_id: str
    message: PlatformMessage
    text: str


@dataclasses.dataclass(frozen=True)
class Durable:
    seen: SeenLog = SeenLog()
    chats: tuple[Chat, ...] = ()
    outbox: tuple[Outgoing, ...] = ()
    streams: tuple[tuple[str, str], ...] = ()
    """(turn id, platform message id) of answers streamed by edits."""
    version: int = 0
    sessions: dict[str, ChatSession] = dataclasses.field(default_factory=dict)
    held: tuple[PlatformMessage, ...] = ()


def _message(data: Any) -> PlatformMessage:
    return msgspec.convert(data, PlatformMessage)


def encode(state: Durable) -> bytes:
    """The file's JSON (msgspec encodes the messages as they are: ~10x faster than ``json``)."""
    data = {
        "offset": state.seen.offset,
        "seen": state.seen.ids,
        "chats": [{"running": c.running, "message": c.message, "queue": c.queue, "session_id": c.session_id} for c in state.chats],
        "outbox": [{"turn_id": o.turn_id, "message": o.message, "text": o.text} for o in state.outbox],
        "streams": state.streams,
        "sessions": {key: (s.generation, s.last_at) for key, s in state.sessions.items()},
        "held": state.held,
    }
    return _ENCODER.encode(data)


_ENCODER = msgspec.json.Encoder()


def decode(text: str) -> Durable:
    data = json.loads(text)
    seen = SeenLog(ids=tuple(str(i) for i in data.get("seen", ())), offset=int(data.get("offset", 0)))
    chats = tuple(
        Chat(
            running=str(c["running"]),
            message=_message(c["message"]),
            queue=tuple(_message(m) for m in c.get("queue", ())),
            session_id=str(c.get("session_id", "")),
        )
        for c in data.get("chats", ())
    )
    outbox = tuple(Outgoing(turn_id=str(o["turn_id"]), message=_message(o["message"]), text=str(o["text"])) for o in data.get("outbox", ()))
    streams = tuple((str(turn), str(mid)) for turn, mid in data.get("streams", ()))
    sessions = {str(key): ChatSession(generation=int(g), last_at=float(at)) for key, (g, at) in data.get("sessions", {}).items()}
    held = tuple(_message(m) for m in data.get("held", ()))
    return Durable(seen=seen, chats=chats, outbox=outbox, streams=streams, sessions=sessions, held=held)


def restore(chats: Chats, saved: Durable) -> Chats:
    """``chats`` (the configured policy) with the saved chats' turns and queues."""
    return dataclasses.replace(chats, chats={key_of(c.message): c for c in saved.chats})


class StateFile:
    """The file, written from the reactor. Once a reply is confirmed sent (:meth:`mark_sent`),
    no later write holds it, whichever version the actor saves next: the window in which a crash
    sends a reply twice is one atomic write after the platform confirmed it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = trio.Lock()
        self._written = -1
        self._last = Durable()
        self._sent: set[str] = set()
        self._pending: Durable | None = None
        """The newest state given to :meth:`save`."""
        self._sending = 0
        self._idle = trio.Event()
        self._idle.set()

    def load(self) -> Durable:
        try:
            self._last = decode(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return Durable()
        except (OSError, ValueError, KeyError, TypeError, msgspec.ValidationError) as exc:
            msg = f"{self.path} cannot be read ({exc}); move it away (messages seen before may then be answered again)"
            raise RuntimeError(msg) from None
        return self._last

    async def save(self, state: Durable) -> Durable:
        """Write ``state``, or a newer state saved meanwhile (saves queued behind a write are
        written as one: each state holds all that came before it)."""
        if self._pending is None or state.version > self._pending.version:
            self._pending = state
        async with self._lock:
            newest = self._pending
            if newest is not None and newest.version > self._written:
                owed = {o.turn_id for o in newest.outbox}
                self._sent &= owed  # the actor dropped the others itself
                await self._write(self._without_sent(newest))
                self._written = newest.version
        return state

    async def mark_sent(self, turn_id: str, newest: Durable | None = None) -> None:
        """The reply of ``turn_id`` reached the platform: take it out of the file now. ``newest``:
        the adapter's newest state, decided when (or after) the reply was: written now (without
        the reply) if no save wrote it yet, as the reply went before its chat's end was saved."""
        async with self._lock:
            self._sent.add(turn_id)
            if self._pending is not None and (newest is None or self._pending.version > newest.version):
                newest = self._pending
            if newest is not None and newest.version > self._written:
                await self._write(self._without_sent(newest))
                self._written = newest.version
            elif any(o.turn_id == turn_id for o in self._last.outbox):
                await self._write(self._without_sent(self._last))

    @contextlib.asynccontextmanager
    async def sending(self) -> AsyncIterator[None]:
        """Around a final reply's send and its ``mark_sent``: :meth:`settle` waits for it."""
        if not self._sending:
            self._idle = trio.Event()
        self._sending += 1
        try:
            yield
        finally:
            self._sending -= 1
            if not self._sending:
                self._idle.set()

    async def settle(self, state: Durable) -> None:
        """A graceful stop: once no final reply's send is in flight (each sent one marked sent),
        write ``state`` (the adapter's last, without the sent replies) unless a newer one was.
        The caller bounds it (a send the platform never answers)."""
        while self._sending:
            await self._idle.wait()
        await self.save(state)

    def _without_sent(self, state: Durable) -> Durable:
        if not self._sent:
            return state
        outbox = tuple(o for o in state.outbox if o.turn_id not in self._sent)
        return dataclasses.replace(state, outbox=outbox, streams=tuple(p for p in state.streams if p[0] not in self._sent))

    async def _write(self, state: Durable) -> None:
        await trio.to_thread.run_sync(_encode_and_write, self.path, state)  # both off the reactor
        self._last = state


def _encode_and_write(path: Path, state: Durable) -> None:
    write_atomic(path, encode(state))
