"""The test model server: scripts, request records, and its two ways to run.

:class:`ModelServer` runs either in its own thread with its own ``trio.run``
(``start``/``stop`` or ``with``), for synchronous tests and benchmarks, or inside a trio
program that already runs (:func:`open_model_server`). Both serve the same routes from
the same state; the state is guarded by a lock because in thread mode the test thread
scripts and reads while the server thread answers.

Which reply answers a chat completion, first match wins:

1. a standing fault of the request's key (``fail_key``; the key is the one of its
   ``Authorization: Bearer`` header): every request with that key, until ``clear_key``
   (an :class:`HttpError` standing fault answers ``GET /v1/models`` with that key too);
2. ``refuse_stream``: a ``"stream": true`` request gets the 400 of an endpoint that cannot
   stream, and takes no scripted reply;
3. ``context_window``: a request that does not fit gets the overflow 400 (below), and takes
   no scripted reply; it comes after 2 as a server checks parameters before it tokenizes;
4. the key's queue, if one was ever scripted for it (``script(..., key=...)``);
5. the model's queue, if one was ever scripted for the ``model`` the body names
   (``script(..., model=...)``: e.g. the summary model of context compression, whose calls
   then never take a reply meant for the conversation);
6. the session's queue, if one was ever scripted for it (the ``X-Hermes-Session-Id`` header);
7. the default queue, if it was ever scripted;
8. echo mode: ``echo: <last user message>``.

A queue of 4-7 that ran dry answers HTTP 500 ``script_exhausted`` naming it; the request
does not fall through to the next rule.

:meth:`ModelServer.wait_for_request` is the barrier a test waits on until a request it can
recognise has arrived (it is recorded before it is answered, so a reply scripted to stall
holds the caller there while the test acts).

The server counts the tokens of every chat completion itself, by a rule of its own that
knows nothing of the runtime's estimator (:attr:`RecordedRequest.prompt_tokens` records
it)::

    prompt_tokens = ceil(C / 4) + 4 * M

M is the number of messages (JSON objects in ``messages``) and C the number of characters
(code points) of: each message's ``content`` (a string, or the ``text`` of each part of a
list of parts; other parts count nothing), each of its ``tool_calls``' ``function.name``
and ``function.arguments``, and the request's ``tools`` written as compact JSON (for plain
schemas, ``json.dumps(tools, separators=(",", ":"), ensure_ascii=False)``). Tool results
are ``tool`` messages, so their content counts.

With ``context_window`` set, a request whose count plus the completion it asks room for
(``max_completion_tokens``, else ``max_tokens``, when a whole number >= 0) exceeds the
window is answered by ``HttpError.context_overflow(style=overflow_style, limit=window,
prompt_tokens=count, max_tokens=room)``, before any stream starts; a reply that is served
reports the count as ``usage.prompt_tokens``. Without a window, ``usage.prompt_tokens`` is
the number of whitespace-separated words of the messages' contents.

A request with ``cache_control`` marks is served from a prompt cache (``_prompt_cache``): its
usage reports ``prompt_tokens_details.cached_tokens`` (the longest marked prefix an earlier
request marked too) and ``cache_write_tokens``, in the unit of ``prompt_tokens``.

Invariant: ``stop`` and leaving ``open_model_server`` never hang: they cancel the one
cancel scope every connection runs under, which ends latencies, stalls and silences at
once and closes every socket.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
import traceback
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from types import TracebackType
from typing import Any, Literal, get_args

import msgspec
import trio

from .._errors import UsageError
from ._http import Incoming, serve_connection
from ._prompt_cache import PromptCache
from ._render import Planned, count_prompt_tokens, echo, error, models, prompt_words, render
from ._script import ContextStyle, HttpError, RecordedRequest, Reply, TextReply, ToolCallsReply

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
        clock: The unix time in seconds, read when a reply with dated headers is sent
            (an HTTP-date ``retry-after``, a reset time); pin it for exact bytes.
        refuse_stream: Answer ``"stream": true`` requests with a 400 saying streaming is
            not supported, as some OpenAI-compatible endpoints do; others work as usual.
        context_window: The model's context in tokens, enforced as providers do: a request
            whose count (the rule in the module docstring) plus its ``max_tokens`` exceeds
            it gets the overflow 400, and served replies report the count as usage. None:
            no limit.
        overflow_style: Whose overflow body answers past the window (see
            :meth:`HttpError.context_overflow`).
        port: The port to listen on (0: an ephemeral one); a fixed one lets it pose as a
            local model server where ``hermes setup`` looks (11434, 8080, 8000, 1234).
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        model: str = "test-model",
        clock: Callable[[], float] = time.time,
        refuse_stream: bool = False,
        context_window: int | None = None,
        overflow_style: ContextStyle = "openai",
        port: int = 0,
    ) -> None:
        if not callable(clock):
            msg = f"ModelServer(clock=...) takes a function returning unix seconds, such as time.time, not {clock!r}"
            raise UsageError(msg)
        if not isinstance(refuse_stream, bool):
            msg = f"ModelServer(refuse_stream=...) must be True or False, not {refuse_stream!r}"
            raise UsageError(msg)
        if context_window is not None and not (isinstance(context_window, int) and not isinstance(context_window, bool) and context_window >= 1):
            msg = f"ModelServer(context_window=...) must be a whole number of tokens >= 1, or None for no limit, not {context_window!r}"
            raise UsageError(msg)
        if overflow_style not in get_args(ContextStyle):
            msg = f"ModelServer(overflow_style=...) must be one of {', '.join(map(repr, get_args(ContextStyle)))}, not {overflow_style!r}"
            raise UsageError(msg)
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            msg = f"ModelServer(port=...) must be a TCP port 0-65535 (0: any free one), not {port!r}"
            raise UsageError(msg)
        self.requested_port = port
        self.seed = seed
        self.model = model
        self.clock = clock
        self.refuse_stream = refuse_stream
        self.context_window = context_window
        self.overflow_style: ContextStyle = overflow_style
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._queues: dict[str | None, deque[Reply]] = {}
        self._taken: dict[str | None, int] = {}
        self._key_queues: dict[str, deque[Reply]] = {}
        self._key_taken: dict[str, int] = {}
        self._key_faults: dict[str, Reply] = {}
        self._model_queues: dict[str, deque[Reply]] = {}
        self._model_taken: dict[str, int] = {}
        self._others: dict[str, int] = {}  # replies from no queue (standing faults, refusals), per kind, for their seeds
        self._echoes: dict[str | None, int] = {}
        self._requests: list[RecordedRequest] = []
        self._cache = PromptCache()
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

    def script(self, replies: Iterable[Reply], *, session: str | None = None, key: str | None = None, model: str | None = None) -> None:
        """Queue ``replies`` for requests of ``session``, of API ``key``, or naming ``model`` (none: the default queue).

        A request takes the next reply of its key's queue if one was ever scripted, else
        of the queue of the model its body names, else of its session's (the
        ``X-Hermes-Session-Id`` header), else of the default queue, else it is answered in
        echo mode (``echo: <last user message>``); the module docstring has the whole
        order. A scripted queue that ran dry answers HTTP 500. Calling again appends.

        Raises:
            UsageError: more than one of ``session``, ``key`` and ``model`` given, an empty
                key or model, or a reply that is not a :data:`Reply`.
        """
        if sum(name is not None for name in (session, key, model)) > 1:
            msg = "script(...) takes one of session=, key= or model=, not both or all three: a request takes from its key's queue, else its model's, else its session's"
            raise UsageError(msg)
        replies = [_checked(reply, "script") for reply in replies]
        if key is not None:
            _checked_key(key)
        if model is not None and not (isinstance(model, str) and model):
            msg = f"script(model=...) takes the model name a request body names, not {model!r}"
            raise UsageError(msg)
        with self._lock:
            if model is not None:
                self._model_queues.setdefault(model, deque()).extend(replies)
                self._model_taken.setdefault(model, 0)
            elif key is not None:
                self._key_queues.setdefault(key, deque()).extend(replies)
                self._key_taken.setdefault(key, 0)
            else:
                self._queues.setdefault(session, deque()).extend(replies)
                self._taken.setdefault(session, 0)

    def fail_key(self, key: str, reply: Reply) -> None:
        """Answer every request made with API ``key`` with ``reply`` until :meth:`clear_key`.

        A standing fault comes before every queue and takes nothing from them: e.g. a
        revoked key, ``fail_key("sk-old", HttpError.invalid_api_key("sk-old"))``. Calling
        again replaces the key's standing reply.
        """
        reply, key = _checked(reply, "fail_key"), _checked_key(key)
        with self._lock:
            self._key_faults[key] = reply

    def clear_key(self, key: str) -> None:
        """End ``key``'s standing fault (none is fine): its requests are answered as usual again."""
        with self._lock:
            self._key_faults.pop(key, None)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    def wait_for_request(self, matches: Callable[[RecordedRequest], bool], *, after: int = 0, timeout: float) -> RecordedRequest:
        """The first request from the ``after``-th on (in arrival order) that ``matches``, waiting for it if none has come yet.

        A request is recorded when it arrives, before it is answered. Call from a thread
        other than the server's (in trio mode, from a worker thread). ``matches`` runs under
        the server's lock: keep it quick and let it not call the server.

        Raises:
            TimeoutError: no such request arrived within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        with self._arrived:
            seen = after
            while True:
                for request in self._requests[seen:]:
                    if matches(request):
                        return request
                seen = max(seen, len(self._requests))
                left = deadline - time.monotonic()
                if left <= 0:
                    msg = f"the test model server received no matching request within {timeout} s ({len(self._requests)} received in all)"
                    raise TimeoutError(msg)
                self._arrived.wait(left)

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
        listeners = await trio.open_tcp_listeners(self.requested_port, host="127.0.0.1")
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
        key = _bearer(incoming.headers.get("authorization"))
        try:
            body: Any = msgspec.json.decode(incoming.body) if incoming.body else None
            bad_json = None
        except msgspec.DecodeError as exc:
            body, bad_json = None, str(exc)
        completion = incoming.path == "/v1/chat/completions" and isinstance(body, dict) and isinstance(body.get("messages"), list)
        counted = count_prompt_tokens(body) if completion else None
        record = RecordedRequest(
            session=session,
            method=incoming.method,
            path=incoming.path,
            body=body,
            connection=incoming.connection,
            api_key=key,
            prompt_tokens=counted,
            raw_body=incoming.body,
        )
        with self._lock:
            self._requests.append(record)
            self._arrived.notify_all()
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
            with self._lock:
                standing = self._key_faults.get(key) if key is not None else None
                if not isinstance(standing, HttpError):
                    return models(self.model)
                seed = self._other_seed(f"key-fault/{key}")
            return render(standing, {}, rng=random.Random(seed), model=self.model, now=self.clock())
        if bad_json is not None:
            return error(400, f"test model server: the request body is not valid JSON ({bad_json})", code="invalid_json")
        if counted is None:  # on this route: the body is not a JSON object with a 'messages' list
            return error(400, "test model server: the body must be a JSON object with a 'messages' list", code="invalid_body")
        chosen = self._choose(session, key, body, counted)
        if isinstance(chosen, Planned):
            return chosen
        reply, seed = chosen
        usage = counted if self.context_window is not None else None
        with self._lock:
            cache = self._cache.use(body, count_prompt_tokens if self.context_window is not None else prompt_words)
        return render(reply, body, rng=random.Random(seed), model=self.model, now=self.clock(), prompt_tokens=usage, cache=cache)

    def _choose(self, session: str | None, key: str | None, body: dict[str, Any], prompt_tokens: int) -> tuple[Reply, str] | Planned:
        """The reply to a completion and the seed to render it with, or a 500 for a dry queue (see the module docstring)."""
        with self._lock:
            if key is not None and key in self._key_faults:
                return self._key_faults[key], self._other_seed(f"key-fault/{key}")
            if self.refuse_stream and body.get("stream") is True:
                return HttpError.streaming_unsupported(), self._other_seed("refused")
            room = _completion_room(body)
            if self.context_window is not None and prompt_tokens + room > self.context_window:
                overflow = HttpError.context_overflow(style=self.overflow_style, limit=self.context_window, prompt_tokens=prompt_tokens, max_tokens=room)
                return overflow, self._other_seed("overflow")
            if key is not None and key in self._key_queues:
                queue = self._key_queues[key]
                if not queue:
                    return error(500, _exhausted("key", key, self._key_taken[key]), code="script_exhausted")
                index = self._key_taken[key] = self._key_taken[key] + 1
                return queue.popleft(), f"{self.seed}/key/{key}/{index}"
            model = body.get("model")
            if isinstance(model, str) and model in self._model_queues:
                queue = self._model_queues[model]
                if not queue:
                    return error(500, _exhausted("model", model, self._model_taken[model]), code="script_exhausted")
                index = self._model_taken[model] = self._model_taken[model] + 1
                return queue.popleft(), f"{self.seed}/model/{model}/{index}"
            name = session if session in self._queues else None
            queue_or_none = self._queues.get(name)
            if queue_or_none is None:
                index = self._echoes[session] = self._echoes.get(session, 0) + 1
                return echo(body), f"{self.seed}/echo/{session}/{index}"
            if not queue_or_none:
                return error(500, _exhausted("session" if name is not None else None, name, self._taken[name]), code="script_exhausted")
            index = self._taken[name] = self._taken[name] + 1
            return queue_or_none.popleft(), f"{self.seed}/script/{name}/{index}"

    def _other_seed(self, kind: str) -> str:
        """The seed of the next reply of ``kind`` that comes from no queue (call under the lock)."""
        count = self._others[kind] = self._others.get(kind, 0) + 1
        return f"{self.seed}/{kind}/{count}"


@contextlib.asynccontextmanager
async def open_model_server(
    *,
    seed: int = 0,
    model: str = "test-model",
    clock: Callable[[], float] = time.time,
    refuse_stream: bool = False,
    context_window: int | None = None,
    overflow_style: ContextStyle = "openai",
) -> AsyncIterator[ModelServer]:
    """Serve a :class:`ModelServer` (same arguments) inside the running trio program, listening on entry.

    Leaving the block closes the listener and every connection, stalled and silent ones included.
    """
    server = ModelServer(seed=seed, model=model, clock=clock, refuse_stream=refuse_stream, context_window=context_window, overflow_style=overflow_style)
    server._claim("trio")
    async with trio.open_nursery() as nursery:
        await nursery.start(server._serve)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()


def _exhausted(kind: Literal["session", "key", "model"] | None, name: str | None, taken: int) -> str:
    plural = "reply" if taken == 1 else "replies"
    if kind is None:
        return f"test model server: the default script is exhausted after {taken} {plural}; script more with server.script([...])"
    return f"test model server: the script for {kind} {name!r} is exhausted after {taken} {plural}; script more with server.script([...], {kind}={name!r})"


def _completion_room(body: dict[str, Any]) -> int:
    """The completion tokens a request asks room for: ``max_completion_tokens``, else ``max_tokens``; 0 when neither is a whole number >= 0."""
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return 0


def _bearer(authorization: str | None) -> str | None:
    """The key of an ``Authorization: Bearer <key>`` header (the scheme in any case)."""
    scheme, _, key = (authorization or "").strip().partition(" ")
    return (key.strip() or None) if scheme.lower() == "bearer" else None


def _checked(reply: object, method: str) -> Reply:
    if not isinstance(reply, TextReply | ToolCallsReply | HttpError):
        msg = f"{method}(...) takes TextReply, ToolCallsReply or HttpError replies, not {reply!r}"
        raise UsageError(msg)
    return reply


def _checked_key(key: object) -> str:
    if not (isinstance(key, str) and key and key == key.strip() and " " not in key):
        msg = f"an API key is a non-empty string without spaces, as sent in 'Authorization: Bearer <key>', not {key!r}"
        raise UsageError(msg)
    return key
