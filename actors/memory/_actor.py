"""One memory provider's actor: ``/memory/builtin`` or ``/memory/<name>``.

It holds one :class:`MemoryProvider` and calls it one message at a time, in its own thread
(like the store writer's SQLite work): a slow or hung provider stalls only this inbox, and
every caller waits with its own deadline (``_client.py``). The built-in provider's actor is
the one owner of MEMORY.md / USER.md (rule 4): the memory tool's writes reach the files as
messages to it, so they are serialised here.

A tool call that needs a store write (:class:`StoreWrite`) is told to ``/store`` with this
actor as ``reply_to``; the caller is answered when the store's reply comes back.

Failure: a :class:`ProviderError` is answered as an error. Any other exception is answered
too (the caller is not left to its deadline), then raised again: the actor crashes and its
supervisor starts a fresh provider; messages sent meanwhile wait at its address.

Invariant: every :class:`ProviderCall` with a ``reply_to`` gets exactly one :class:`ProviderReply`,
unless the actor dies in the middle of the provider's call (the caller's deadline covers that).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any

from actors import Actor
from protocols._memory import FactDeleted, FactSaved, ProviderCall, ProviderNotice, ProviderReply
from protocols._store import StoreFailed

from ._health import MemoryHealth
from ._provider import MemoryProvider, ProviderEnv, ProviderError, StoreWrite

log = logging.getLogger(__name__)

ProviderInbox = ProviderCall | ProviderNotice | FactSaved | FactDeleted | StoreFailed


class ProviderActor(Actor[ProviderInbox]):
    """Holds one provider; ``notify``: paths told ``memory_write`` after each built-in write."""

    def __init__(
        self,
        factory: Callable[[ProviderEnv], MemoryProvider],
        env: ProviderEnv,
        health: MemoryHealth,
        *,
        notify: tuple[str, ...] = (),
        store_path: str = "/store",
    ) -> None:
        super().__init__()
        self._factory, self._env, self._health, self._notify, self._store_path = factory, env, health, notify, store_path
        self.provider: MemoryProvider | None = None
        self._pending: dict[str, tuple[Any, Callable[[Any], ProviderReply]]] = {}
        self._tokens = itertools.count(1)

    def started(self) -> None:
        self.provider = self._factory(self._env)
        self._health.started(self.provider.name, self.context.incarnation if self.context is not None else 0)

    def stopping(self) -> None:
        if self.provider is not None:
            self.provider.shutdown()

    def terminated(self, kind: str) -> None:
        for reply_to, _render in self._pending.values():  # the store's answers would reach a dead incarnation
            _tell(reply_to, ProviderReply(provider=self._name, ok=False, text="the memory provider restarted before the store answered; try again"))
        self._pending.clear()
        if kind != "normal":
            self._health.crashed(self._name)

    @property
    def _name(self) -> str:
        return self.provider.name if self.provider is not None else "provider"

    def receive(self, message: ProviderInbox) -> Any:
        match message:
            case ProviderCall():
                self._call(message)
            case ProviderNotice(op=op, arguments=arguments):
                self._notice(op, arguments)
            case FactSaved(token=token) | FactDeleted(token=token):
                self._store_answered(token, message)
            case StoreFailed(token=token, error=error):
                self._store_answered(str(token), message, error=error)
            case _:
                return super().receive(message)
        return None

    def _call(self, call: ProviderCall) -> None:
        provider, args = self.provider, call.arguments
        assert provider is not None
        try:
            match call.op:
                case "system_prompt":
                    text: str | StoreWrite = provider.system_prompt_block()
                case "prefetch":
                    text = provider.prefetch(str(args.get("query", "")), str(args.get("session_id", "")))
                case "tool":
                    text = provider.handle_tool_call(str(args.get("name", "")), dict(args.get("args") or {}), str(args.get("session_id", "")))
                case "pre_compress":
                    text = provider.on_pre_compress(str(args.get("session_id", "")))
                case _:
                    text = ""
        except ProviderError as exc:
            _tell(call.reply_to, ProviderReply(provider=provider.name, token=call.token, ok=False, text=str(exc)))
            return
        except Exception as exc:
            what = f"the {provider.name} memory provider failed ({type(exc).__name__}: {exc}); it is restarted"
            _tell(call.reply_to, ProviderReply(provider=provider.name, token=call.token, ok=False, text=what))
            raise
        if isinstance(text, StoreWrite):
            token = f"fact-{next(self._tokens)}"
            self._pending[token] = (call.reply_to, _with_token(text.render, call.token, provider.name))
            self._context().registry.lookup(self._store_path).tell(_replace_reply(text.command, token, self.address))
            return
        _tell(call.reply_to, ProviderReply(provider=provider.name, token=call.token, text=text))
        if call.op == "tool" and self._notify and args.get("name") == "memory":
            written = dict(args.get("args") or {})
            notice = ProviderNotice(op="memory_write", arguments={k: str(written.get(k) or "") for k in ("action", "target", "content")})
            for path in self._notify:
                self._context().registry.lookup(path).tell(notice)

    def _notice(self, op: str, args: dict[str, Any]) -> None:
        provider = self.provider
        assert provider is not None
        match op:
            case "turn_start":
                provider.on_turn_start(
                    str(args.get("session_id", "")), str(args.get("model", "")), str(args.get("platform", "")), int(args.get("tool_count", 0))
                )
            case "sync_turn":
                provider.sync_turn(str(args.get("session_id", "")), str(args.get("user", "")), str(args.get("answer", "")))
            case "memory_write":
                provider.on_memory_write(str(args.get("action", "")), str(args.get("target", "")), str(args.get("content", "")))
            case "session_end":
                provider.on_session_end(str(args.get("session_id", "")))
            case "delegation":
                provider.on_delegation(str(args.get("task", "")), str(args.get("result", "")))

    def _store_answered(self, token: str, reply: Any, *, error: str = "") -> None:
        pending = self._pending.pop(token, None)
        if pending is None:
            return
        reply_to, render = pending
        if error:
            _tell(reply_to, ProviderReply(provider=self._name, ok=False, text=f"the store did not save it: {error}"))
            return
        _tell(reply_to, render(reply))


def _with_token(render: Callable[[Any], str], token: str, name: str) -> Callable[[Any], ProviderReply]:
    return lambda reply: ProviderReply(provider=name, token=token, text=render(reply))


def _replace_reply(command: Any, token: str, reply_to: Any) -> Any:
    import msgspec

    return msgspec.structs.replace(command, token=token, reply_to=reply_to)


def _tell(reply_to: Any, message: Any) -> None:
    if reply_to is None:
        return
    try:
        reply_to.tell(message)
    except Exception as exc:  # the caller is gone (its deadline passed): the operation itself stands
        log.debug("could not deliver %s to %r: %s", type(message).__name__, reply_to, exc)
