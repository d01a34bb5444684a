"""Asking the provider actors from the reactor, each ask under a deadline.

These run inside reactor waits (a session's model call, a tool call): never in an actor
handler. :func:`prefetch_all` asks every provider at once and keeps what answered before the
one deadline; a provider that is slow, hung, failing or restarting is left out and reported
(:func:`actors.memory.skipped`), and the turn goes on.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from protocols._memory import ProviderCall, ProviderNotice, ProviderOp, ProviderReply

from ._provider import PrefetchResult, missed, prefetch_result
from ._tree import BUILTIN_PATH, MemoryOptions


class _Reply:
    """A one-shot reply address for a trio task: ``tell`` from any thread, ``await wait()`` in trio."""

    def __init__(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._done = trio.Event()
        self.value: Any = None

    def tell(self, message: Any) -> None:
        def deliver() -> None:
            if not self._done.is_set():
                self.value = message
                self._done.set()

        try:
            self._token.run_sync_soon(deliver)
        except trio.RunFinishedError:
            pass  # the reactor stopped: nobody waits for this any more

    async def wait(self) -> Any:
        await self._done.wait()
        return self.value


async def ask_provider(registry: Any, path: str, op: ProviderOp, arguments: Mapping[str, Any], timeout: float) -> ProviderReply | None:
    """``op`` of the provider at ``path``; None when none runs there or it did not answer within ``timeout``."""
    try:
        address = registry.lookup(path)
    except LookupError:
        return None
    reply = _Reply()
    try:
        address.tell(ProviderCall(op=op, arguments=dict(arguments), reply_to=reply))
    except Exception:
        return None  # stopped for good (the runtime is stopping)
    with trio.move_on_after(timeout):
        answer = await reply.wait()
        return answer if isinstance(answer, ProviderReply) else None
    return None


def tell_providers(registry: Any, options: MemoryOptions, notice: ProviderNotice) -> None:
    """Tell every provider ``notice`` (no answer; a missing or stopped one is skipped)."""
    for path in options.paths():
        try:
            registry.lookup(path).tell(notice)
        except Exception:
            continue


Ask = Callable[[], Awaitable[ProviderReply | None]]


async def collect_prefetch(asks: Mapping[str, Ask], timeout: float) -> list[PrefetchResult]:
    """Run every ask at once; what each gave by the one deadline (``timeout`` seconds from now)."""
    results: dict[str, PrefetchResult] = {}
    deadline = trio.current_time() + max(0.0, timeout)

    async def one(name: str, ask: Ask) -> None:
        results[name] = prefetch_result(name, await ask())

    with trio.move_on_at(deadline):
        async with trio.open_nursery() as nursery:
            for name, ask in asks.items():
                nursery.start_soon(one, name, ask)
    return [results.get(name) or missed(name, timeout) for name in asks]


async def prefetch_all(registry: Any, options: MemoryOptions, query: str, session_id: str) -> list[PrefetchResult]:
    """Every provider's recalled context for the turn about to run, under ``options.prefetch_timeout``;
    each outcome is counted in ``options.health``."""
    arguments = {"query": query, "session_id": session_id}

    def asker(path: str) -> Ask:
        return lambda: ask_provider(registry, path, "prefetch", arguments, math.inf)

    names = {path: ("builtin" if path == BUILTIN_PATH else options.provider) for path in options.paths()}
    results = await collect_prefetch({names[path]: asker(path) for path in options.paths()}, options.prefetch_timeout)
    for result in results:
        options.health.prefetched(result.provider, result.outcome, result.detail)
    return results


PROMPT_TIMEOUT = 10.0
"""Seconds a new session waits for the providers' system-prompt blocks (once per session)."""


async def system_prompt_blocks(registry: Any, options: MemoryOptions, timeout: float = PROMPT_TIMEOUT) -> str:
    """The providers' blocks for a new session's system prompt, the built-in memory snapshot first. A
    provider that does not answer in time is left out; for the built-in one a note says so."""

    def asker(path: str) -> Ask:
        return lambda: ask_provider(registry, path, "system_prompt", {}, math.inf)

    names = {path: ("builtin" if path == BUILTIN_PATH else options.provider) for path in options.paths()}
    results = await collect_prefetch({names[path]: asker(path) for path in options.paths()}, timeout)
    blocks: list[str] = []
    for result in results:
        if result.outcome == "ok":
            blocks.append(result.text.strip())
        elif result.provider == "builtin" and result.outcome != "empty":
            blocks.append(f"[MEMORY.md and USER.md were left out of this prompt: the memory actor gave no snapshot ({result.outcome}: {result.detail})]")
    return "\n\n".join(blocks)


async def pre_compress_all(registry: Any, options: MemoryOptions, session_id: str) -> list[PrefetchResult]:
    """Every provider's ``on_pre_compress`` text, under ``options.prefetch_timeout``."""

    def asker(path: str) -> Ask:
        return lambda: ask_provider(registry, path, "pre_compress", {"session_id": session_id}, math.inf)

    names = {path: ("builtin" if path == BUILTIN_PATH else options.provider) for path in options.paths()}
    return await collect_prefetch({names[path]: asker(path) for path in options.paths()}, options.prefetch_timeout)
