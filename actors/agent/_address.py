"""Reaching a session: its address, started (or rehydrated) on demand.

Invariant: one session actor per session id: sessions are children of a dynamic supervisor,
and :func:`session_address` reserves the address atomically.

Types: a session's address is an ``Address[SessionInbox]``, so telling it something it does
not take (a store command, say) is a type error; :func:`tell_session` takes only what
clients send (``SessionCommand``).
"""

from __future__ import annotations

from actors import ActorPath, Address, AddressClosed, Registry
from protocols import SessionCommand, SessionInbox, StartChild, SupervisorInbox
from supervisor import start_child

SESSIONS_PATH: ActorPath[SupervisorInbox] = ActorPath("/sessions")
"""The dynamic supervisor of the sessions (``agent_specs``): ``registry.lookup(SESSIONS_PATH)``."""


def session_address(registry: Registry, sessions: Address[StartChild], session_id: str) -> Address[SessionInbox]:
    """The address of a session's actor, starting (or rehydrating) it if needed."""
    return start_child(registry, sessions, session_id, session_id)


def tell_session(registry: Registry, sessions: Address[StartChild], session_id: str, message: SessionCommand) -> Address[SessionInbox]:
    """Tell a session, restarting it if it was just passivated; returns its address."""
    for _ in range(3):
        address = session_address(registry, sessions, session_id)
        try:
            address.tell(message)
            return address
        except AddressClosed:
            continue  # passivated between lookup and tell: the next lookup starts it again
    msg = f"session {session_id} could not be reached after 3 attempts"
    raise AddressClosed(msg)
