"""Which session a chat completion runs in, and what it may assume of that session's history.

- With ``X-Hermes-Session-Id``: that session. A history the client sends must be the
  session's (user messages and answers, in order); one that contradicts it is a 409 naming
  the first differing message. A request with only the new message is always fine.
- Without it: :class:`ConversationIndex` (``_conversations.py``) finds the session whose
  visible transcript is exactly the request's history, or a new session is seeded from it.

Either way :class:`Placement` tells the handler what to send the session and what to
remember once the turn completes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Sequence

from protocols import ChatMessage, ToolCall

from ._app import ApiContext, check_session_id
from ._asgi import HttpError, Request
from ._chat_request import Conversation
from ._conversations import Chain
from ._sessions_api import read_store


@dataclasses.dataclass(frozen=True, slots=True)
class Placement:
    session_id: str
    seed: bool
    """Send the client's history along: the session is new and starts from it."""
    branched_from: str | None
    chain: Chain | None
    """The history's key chain, when what the client has seen after the turn can be known."""


def _scope(request: Request) -> str:
    """Sessions are never shared across API keys: the key's digest scopes every chain."""
    token = request.headers.get("authorization", "")
    return hashlib.blake2b(token.encode(), digest_size=16).hexdigest()


def _shown(messages: Sequence[ChatMessage]) -> list[tuple[int, str, str]]:
    """(index, role, text) of what a chat client saw: its messages and the final answers."""
    return [(i, m.role, m.content or "") for i, m in enumerate(messages) if m.role == "user" or (m.role == "assistant" and not m.tool_calls and m.content)]


def first_difference(stored: Sequence[ChatMessage], sent: Sequence[ChatMessage]) -> str | None:
    """None when ``sent`` is exactly what the session showed; else which message differs, and how."""
    mine, theirs = _shown(stored), _shown(sent)
    for position, (ours, yours) in enumerate(zip(mine, theirs, strict=False)):
        if ours[1:] != yours[1:]:
            return f"messages[{yours[0]}] ({yours[1]}) differs from the session's shown message #{position + 1} ({ours[1]}: {ours[2][:60]!r})"
    if len(theirs) > len(mine):
        return f"messages[{theirs[len(mine)][0]}] ({theirs[len(mine)][1]}) is not in the session"
    if len(theirs) < len(mine):
        return f"the history stops after {len(theirs)} of the session's {len(mine)} shown messages"
    return None


async def place(ctx: ApiContext, request: Request, conversation: Conversation) -> Placement:
    """Pick the session (see the module docstring); raise the 409 of a contradicting history."""
    chain = Chain(_scope(request), conversation.system).extend(conversation.history)
    given = request.headers.get("x-hermes-session-id")
    if given is not None:
        session_id = check_session_id(given, "X-Hermes-Session-Id")
        if not conversation.history:
            return Placement(session_id, seed=True, branched_from=None, chain=None)
        if not ctx.conversations.matches(session_id, chain.key):
            stored = await read_store(ctx, lambda reader: reader.load_messages(session_id))
            problem = first_difference(stored, conversation.history) if stored else None
            if problem is not None:
                raise HttpError(
                    409,
                    f"the messages contradict session {session_id!r}: {problem}; send only the new message, the session's exact "
                    "history, or no X-Hermes-Session-Id to start a new conversation",
                    param="messages",
                    code="history_conflict",
                )
        return Placement(session_id, seed=True, branched_from=None, chain=chain)
    found, parent = ctx.conversations.take(chain)
    if found is not None:
        return Placement(found, seed=False, branched_from=None, chain=chain)
    return Placement(f"api-{uuid.uuid4().hex[:24]}", seed=True, branched_from=parent, chain=chain)


def remember(ctx: ApiContext, placement: Placement, conversation: Conversation, text: str, calls: tuple[ToolCall, ...]) -> None:
    """The turn completed: what the client has now seen is the session's current key."""
    if placement.chain is not None:
        answer = ChatMessage(role="assistant", content=text, tool_calls=calls)
        ctx.conversations.advance(placement.session_id, placement.chain.after(*conversation.opening, answer))
