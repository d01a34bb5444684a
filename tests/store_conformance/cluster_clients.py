"""Clients of a test cluster: sessions of turns sent round robin over the nodes' ports, and what they saw.

A client sends one turn at a time in its session (``X-Hermes-Session-Id``), each attempt a new
user message (``"<session> turn <k> try <a>"``: an attempt cut by a node's death may or may
not be stored, so a retry never repeats a text), to the next port of the round robin: most
requests land on a node that does not own the session and must be forwarded. A connection the
dead node refused or cut is retried on the next port at once; a refusal with Retry-After (503:
the owner did not answer, or stopped beating) is retried when the store says the session may
be served (its holder's lease ended or its heartbeat is a ttl old:
``cluster_watch.wait_to_retry``), at most Retry-After later. Every turn has a deadline. The :class:`Ledger` records every text sent, each one
acknowledged (a 200 whose answer carries a node's mark; streamed: through ``[DONE]``), and
the time of each answer, for ``cluster_checks``.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import time
from collections.abc import Callable, Sequence

import httpx
import trio

from tests.store_conformance.cluster_checks import StoredMessage
from tests.store_conformance.cluster_nodes import KEY
from tests.store_conformance.cluster_watch import StoreWatch, wait_to_retry

TURN_DEADLINE = 30.0
"""Seconds one turn may take, retries included (a paused node holds its requests until it continues)."""


@dataclasses.dataclass
class Ledger:
    """What the clients sent and were answered."""

    sent: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    acknowledged: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    answers: list[tuple[str, float]] = dataclasses.field(default_factory=list)
    """``(session, time.time())`` of each acknowledged answer."""
    refused: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    """Why attempts were not acknowledged (status and code, or the transport error), for the report."""
    odd: list[str] = dataclasses.field(default_factory=list)
    """200 answers without a node's mark (a violation: the answer is not one a node's model gave)."""
    finished: set[str] = dataclasses.field(default_factory=set)
    """Sessions whose client sent all its turns."""
    pending: dict[str, str] = dataclasses.field(default_factory=dict)
    """Per turn, the attempt on its way (where, what, since when), for a failure's message."""
    tries: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    """Per turn, each refused attempt (where, when, why), for a failure's message."""
    unanswered: list[str] = dataclasses.field(default_factory=list)
    """Turns no node answered within ``TURN_DEADLINE`` (a violation; the client went on to its next turn)."""
    late: list[str] = dataclasses.field(default_factory=list)
    """Steps of the run that did not happen within their deadline (a violation; the run went on)."""
    _changed: trio.Event = dataclasses.field(default_factory=trio.Event)

    def changed(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def answered_since(self, at: float) -> set[str]:
        return {s for s, t in self.answers if t >= at}

    async def wait_until(self, holds: Callable[[], bool], what: str, deadline: float) -> None:
        """Return once ``holds()`` (checked at each change of the ledger), or after ``deadline`` s noted in ``late``."""
        with trio.move_on_after(deadline):
            while not holds():
                await self._changed.wait()
            return
        self.late.append(f"{what}: not within {deadline} s (refusals so far: {dict(self.refused)})")


class RoundRobin:
    """The nodes' base URLs, taken in turn by every request of every client, and how a client
    waits before retrying a refused attempt (the store's ``watch``, the nodes' lease ``ttl``)."""

    def __init__(self, bases: Sequence[str], watch: StoreWatch, ttl: float) -> None:
        self.bases = list(bases)
        self.watch = watch
        self.ttl = ttl
        self._next = itertools.count()

    def take(self) -> str:
        return self.bases[next(self._next) % len(self.bases)]


def _headers(session: str) -> dict[str, str]:
    return {"authorization": f"Bearer {KEY}", "x-hermes-session-id": session}


async def _attempt(client: httpx.AsyncClient, base: str, session: str, text: str, *, stream: bool) -> tuple[str | None, str, float]:
    """One attempt: (the answer's content or None, why not, the Retry-After given: the longest to wait before the next)."""
    body = {"messages": [{"role": "user", "content": text}], "stream": stream}
    try:
        reply = await client.post(f"{base}/v1/chat/completions", json=body, headers=_headers(session))
    except httpx.TransportError as exc:
        return None, type(exc).__name__, 0.0
    if reply.status_code != 200:
        try:
            code = reply.json()["error"].get("code")
        except (ValueError, KeyError, TypeError, AttributeError):
            code = None
        return None, f"{reply.status_code} {code}", float(reply.headers.get("retry-after", "0") or 0)
    if not stream:
        return str(reply.json()["choices"][0]["message"].get("content") or ""), "", 0.0
    lines = [line[6:] for line in reply.text.splitlines() if line.startswith("data: ")]
    if not lines or lines[-1] != "[DONE]":
        return None, "stream cut", 0.0
    chunks = [json.loads(line) for line in lines[:-1]]
    if any("error" in c for c in chunks):
        return None, "stream error", 0.0
    return "".join(d["choices"][0]["delta"].get("content") or "" for d in chunks if d.get("choices")), "", 0.0


async def ask_turn(client: httpx.AsyncClient, ledger: Ledger, ports: RoundRobin, session: str, label: str, *, stream: bool = False) -> None:
    """Send one turn until a node acknowledges it, at most ``TURN_DEADLINE`` s (then noted in ``unanswered``)."""
    waited = True
    with trio.move_on_after(TURN_DEADLINE):
        for attempt in itertools.count():
            text = f"{label} try {attempt}"
            ledger.sent.append((session, text))
            base = ports.take()
            ledger.pending[label] = f"{text!r} to {base} since {time.time():.2f}"
            content, why, wait = await _attempt(client, base, session, text, stream=stream)
            if content is not None:
                ledger.acknowledged.append((session, text))
                ledger.answers.append((session, time.time()))
                if "[node-" not in content:
                    ledger.odd.append(f"{session}: {text!r} answered {content[:120]!r}")
                ledger.changed()
                return
            ledger.refused[why] += 1
            ledger.tries.setdefault(label, []).append(f"{text!r} to {base} at {time.time():.2f}: {why}")
            if wait:
                waited = await wait_to_retry(ports.watch, session, ports.ttl, wait, again=not waited)
    earlier = "; ".join(ledger.tries.get(label, [])) or "none"
    ledger.unanswered.append(f"{label} not answered within {TURN_DEADLINE} s (the last attempt: {ledger.pending[label]}; refused before: {earlier})")


async def run_session(client: httpx.AsyncClient, ledger: Ledger, ports: RoundRobin, session: str, *, turns: int, stop: trio.Event) -> None:
    """Up to ``turns`` turns in ``session``, one at a time, every other one streamed, until ``stop``."""
    for k in range(turns):
        if stop.is_set():
            break
        await ask_turn(client, ledger, ports, session, f"{session} turn {k}", stream=k % 2 == 1)
    ledger.finished.add(session)
    ledger.changed()


async def api_messages(client: httpx.AsyncClient, ports: RoundRobin, session: str) -> list[StoredMessage] | None:
    """The session's transcript as ``GET /v1/sessions/{id}/messages`` gives it (through any node), as rows; None when no node gave it in time."""
    waited = True
    with trio.move_on_after(TURN_DEADLINE):
        while True:
            try:
                reply = await client.get(f"{ports.take()}/v1/sessions/{session}/messages", headers=_headers(session))
            except httpx.TransportError:
                continue
            if reply.status_code == 200:
                return [
                    StoredMessage(
                        id=int(m["id"]),
                        session_id=session,
                        role=m["role"],
                        content=m.get("content"),
                        tool_call_id=m.get("tool_call_id"),
                        tool_calls=json.dumps(m["tool_calls"]) if m.get("tool_calls") else None,
                    )
                    for m in reply.json()["data"]
                ]
            waited = await wait_to_retry(ports.watch, session, ports.ttl, float(reply.headers.get("retry-after", "1") or 1), again=not waited)
    return None
