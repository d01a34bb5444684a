"""Which session a chat completion without ``X-Hermes-Session-Id`` continues.

Chat completions are stateless in OpenAI's API: the client's ``messages`` are the whole
conversation. We keep a session per conversation only as an optimisation, and continue it
only when the client sends *exactly* what that session has shown it so far. Anything else
(another chat that starts with the same words, a regenerate, an edit of an earlier
message) starts a new session seeded from what was sent, linked to the one it branched
from. So the model never sees another conversation's messages, and sees what the client
sent.

How: each message the client can see is folded into a chained hash,
``h(i) = blake2b(h(i-1) + message i)``, starting from the API key's and the system prompt's
digest (sessions are never shared across keys). After a turn the session's *current* key
is the chain over the history, the user message and the answer. A request's history hashes
to one key: a dict lookup. A key names a session only while it is that session's current
key; taking a session for a turn removes its key until the turn completes, so two requests
with one history never share a session.

Invariant: a chat completion without a session header runs in a session whose visible
transcript equals the request's history, or in a new session seeded from that history.
"""

from __future__ import annotations

import collections
import hashlib
from collections.abc import Sequence

import msgspec

from protocols import ChatMessage

MAX_KEYS = 200_000
"""Keys remembered (least recently used are forgotten: such a client gets a new session)."""


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def visible(message: ChatMessage) -> bytes:
    """What of a message a chat client sees and sends back (role, text, images, client tool calls)."""
    calls = [(c.id, c.name, c.arguments) for c in message.tool_calls]
    return msgspec.json.encode((message.role, message.content or "", calls, message.tool_call_id or "", message.images))


class Chain:
    """The chained hash of a conversation, message by message."""

    __slots__ = ("prefixes",)

    def __init__(self, scope: str, system: str | None) -> None:
        self.prefixes = [_digest(f"{scope}\x00{system or ''}".encode())]
        """``prefixes[i]``: the key of the first ``i`` messages."""

    def add(self, message: ChatMessage) -> Chain:
        self.prefixes.append(_digest(self.prefixes[-1] + visible(message)))
        return self

    def extend(self, messages: Sequence[ChatMessage]) -> Chain:
        for message in messages:
            self.add(message)
        return self

    @property
    def key(self) -> bytes:
        return self.prefixes[-1]

    def after(self, *messages: ChatMessage) -> bytes:
        """The key this chain would have with ``messages`` added (the chain is not changed)."""
        key = self.key
        for message in messages:
            key = _digest(key + visible(message))
        return key


class ConversationIndex:
    """Chain keys -> sessions; touched only in the reactor thread (no lock)."""

    def __init__(self, max_keys: int = MAX_KEYS) -> None:
        self._sessions: collections.OrderedDict[bytes, str] = collections.OrderedDict()
        """Every key seen -> its session (current or not: older keys tell where a branch came from)."""
        self._current: dict[str, bytes] = {}
        """session -> its current key, while no turn runs in it."""
        self._max = max_keys

    def take(self, chain: Chain) -> tuple[str | None, str | None]:
        """``(session to continue, session this branches from)``; at most one is not None.

        A session returned to continue is taken: its key is void until :meth:`advance`.
        """
        if len(chain.prefixes) == 1:
            return None, None  # a conversation's first message: always a new session
        key = chain.key
        session = self._sessions.get(key)
        if session is not None and self._current.get(session) == key:
            del self._current[session]
            self._sessions.move_to_end(key)
            return session, None
        for prefix in reversed(chain.prefixes[1:]):
            parent = self._sessions.get(prefix)
            if parent is not None:
                return None, parent
        return None, None

    def matches(self, session: str, key: bytes) -> bool:
        """Whether ``key`` is what ``session``'s client has seen (a named session's fast check)."""
        return self._current.get(session) == key

    def advance(self, session: str, key: bytes) -> None:
        """``session`` completed a turn: ``key`` is now what its client has seen."""
        self._sessions[key] = session
        self._sessions.move_to_end(key)
        self._current[session] = key
        while len(self._sessions) > self._max:
            old_key, old_session = self._sessions.popitem(last=False)
            if self._current.get(old_session) == old_key:
                del self._current[old_session]

    def forget(self, session: str) -> None:
        """The session is gone (deleted): it is continued and branched from no more."""
        self._current.pop(session, None)
        for key in [k for k, s in self._sessions.items() if s == session]:
            del self._sessions[key]

    def __len__(self) -> int:
        return len(self._sessions)
