"""The base of every platform adapter actor (``/platforms/<name>``).

An adapter executes the gateway's decisions; it decides nothing itself:

- inbound: a batch of :class:`PlatformMessage` (from a poll, a webhook request) is deduped
  (:class:`SeenLog`), the log saved (a reactor wait) and only then handled; each message is
  checked (:func:`decide_access`, pairing as a wait on the shared book), commands (``/stop``,
  ``/approve``, ``/deny``) are applied, the rest go through the busy policy (:class:`Chats`);
- a turn is one wait (:func:`follow_turn`) that ends with the turn's end event;
- a reply is one wait (the subclass's ``deliver``) that retries by :func:`retry_delay`.

Subclasses implement ``begin`` (start polling or serving), ``deliver`` (send the pieces of one
reply) and may override ``limit`` / ``measure`` (chunking).
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any, Literal

from actors import Actor
from actors.agent import HubRegistry
from actors.agent._address import SESSIONS_PATH, tell_session
from protocols import (
    AdapterState,
    AdapterStatus,
    AdapterStatusRequest,
    AdapterTimer,
    ApprovalRequested,
    CancelTurn,
    PlatformMessage,
    ResolveApproval,
    SessionCommand,
    StartTurn,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnRejected,
    WaitFinished,
)

from ._access import AccessPolicy, decide_access
from ._chats import Action, Cancel, Chats, Reply, Start
from ._chunks import Measure, chunk_text
from ._dedup import SeenLog
from ._pairing import new_code, request_code, update_book
from ._session_key import key_of
from ._waits import SeenFile, follow_turn

log = logging.getLogger(__name__)

AdapterInbox = WaitFinished | AdapterStatusRequest | AdapterTimer | ApprovalRequested | PlatformMessage | Literal["port"]
"""What an adapter takes: its waits' ends, status requests, its timers, approval requests of the
turns it follows, inbound messages (a webhook request tells them), ``ask("port")``."""

TURN_DEADLINE = 3600.0
"""Seconds the gateway follows one turn (the session's own deadline ends it sooner)."""
DELIVERY_DEADLINE = 900.0
"""Seconds one reply is retried before it is given up (logged)."""


class GatewayAdapter(Actor[AdapterInbox]):
    """One chat platform: inbound messages to sessions, each turn's end back as one reply."""

    platform = "platform"
    limit = 0
    """The platform's message length limit (0: none)."""
    measure: Measure = len

    def __init__(self, *, home: Path, hubs: HubRegistry, policy: AccessPolicy, chats: Chats, context: str = "", senders: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.senders = senders
        """The gateway's table of running adapters' senders (scheduled jobs' answers, ``_scheduled.py``)."""
        self.home = home
        self.hubs = hubs
        self.policy = policy
        self.chats = chats
        self.context_line = context
        self.seen = SeenLog()
        self.seen_file = SeenFile(home / "gateway" / f"{self.platform}.json")
        self.state: AdapterState = "starting"
        self.detail = ""
        self.counts = dict.fromkeys(("received", "answered", "duplicates", "refused", "send_retries"), 0)
        self.approvals: dict[str, ApprovalRequested] = {}
        """Session id -> the approval its running turn waits for."""

    # -- lifecycle ------------------------------------------------------------------------

    def started(self) -> None:
        self.seen = self.seen_file.load()
        self.begin()
        send = self.scheduled_sender()
        if self.senders is not None and send is not None:
            self.senders[self.platform] = send

    def terminated(self, kind: Any) -> None:
        if self.senders is not None:  # any exit: a crashed adapter's platform is "not running" until it restarts
            self.senders.pop(self.platform, None)

    def begin(self) -> None:
        """Start polling or serving (subclasses)."""

    def scheduled_sender(self) -> Any:
        """How a scheduled job's answer is sent through this adapter (subclasses; None: it is not)."""
        return None

    def set_state(self, state: AdapterState, detail: str = "") -> None:
        if (state, detail) != (self.state, self.detail):
            log.info("gateway %s: %s%s", self.platform, state, f" ({detail})" if detail else "")
        self.state, self.detail = state, detail

    # -- messages -------------------------------------------------------------------------

    def receive(self, message: AdapterInbox) -> Any:
        match message:
            case AdapterStatusRequest(reply_to=reply_to):
                status = self.status()
                if reply_to is not None:
                    reply_to.tell(status)
                return status
            case PlatformMessage():
                self.accept([message])
            case ApprovalRequested():
                self.approvals[message.session_id] = message
                chat = self.chats.chats.get(message.session_id)
                if chat is not None:
                    self.execute(
                        [Reply(chat.message, f"Approval needed: {message.command}\n({'; '.join(message.reasons)})\nReply /approve or /deny.", final=False)]
                    )
            case WaitFinished(tag="persist", status="ok", value=(log_, batch)):
                for item in batch:
                    self.handle(item)
                self.persisted(log_)
            case WaitFinished(tag="persist", error=error):
                raise RuntimeError(f"the {self.platform} seen log could not be saved: {error}")  # crash: restart reloads it
            case WaitFinished(tag="pair", status=status, value=value, error=error):
                self.paired(status, value, error)
            case WaitFinished(tag="turn", status=status, value=value, error=error):
                self.turn_ended(status, value, error)
            case WaitFinished(tag="deliver", status=status, value=value, error=error):
                self.delivered(status, value, error)
            case "port":
                return 0
            case _:
                return self.other(message)
        return None

    def other(self, message: Any) -> Any:
        return super().receive(message)

    def status(self) -> AdapterStatus:
        return AdapterStatus(platform=self.platform, state=self.state, detail=self.detail, chats=len(self.chats.chats), **self.counts)

    # -- inbound --------------------------------------------------------------------------

    def accept(self, batch: list[PlatformMessage], *, offset: int | None = None) -> None:
        """Dedup a batch, save the log, then handle what is new (in ``persist``'s outcome)."""
        self.counts["received"] += len(batch)
        keys = [self.dedup_key(m) for m in batch]
        fresh = set(self.seen.fresh(keys))
        new = []
        for item, key in zip(batch, keys, strict=True):
            if key in fresh:  # the first of the batch with this key
                fresh.discard(key)
                new.append(item)
        self.counts["duplicates"] += len(batch) - len(new)
        previous = self.seen
        updated = self.seen = previous.add(keys, offset=offset)
        if updated is previous:
            self.persisted(updated)
            return
        self.start_wait(self._save, updated, new, tag="persist", timeout=30.0)

    async def _save(self, log_: SeenLog, batch: list[PlatformMessage]) -> tuple[SeenLog, list[PlatformMessage]]:
        return await self.seen_file.save(log_), batch

    def persisted(self, log_: SeenLog) -> None:
        """The log up to ``log_`` is on disk (pollers poll again here)."""

    def dedup_key(self, message: PlatformMessage) -> str:
        return f"{message.chat_id}/{message.message_id}"

    def handle(self, message: PlatformMessage) -> None:
        access = decide_access(message, self.policy, ())
        if access == "allow":
            self.allowed(message)
        elif access == "pair":
            self.start_wait(self._pair, message, tag="pair", timeout=30.0)

    async def _pair(self, message: PlatformMessage) -> tuple[PlatformMessage, bool, str | None]:
        """The pairing book, read fresh: is the user paired now (``hermes pairing approve`` runs
        in another process), else the code to send them (None: they already have one)."""
        import trio

        def change(book: Any) -> tuple[Any, tuple[bool, str | None]]:
            if message.user_id in book.paired(self.platform):
                return book, (True, None)
            new, code = request_code(
                book, platform=self.platform, user_id=message.user_id, user_name=message.user_name, chat_id=message.chat_id, now=time.time(), code=new_code()
            )
            return new, (False, code)

        paired, code = await trio.to_thread.run_sync(update_book, self.home, change)
        return message, paired, code

    def paired(self, status: str, value: Any, error: str) -> None:
        if status != "ok":
            log.warning("gateway %s: the pairing book could not be read: %s", self.platform, error)
            return
        message, paired, code = value
        if paired:
            self.allowed(message)
            return
        self.counts["refused"] += 1
        if code is not None:
            text = f"Hi! I don't know you yet. Your pairing code is {code}.\nAsk the owner of this bot to run: hermes pairing approve {self.platform} {code}"
            self.execute([Reply(message, text, final=False)])

    def allowed(self, message: PlatformMessage) -> None:
        command = message.text.strip().split(maxsplit=1)[0].lower() if message.text.strip() else ""
        command = command.split("@", 1)[0]  # /stop@botname in groups
        if command == "/stop":
            self.chats, actions = self.chats.on_stop(message)
            self.execute(actions)
        elif command in ("/approve", "/deny"):
            request = self.approvals.pop(key_of(message), None)
            if request is None:
                self.execute([Reply(message, "Nothing is waiting for an approval.", final=False)])
                return
            self.tell_session(key_of(message), ResolveApproval(request_id=request.request_id, choice="once" if command == "/approve" else "deny"))
        else:
            self.chats, actions = self.chats.on_message(message)
            self.execute(actions)

    # -- effects --------------------------------------------------------------------------

    def execute(self, actions: list[Action]) -> None:
        for action in actions:
            match action:
                case Start(message=message, turn_id=turn_id, interrupt=interrupt):
                    start = StartTurn(
                        text=message.text,
                        turn_id=turn_id,
                        policy="interrupt" if interrupt else "queue",
                        instructions=self.instructions(message),
                    )
                    context = self._context()
                    address = self.address
                    self.start_wait(
                        follow_turn,
                        context.registry,
                        self.reactor,
                        self.hubs,
                        key_of(message),
                        start,
                        address.tell,
                        TURN_DEADLINE,
                        tag="turn",
                        timeout=math.inf,
                    )
                case Reply(message=message, text=text, final=final):
                    pieces = chunk_text(text, self.limit, self.measure) if self.limit else [text]
                    self.start_wait(self._deliver, message, pieces, final, tag="deliver", timeout=DELIVERY_DEADLINE)
                case Cancel(session_id=session_id, turn_id=turn_id):
                    self.tell_session(session_id, CancelTurn(turn_id=turn_id, reason="stopped from the chat (/stop)"))

    def tell_session(self, session_id: str, command: SessionCommand) -> None:
        registry = self._context().registry
        tell_session(registry, registry.lookup(SESSIONS_PATH), session_id, command)

    def instructions(self, message: PlatformMessage) -> str:
        where = "a direct message" if message.chat_type == "dm" else f"a {message.chat_type} chat"
        who = f" from {message.user_name}" if message.user_name else ""
        return f"You are answering {where}{who} on {self.platform}. {self.context_line}".strip()

    def turn_ended(self, status: str, value: Any, error: str) -> None:
        if status != "ok":  # follow_turn returns every end itself (its deadline included): only a bug lands here
            raise RuntimeError(f"following a turn failed ({status}: {error})")
        event = value
        session_id = event.session_id
        self.approvals.pop(session_id, None)
        match event:
            case TurnCompleted(text=text):
                self.chats, actions = self.chats.on_end(session_id, event.turn_id, text or "(no answer)")
            case TurnFailed(error=why):
                self.chats, actions = self.chats.on_end(session_id, event.turn_id, f"Sorry, that failed: {why}")
            case TurnRejected(reason=why):
                self.chats, actions = self.chats.on_end(session_id, event.turn_id, f"Not taken: {why}")
            case TurnCancelled():
                self.chats, actions = self.chats.on_end(session_id, event.turn_id, "", cancelled=True)
            case _:
                actions = []
        self.execute(actions)

    async def _deliver(self, message: PlatformMessage, pieces: list[str], final: bool) -> tuple[bool, int]:
        retries = await self.deliver(message, pieces)
        return final, retries

    async def deliver(self, message: PlatformMessage, pieces: list[str]) -> int:
        """Send ``pieces`` to ``message``'s chat, retrying by :func:`retry_delay`; returns the retries made (subclasses)."""
        raise NotImplementedError

    def delivered(self, status: str, value: Any, error: str) -> None:
        if status == "ok":
            final, retries = value
            self.counts["send_retries"] += retries
            self.counts["answered"] += 1 if final else 0
        else:
            log.warning("gateway %s: a reply was given up (%s: %s)", self.platform, status, error)
            self.detail = f"a reply was given up: {error or status}"
