"""The test model server: scripts, request records, and its two ways to run.

:class:`ModelServer` runs either in its own thread with its own ``trio.run``
(``start``/``stop`` or ``with``), for synchronous tests and benchmarks, or inside a trio
program that already runs (:func:`open_model_server`). Both serve the same routes from
the same state; the state is guarded by a lock because in thread mode the test thread
scripts and reads while the server thread answers.

Invariant: ``stop`` and leaving ``open_model_server`` never hang: they cancel the one
cancel scope every connection runs under, which ends latencies and stalls at once and
closes every socket.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import traceback
from collections import deque
from collections.abc import AsyncIterator, Iterable
from types import TracebackType
from typing import Any, Literal

import msgspec
import trio

from .._errors import UsageError
from ._http import Incoming, serve_connection
from ._render import Planned, echo, error, models, render
from ._script import RecordedRequest, Reply

log = logging.getLogger(__name__)

SESSION_HEADER = "x-hermes-session-id"
"""The request header that selects a per-session script (compared case-insensitively)."""


class ModelServer:
    """An OpenAI-compatible chat completions server on 127.0.0.1 that answers from scripts.

    Args:
        seed: Ids and chunk splits derive from it (and from the session and the reply's
            place in its queue), so the same seed gives the same bytes.
        model: The one model ``GET /v1/models`` lists, and the ``model`` of completions
            whose request names none.
    """

    def __init__(self, *, seed: int = 0, model: str = "test-model") -> None:
        self.seed = seed
        self.model = model
        self._lock = threading.Lock()
        self._queues: dict[str | None, deque[Reply]] = {}
        self._taken: dict[str | None, int] = {}
        self._echoes: dict[str | None, int] = {}
        self._requests: list[RecordedRequest] = []
        self._errors: list[str] = []
        self._connections = 0
        self._port: int | None = None
        self._mode: Literal["thread", "trio"] | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._crash: BaseException | None = None

    # -- scripting and records (any thread) ------------------------------------------------

    def script(self, replies: Iterable[Reply], *, session: str | None = None) -> None:
        """Queue ``replies`` for requests of ``session`` (None: the default queue).

        A request with an ``X-Hermes-Session-Id`` header takes the next reply of that
        session's queue if one was ever scripted, else of the default queue if that was
        scripted, else it is answered in echo mode (``echo: <last user message>``). A
        scripted queue that ran dry answers HTTP 500. Calling again appends.
        """
        replies = list(replies)
        with self._lock:
            self._queues.setdefault(session, deque()).extend(replies)
            self._taken.setdefault(session, 0)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def internal_errors(self) -> list[str]:
        """Tracebacks of unexpected exceptions in the server (bugs); clients going away are not."""
        with self._lock:
            return list(self._errors)

    @property
    def port(self) -> int:
        """The TCP port on 127.0.0.1 (an ephemeral one, known once the server listens)."""
        if self._port is None:
            msg = "the test model server is not listening yet: call start() or use open_model_server()"
            raise UsageError(msg)
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: what the OpenAI SDK takes as ``base_url``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- thread mode -------------------------------------------------------------------------

    def start(self, *, timeout: float = 10.0) -> ModelServer:
        """Serve from a new thread; returns once listening. Returns the server itself.

        Raises:
            UsageError: the server was started already (in either mode).
            TimeoutError: it did not listen within ``timeout`` seconds.
        """
        self._claim("thread")
        self._thread = threading.Thread(target=self._run_thread, name="test-model-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            self.stop(timeout=timeout)
            msg = f"the test model server did not start listening within {timeout} s"
            raise TimeoutError(msg)
        if self._crash is not None:
            self.stop(timeout=timeout)  # joins the thread and raises the crash
        return self

    def stop(self, *, timeout: float = 10.0) -> None:
        """Close the listener and every connection and join the thread (idempotent).

        Raises:
            TimeoutError: the thread did not end within ``timeout`` seconds.
            BaseException: whatever ended the server's trio run, if it crashed.
        """
        thread = self._thread
        if thread is None:
            return
        self._ready.wait(timeout)
        token, scope = self._token, self._scope
        if token is not None and scope is not None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(scope.cancel)
        thread.join(timeout)
        if thread.is_alive():
            msg = f"the test model server thread did not stop within {timeout} s"
            raise TimeoutError(msg)
        crash, self._crash = self._crash, None
        if crash is not None:
            raise crash

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _claim(self, mode: Literal["thread", "trio"]) -> None:
        with self._lock:
            if self._mode is not None:
                msg = f"this test model server was already started ({self._mode} mode); make a new ModelServer"
                raise UsageError(msg)
            self._mode = mode

    def _run_thread(self) -> None:
        try:
            trio.run(self._thread_main)
        except BaseException as exc:
            self._crash = exc
        finally:
            self._ready.set()

    async def _thread_main(self) -> None:
        with trio.CancelScope() as scope:
            self._token = trio.lowlevel.current_trio_token()
            self._scope = scope
            async with trio.open_nursery() as nursery:
                await nursery.start(self._serve)
                self._ready.set()
                await trio.sleep_forever()  # until stop() cancels the scope

    # -- serving (the trio thread) -----------------------------------------------------------

    async def _serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        try:
            port: int = listeners[0].socket.getsockname()[1]
            with self._lock:
                self._port = port
            async with trio.open_nursery() as nursery:
                # serve_listeners closes the listeners from here on.
                await nursery.start(trio.serve_listeners, self._handle, listeners)
                task_status.started()
        finally:
            for listener in listeners:
                await trio.aclose_forcefully(listener)

    async def _handle(self, stream: trio.SocketStream) -> None:
        with self._lock:
            self._connections += 1
            number = self._connections
        try:
            await serve_connection(stream, number, self._respond)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
            pass  # the client went away or stopped reading: its business, not a server fault
        except Exception:
            log.exception("test model server: a connection handler failed")
            with self._lock:
                self._errors.append(traceback.format_exc())

    def _respond(self, incoming: Incoming) -> Planned:
        session = incoming.headers.get(SESSION_HEADER)
        try:
            body: Any = msgspec.json.decode(incoming.body) if incoming.body else None
            bad_json = None
        except msgspec.DecodeError as exc:
            body, bad_json = None, str(exc)
        record = RecordedRequest(session=session, method=incoming.method, path=incoming.path, body=body, connection=incoming.connection)
        with self._lock:
            self._requests.append(record)
        routes = {"/v1/models": "GET", "/v1/chat/completions": "POST"}
        if incoming.path not in routes:
            message = f"test model server: no route {incoming.method} {incoming.path}; it serves " + ", ".join(
                f"{method} {path}" for path, method in routes.items()
            )
            return error(404, message, code="unknown_url", error_type="invalid_request_error")
        if incoming.method != routes[incoming.path]:
            message = f"test model server: {incoming.path} takes {routes[incoming.path]}, not {incoming.method}"
            return error(405, message, code="method_not_allowed", error_type="invalid_request_error")
        if incoming.path == "/v1/models":
            return models(self.model)
        if bad_json is not None:
            return error(400, f"test model server: the request body is not valid JSON ({bad_json})", code="invalid_json")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return error(400, "test model server: the body must be a JSON object with a 'messages' list", code="invalid_body")
        return self._complete(session, body)

    def _complete(self, session: str | None, body: dict[str, Any]) -> Planned:
        with self._lock:
            key = session if session in self._queues else None
            queue = self._queues.get(key)
            if queue is None:
                reply: Reply = echo(body)
                index = self._echoes[session] = self._echoes.get(session, 0) + 1
                seed = f"{self.seed}/echo/{session}/{index}"
            elif not queue:
                return error(500, _exhausted(key, self._taken[key]), code="script_exhausted")
            else:
                reply = queue.popleft()
                index = self._taken[key] = self._taken[key] + 1
                seed = f"{self.seed}/script/{key}/{index}"
        return render(reply, body, rng=random.Random(seed), model=self.model)


@contextlib.asynccontextmanager
async def open_model_server(*, seed: int = 0, model: str = "test-model") -> AsyncIterator[ModelServer]:
    """Serve a :class:`ModelServer` inside the running trio program, listening on entry.

    Leaving the block closes the listener and every connection, stalled ones included.
    """
    server = ModelServer(seed=seed, model=model)
    server._claim("trio")
    async with trio.open_nursery() as nursery:
        await nursery.start(server._serve)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()


def _exhausted(session: str | None, taken: int) -> str:
    plural = "reply" if taken == 1 else "replies"
    if session is None:
        return f"test model server: the default script is exhausted after {taken} {plural}; script more with server.script([...])"
    return (
        f"test model server: the script for session {session!r} is exhausted after {taken} {plural}; script more with server.script([...], session={session!r})"
    )
