"""Reaching a session: its address, started (or rehydrated) on demand.

Invariant: one session actor per session id: sessions are children of a dynamic supervisor,
and :func:`session_address` reserves the address atomically.
"""

from __future__ import annotations

from typing import Any

from actors import Address, AddressClosed, Registry
from supervisor import start_child


def session_address(registry: Registry, sessions: Address[Any], session_id: str) -> Address[Any]:
    """The address of a session's actor, starting (or rehydrating) it if needed."""
    return start_child(registry, sessions, session_id, session_id)


def tell_session(registry: Registry, sessions: Address[Any], session_id: str, message: Any) -> Address[Any]:
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
