"""platforms: the edges of the tree where the outside world talks to sessions (the API server, the TUI).

Names load on first use: ``hermes chat`` imports ``platforms.tui`` without paying for the
HTTP server (hypercorn and its dependencies, ~190 ms of start-up).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._keys import load_or_create_key as load_or_create_key
    from ._server import API_SERVER_PATH as API_SERVER_PATH
    from ._server import ApiServer as ApiServer
    from ._server import ApiServerInbox as ApiServerInbox
    from ._server import ServerSettings as ServerSettings

_LAZY = {
    "API_SERVER_PATH": "._server",
    "ApiServer": "._server",
    "ApiServerInbox": "._server",
    "ServerSettings": "._server",
    "load_or_create_key": "._keys",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


__all__ = ["API_SERVER_PATH", "ApiServer", "ApiServerInbox", "ServerSettings", "load_or_create_key"]
