"""tui: ``hermes chat`` and ``hermes attach``, a full-screen terminal UI (and a plain mode).

The UI talks to a :class:`SessionHandle`: :class:`LocalSession` runs the agent runtime in
this process, :class:`RemoteSession` talks HTTP to a running ``hermes serve``.

The heavy names (the Textual app, the runtime, the HTTP client) are loaded on first use,
so importing this package (the ``hermes`` parser does) costs only the standard library,
the kernel and the typed messages.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._cli import add_parsers as add_parsers
from ._cli import attach_main as attach_main
from ._cli import chat_main as chat_main
from ._handle import Attachment as Attachment
from ._handle import EventSink as EventSink
from ._handle import RequestRefused as RequestRefused
from ._handle import ServerUnreachable as ServerUnreachable
from ._handle import SessionHandle as SessionHandle
from ._handle import SetupFailed as SetupFailed
from ._handle import StreamItem as StreamItem
from ._handle import StreamNotice as StreamNotice
from ._handle import TuiError as TuiError

if TYPE_CHECKING:
    from ._app import ChatApp as ChatApp
    from ._local import LocalSession as LocalSession
    from ._local import open_local_session as open_local_session
    from ._plain import run_plain as run_plain
    from ._remote import RemoteSession as RemoteSession

_LAZY = {
    "ChatApp": "._app",
    "LocalSession": "._local",
    "RemoteSession": "._remote",
    "open_local_session": "._local",
    "run_plain": "._plain",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "Attachment",
    "ChatApp",
    "EventSink",
    "LocalSession",
    "RemoteSession",
    "RequestRefused",
    "ServerUnreachable",
    "SessionHandle",
    "SetupFailed",
    "StreamItem",
    "StreamNotice",
    "TuiError",
    "add_parsers",
    "attach_main",
    "chat_main",
    "open_local_session",
    "run_plain",
]
