"""Building the session handle in its own thread, without losing it if the app ends first.

``connect`` imports the model SDK and the tools and starts the runtime: a second or two of
work that must not hold up the prompt. It runs in a daemon thread; the app awaits the
outcome on its loop. If the app has ended by then, the handle is still kept, so that the
command can stop the runtime it started (:meth:`HandleBuilder.finish`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from ._handle import SessionHandle


class HandleBuilder:
    def __init__(self, connect: Callable[[], SessionHandle]) -> None:
        self._connect = connect
        self._thread: threading.Thread | None = None
        self.built: SessionHandle | None = None
        """What ``connect`` returned (None until it did, or if it raised)."""

    def start(self) -> asyncio.Future[SessionHandle]:
        """Start ``connect``; the future (of the running loop) gets its handle or its exception."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[SessionHandle] = loop.create_future()

        def deliver(handle: SessionHandle | None, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                assert handle is not None
                future.set_result(handle)

        def run() -> None:
            handle, error = None, None
            try:
                handle = self.built = self._connect()
            except BaseException as exc:
                error = exc
            try:
                loop.call_soon_threadsafe(deliver, handle, error)
            except RuntimeError:
                pass  # the loop is closed: finish() hands the handle to whoever stops it

        self._thread = threading.Thread(target=run, name="hermes-connect", daemon=True)
        self._thread.start()
        return future

    def finish(self, timeout: float) -> SessionHandle | None:
        """Wait (up to ``timeout``) for ``connect`` to return; what it built."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.built
