"""The base of every platform adapter actor (``/platforms/<name>``).

An adapter executes the gateway's decisions; it decides nothing itself:

- inbound: a batch of :class:`PlatformMessage` (from a poll, a webhook request) is deduped
  (:class:`SeenLog`) and decided: each message is checked (:func:`decide_access`, pairing as
  a wait on the shared book), commands (``/stop``, ``/approve``, ``/deny``) and the busy
  policy (:class:`Chats`) change the chats; the seen log and the chats are saved together
  (:class:`StateFile`, a reactor wait) and only then are the decided effects run;
- a turn is one wait (:func:`follow_turn`) that ends with the turn's end event;
- a final reply is saved in the outbox first, then sent as one wait (the subclass's
  ``deliver``) that retries by :func:`retry_delay`, then taken out of the outbox;
- a restarted adapter sends what its outbox holds and re-attaches to every saved chat's turn
  (``follow_turn`` with the store), so a crash mid-turn still ends in exactly one reply.

Subclasses implement ``begin`` (start polling or serving), ``deliver`` (send the pieces of one
reply) and may override ``limit`` / ``measure`` (chunking).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import trio

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
    StreamOpened,
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
from ._state_file import Durable, Outgoing, StateFile, restore
from ._waits import Prepare, Stream, follow_turn

log = logging.getLogger(__name__)

Effect = Callable[[], None]
"""An effect decided before a save and run after it."""

AdapterInbox = WaitFinished | AdapterStatusRequest | AdapterTimer | ApprovalRequested | PlatformMessage | StreamOpened | Literal["port"]
"""What an adapter takes: its waits' ends, status requests, its timers, approval requests of the
turns it follows, inbound messages (a webhook request tells them), ``ask("port")``."""

TURN_DEADLINE = 3600.0
"""Seconds the gateway follows one turn (the session's own deadline ends it sooner)."""
DELIVERY_DEADLINE = 900.0
"""Seconds one reply is retried before it is given up (logged)."""


def approval_text(request: ApprovalRequested) -> str:
    return f"Approval needed: {request.command}\n({'; '.join(request.reasons)})"


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
        self.state_file = StateFile(home / "gateway" / f"{self.platform}.json")
        self.outbox: dict[str, Outgoing] = {}
        """Turn id -> its final reply, saved before it is sent and dropped once it was."""
        self.streams: dict[str, str] = {}
        """Turn id -> the platform message its answer streams into (the final reply edits it)."""
        self.stream_saved: dict[str, trio.Event] = {}
        """Turn id -> set (in the reactor) once its stream's message id is on disk: no edit goes
        out before, so a crash after an edit always finds the message to finish."""
        self.version = 0
        self.state: AdapterState = "starting"
        self.detail = ""
        self.counts = dict.fromkeys(("received", "answered", "duplicates", "refused", "send_retries"), 0)
        self.approvals: dict[str, ApprovalRequested] = {}
        """Session id -> the approval its running turn waits for."""

    # -- lifecycle ------------------------------------------------------------------------

    def started(self) -> None:
        saved = self.state_file.load()
        self.seen, self.version = saved.seen, saved.version
        self.chats = restore(self.chats, saved)
        live = {c.running for c in self.chats.chats.values()} | {o.turn_id for o in saved.outbox}
        self.streams = {turn: mid for turn, mid in saved.streams if turn in live}
        for owed in saved.outbox:  # decided, maybe sent: sent again at most once (a crash in between is the one gap)
            self.outbox[owed.turn_id] = owed
            self.send_final(owed)
        for chat in self.chats.chats.values():
            self.follow(chat.message, chat.running, interrupt=False, resume=True)
        if saved.chats or saved.outbox:
            log.info("gateway %s: re-attached to %d turn(s), %d reply(ies) owed", self.platform, len(saved.chats), len(saved.outbox))
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
            case StreamOpened(turn_id=turn_id, message_id=message_id):
                self.streams[turn_id] = message_id
                # a restart edits this message, not a second one; the stream edits only once it is saved
                self.commit(self.stream_saved_effects(turn_id))
            case ApprovalRequested():
                self.approvals[message.session_id] = message
                chat = self.chats.chats.get(message.session_id)
                if chat is not None:
                    self.ask_approval(chat.message, message)
            case WaitFinished(tag="persist", status="ok", value=(saved, effects, inbound)):
                for effect in effects:
                    effect()
                if inbound:
                    self.persisted(saved.seen)
            case WaitFinished(tag="persist", error=error):
                raise RuntimeError(f"the {self.platform} gateway state could not be saved: {error}")  # crash: restart reloads it
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

    def ask_approval(self, message: PlatformMessage, request: ApprovalRequested) -> None:
        """Show the approval a chat's turn waits for (platforms with buttons override this)."""
        self.execute([Reply(message, f"{approval_text(request)}\nReply /approve or /deny.", final=False)])

    def other(self, message: Any) -> Any:
        return super().receive(message)

    def status(self) -> AdapterStatus:
        return AdapterStatus(platform=self.platform, state=self.state, detail=self.detail, chats=len(self.chats.chats), **self.counts)

    # -- inbound --------------------------------------------------------------------------

    def accept(self, batch: list[PlatformMessage], *, offset: int | None = None) -> None:
        """Dedup a batch, decide what is new, save the log with the chats, then run the effects."""
        self.counts["received"] += len(batch)
        keys = [self.dedup_key(m) for m in batch]
        fresh = set(self.seen.fresh(keys))
        effects: list[Effect] = []
        for item, key in zip(batch, keys, strict=True):
            if key in fresh:  # the first of the batch with this key
                fresh.discard(key)
                effects.extend(self.handle(item))
            else:
                self.counts["duplicates"] += 1
        previous = self.seen
        self.seen = previous.add(keys, offset=offset)
        if self.seen is previous and not effects:
            self.persisted(previous)
            return
        self.commit(effects, inbound=True)

    def commit(self, effects: list[Effect], *, inbound: bool = False) -> None:
        """Save the seen log, the chats and the outbox, then run ``effects`` (in ``persist``'s
        outcome); ``inbound``: the save of a received batch (``persisted`` follows)."""
        self.version += 1
        durable = Durable(
            seen=self.seen,
            chats=tuple(self.chats.chats.values()),
            outbox=tuple(self.outbox.values()),
            streams=tuple(self.streams.items()),
            version=self.version,
        )
        self.start_wait(self._save, durable, effects, inbound, tag="persist", timeout=30.0)

    async def _save(self, durable: Durable, effects: list[Effect], inbound: bool) -> tuple[Durable, list[Effect], bool]:
        return await self.state_file.save(durable), effects, inbound

    def stream_saved_effects(self, turn_id: str) -> list[Effect]:
        saved = self.stream_saved.pop(turn_id, None)
        if saved is None:
            return []
        return [lambda: self.reactor.call_soon(saved.set)]

    def persisted(self, log_: SeenLog) -> None:
        """The log up to ``log_`` is on disk (pollers poll again here)."""

    def dedup_key(self, message: PlatformMessage) -> str:
        return f"{message.chat_id}/{message.message_id}"

    def handle(self, message: PlatformMessage) -> list[Effect]:
        """Decide one new message (the chats change now); the effects run once it is saved."""
        access = decide_access(message, self.policy, ())
        if access == "allow":
            return self.allowed(message)
        if access == "pair":
            return [lambda: self.pair(message)]
        return []

    def pair(self, message: PlatformMessage) -> None:
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
            self.commit(self.allowed(message))
            return
        self.counts["refused"] += 1
        if code is not None:
            text = f"Hi! I don't know you yet. Your pairing code is {code}.\nAsk the owner of this bot to run: hermes pairing approve {self.platform} {code}"
            self.execute([Reply(message, text, final=False)])

    def allowed(self, message: PlatformMessage) -> list[Effect]:
        command = message.text.strip().split(maxsplit=1)[0].lower() if message.text.strip() else ""
        command = command.split("@", 1)[0]  # /stop@botname in groups
        if command == "/stop":
            self.chats, actions = self.chats.on_stop(message)
        elif command in ("/approve", "/deny"):
            named = [w[1:] for w in message.text.split()[1:2] if w.startswith("#")]  # a button names its request: "/approve #<id>"
            return [lambda: self.resolve(message, approve=command == "/approve", request_id=named[0] if named else "")]
        else:
            self.chats, actions = self.chats.on_message(message)
        return [lambda: self.execute(actions)]

    def resolve(self, message: PlatformMessage, *, approve: bool, request_id: str = "") -> None:
        """Answer the approval the chat's turn waits for (``/approve``, ``/deny``, a button;
        a button of an earlier approval never answers a later one)."""
        request = self.approvals.get(key_of(message))
        if request is None or (request_id and not request.request_id.endswith(request_id)):
            self.execute([Reply(message, "Nothing is waiting for an approval.", final=False)])
            return
        del self.approvals[key_of(message)]
        self.tell_session(key_of(message), ResolveApproval(request_id=request.request_id, choice="once" if approve else "deny"))

    # -- effects --------------------------------------------------------------------------

    def execute(self, actions: list[Action]) -> None:
        for action in actions:
            match action:
                case Start(message=message, turn_id=turn_id, interrupt=interrupt):
                    self.follow(message, turn_id, interrupt=interrupt)
                case Reply(message=message, text=text, final=True, turn_id=turn_id) if turn_id:
                    self.send_final(self.outbox[turn_id])
                case Reply(message=message, text=text, final=final):
                    pieces = chunk_text(text, self.limit, self.measure) if self.limit else [text]
                    self.start_wait(self._deliver, message, pieces, "" if not final else "-", tag="deliver", timeout=math.inf)
                case Cancel(session_id=session_id, turn_id=turn_id):
                    self.tell_session(session_id, CancelTurn(turn_id=turn_id, reason="stopped from the chat (/stop)"))

    def follow(self, message: PlatformMessage, turn_id: str, *, interrupt: bool, resume: bool = False) -> None:
        """Start (or, ``resume``, re-attach to) the turn ``turn_id`` of ``message``'s chat, as one wait."""
        start = StartTurn(text=message.text, turn_id=turn_id, policy="interrupt" if interrupt else "queue", instructions=self.instructions(message))
        registry = self._context().registry
        store = self.home / "state.db" if resume else None
        stream, prepare = self.streamer(message, turn_id), self.preparer(message)
        self.start_wait(
            follow_turn,
            registry,
            self.reactor,
            self.hubs,
            key_of(message),
            start,
            self.address.tell,
            TURN_DEADLINE,
            store,
            stream,
            prepare,
            tag="turn",
            timeout=math.inf,
        )

    def streamer(self, message: PlatformMessage, turn_id: str) -> Stream | None:
        """What shows the turn's answer while it runs (platforms that edit messages; None: the final reply only)."""
        return None

    def preparer(self, message: PlatformMessage) -> Prepare | None:
        """What turns ``message``'s files into the turn's input (platforms that take files; None: text only)."""
        return None

    def send_final(self, owed: Outgoing) -> None:
        pieces = chunk_text(owed.text, self.limit, self.measure) if self.limit else [owed.text]
        self.start_wait(self._deliver, owed.message, pieces, owed.turn_id, tag="deliver", timeout=math.inf)

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
        if not actions:
            return
        for action in actions:
            if isinstance(action, Reply) and action.turn_id:
                self.outbox[action.turn_id] = Outgoing(turn_id=action.turn_id, message=action.message, text=action.text)
        self.commit([lambda: self.execute(actions)])  # the outbox and the chats on disk before the reply goes

    async def _deliver(self, message: PlatformMessage, pieces: list[str], final: str, markup: Any = None) -> tuple[str, int, str]:
        """``(final, retries, why it was given up or "")``: the outcome always names the reply."""
        import trio

        try:
            with trio.fail_after(DELIVERY_DEADLINE):
                retries = await self.deliver(message, pieces, markup)
            if final and final != "-":
                with trio.CancelScope(shield=True):  # a stop now must not leave a sent reply owed
                    await self.state_file.mark_sent(final)
            return final, retries, ""
        except trio.TooSlowError:
            return final, 0, f"not sent within {DELIVERY_DEADLINE:g} s"
        except Exception as exc:
            return final, 0, str(exc) or type(exc).__name__

    async def deliver(self, message: PlatformMessage, pieces: list[str], markup: Any = None) -> int:
        """Send ``pieces`` to ``message``'s chat (``markup``: the platform's buttons, or its extras for a final reply), retrying by :func:`retry_delay`; returns the retries made (subclasses)."""
        raise NotImplementedError

    def delivered(self, status: str, value: Any, error: str) -> None:
        """A reply went (or was given up). ``value`` is ``(final, retries)``: ``final`` is the
        answered turn's id (its outbox entry goes), ``"-"`` a final reply outside the outbox, ``""`` a notice."""
        if status != "ok":  # _deliver returns every outcome itself: only a bug lands here
            raise RuntimeError(f"a delivery failed ({status}: {error})")
        final, retries, why = value
        self.counts["send_retries"] += retries
        if why:
            log.warning("gateway %s: a reply was given up: %s", self.platform, why)
            self.detail = f"a reply was given up: {why}"
        else:
            self.counts["answered"] += 1 if final else 0
        self.outbox.pop(final, None)  # already out of the file (mark_sent) or given up: gone at the next save
        self.streams.pop(final, None)
        self.stream_saved.pop(final, None)
