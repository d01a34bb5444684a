"""Which dependencies a session runs with, by its id; pure.

A runtime that serves chat platforms (``hermes serve`` with the gateway) has one
:class:`SessionDeps` per platform besides its own: the platform's toolset, its line of the
system prompt, its ``source`` in the store. A gateway session's id is its chat's key,
``agent:main:<platform>:<chat_type>:<chat_id>[...]``, so the id alone names the platform: a
session passivated and loaded again, restarted by its supervisor or started by a new process
gets the same deps. A child session (``<parent>.child-1``, ``<parent>.review-2``) starts with
its parent's id, so it takes its parent's platform too (then its own restrictions).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ._session_deps import SessionDeps

GATEWAY_KEY_PREFIX = "agent:main:"
"""How a gateway chat's session id starts; the platform's name follows, up to the next ``:``."""


def platform_of(session_id: str) -> str | None:
    """The chat platform a session id names (``telegram`` for ``agent:main:telegram:dm:42``), else None."""
    if not session_id.startswith(GATEWAY_KEY_PREFIX):
        return None
    name, colon, _ = session_id[len(GATEWAY_KEY_PREFIX) :].partition(":")
    return name if colon and name else None


@dataclasses.dataclass(frozen=True)
class DepsTable:
    """The sessions' template argument in a runtime with chat platforms: ``default`` (the API
    server's) and one deps per platform, every one sharing the hubs, model clients and hooks."""

    default: SessionDeps
    platforms: Mapping[str, SessionDeps] = dataclasses.field(default_factory=dict)


def deps_for(deps: SessionDeps | DepsTable, session_id: str) -> SessionDeps:
    """What session ``session_id`` runs with: its platform's deps when the table has them, else the default."""
    if isinstance(deps, SessionDeps):
        return deps
    return deps.platforms.get(platform_of(session_id) or "", deps.default)
