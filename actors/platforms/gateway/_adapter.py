"""The base of every platform adapter actor (``/platforms/<name>``).

An adapter executes the gateway's decisions; it decides nothing itself:

- inbound: a batch of :class:`PlatformMessage` (from a poll, a webhook request) is deduped
  (:class:`SeenLog`), screened by the ``pre_gateway_dispatch`` hooks (a wait, ``_dispatch_hook``:
  skip, rewrite, allow) and decided: each message is checked (:func:`decide_access`, pairing as
  a wait on the shared book), slash commands (``_chat_commands``) answer or ask the session, a
  burst of a chat's messages is held and joined (``_burst``, a timer), a stale session is
  replaced (``_resets``) and the busy policy (:class:`Chats`) changes the chats; a new turn's
  ``StartTurn`` is told at once (an :class:`Early` effect, ``_effects.py``), the seen log and the
  chats are saved together (:class:`StateFile`, a reactor wait) and only then are the other
  decided effects run (and, for a poller, the batch confirmed to the platform);
- a turn is one wait (:func:`follow_turn`) that ends with the turn's end event; where the
  reply a completed end gets is decided when the turn starts (:class:`AnswerPlan`), that wait
  sends it itself and tells the actor (:class:`Answering`), one hop instead of three;
- a final reply goes into the outbox and is sent at once as one wait (the subclass's
  ``deliver``) that retries by :func:`retry_delay`, while the outbox is saved (with the chat's
  end); it is taken out of the file once sent (``mark_sent``);
- a restarted adapter sends what its outbox holds and re-attaches to every saved chat's turn
  (``follow_turn`` with the store), so a crash mid-turn still ends in exactly one reply;
- a graceful stop (``stopping``) lets a final reply in flight end and be marked sent, then
  writes the adapter's last state, before the incarnation ends (``STOP_DEADLINE``).

Subclasses implement ``begin`` (start polling or serving), ``deliver`` (send the pieces of one
reply) and may override ``limit`` / ``measure`` (chunking).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import msgspec
import trio

from actors import Actor
from actors._errors import ReactorStopped
from actors.agent import HubRegistry
from actors.agent._address import SESSIONS_PATH, tell_session
from actors.platforms._slash_commands import lookup, parse
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

from . import _burst
from ._access import AccessPolicy, decide_access
from ._answer_plan import Answering, AnswerPlan, Fired, answer_text
from ._chat_commands import AskSession, Builtin, NewSession, Notice, approval_text, decide_command
from ._chat_sessions import ChatSessions
from ._chats import Action, Cancel, Chats, Reply, Start
from ._chunks import Measure, chunk_text
from ._dedup import SeenLog
from ._dispatch_hook import HOOK, screen
from ._edit_stream import StreamSettings
from ._effects import Early, Effect, split
from ._fast_paths import FastPaths
from ._inbound_lane import instructions_for
from ._pairing_door import PairingDoor
from ._resets import ChatSession, ResetPolicy, chat_key_of
from ._session_key import key_of
from ._state_file import Durable, Outgoing, StateFile, restore
from ._waits import Prepare, Stream, follow_turn

log = logging.getLogger(__name__)

AdapterInbox = WaitFinished | Answering | AdapterStatusRequest | AdapterTimer | ApprovalRequested | PlatformMessage | StreamOpened | Literal["port"]
"""What an adapter takes: its waits' ends, status requests, its timers, approval requests of the
turns it follows, inbound messages (a webhook request tells them), ``ask("port")``."""

SESSION_FIRES = frozenset({"model", "undo", "compress"})
"""Commands whose ``command:<name>`` hook the session fires itself (as for the API and the TUI)."""
TURN_DEADLINE = 3600.0
"""Seconds the gateway follows one turn (the session's own deadline ends it sooner)."""
DELIVERY_DEADLINE = 900.0
"""Seconds one reply is retried before it is given up (logged)."""
STOP_DEADLINE = 3.0
"""Seconds a graceful stop waits for the replies in flight and the last save (under the
supervisor's 5 s for a worker's stop)."""


class GatewayAdapter(ChatSessions, PairingDoor, FastPaths, Actor[AdapterInbox]):
    """One chat platform: inbound messages to sessions, each turn's end back as one reply."""

    platform = "platform"
    limit = 0
    """The platform's message length limit (0: none)."""
    measure: Measure = len
    takes_commands = True
    """Whether a text starting with ``/`` is a slash command (a webhook's prompt is not)."""

    def __init__(
        self,
        *,
        home: Path,
        hubs: HubRegistry,
        policy: AccessPolicy,
        chats: Chats,
        context: str = "",
        senders: dict[str, Any] | None = None,
        hooks: Any = None,
        resets: ResetPolicy | None = None,
        burst_window: float = 0.0,
        tz: dt.tzinfo | None = None,
        clock: Callable[[], float] = time.time,
        stream: StreamSettings | None = None,
        workspace: Path | None = None,
        vision: bool = False,
    ) -> None:
        super().__init__()
        self.stream_settings = stream or StreamSettings()
        """Streaming by edits, where the platform edits messages (``_edit_stream``)."""
        self.workspace = workspace or Path.cwd()
        """Where inbound files are saved and ``MEDIA:`` files may come from (with ``HERMES_HOME/cache``)."""
        self.vision = vision
        """Whether the model sees images (an inbound image is an image part, else a note)."""
        self.hooks = hooks
        """The runtime's :class:`actors.hooks.Hooks` (None: no hooks)."""
        self.reset_policy = resets or ResetPolicy()
        self.burst_window = burst_window
        self.tz = tz
        self.clock = clock
        self.sessions: dict[str, ChatSession] = {}
        """Chat key -> its session's generation and last message time (``_resets``)."""
        self.bursts: dict[str, _burst.Burst] = {}
        self.screening: list[tuple[list[PlatformMessage], int | None]] = []
        """Batches waiting for (the first: in) the ``pre_gateway_dispatch`` hooks, in order."""
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
        self.newest: Durable | None = None
        """The newest state decided (maybe not saved yet): a sent reply's ``mark_sent`` writes it
        if no save did yet, so the chat's end is on disk once its reply is confirmed."""
        self.state: AdapterState = "starting"
        self.detail = ""
        self.counts = dict.fromkeys(("received", "answered", "duplicates", "refused", "send_retries"), 0)
        self.approvals: dict[str, ApprovalRequested] = {}
        """Session id -> the approval its running turn waits for."""
        self.start_fast_paths()

    # -- lifecycle ------------------------------------------------------------------------

    def started(self) -> None:
        saved = self.state_file.load()
        self.seen, self.version = saved.seen, saved.version
        self.chats = restore(self.chats, saved)
        live = {c.running for c in self.chats.chats.values()} | {o.turn_id for o in saved.outbox}
        self.streams = {turn: mid for turn, mid in saved.streams if turn in live}
        self.sessions = dict(saved.sessions)
        for owed in saved.outbox:  # decided, maybe sent: sent again at most once (a crash in between is the one gap)
            self.outbox[owed.turn_id] = owed
            self.send_final(owed)
        for chat in self.chats.chats.values():
            self.follow(chat.message, chat.running, interrupt=False, resume=True, session_id=chat.session())
        if saved.held:  # a burst held when the adapter stopped goes now
            grouped: dict[str, list[PlatformMessage]] = {}
            for held in saved.held:
                grouped.setdefault(key_of(held), []).append(held)
            self.commit([effect for group in grouped.values() for effect in self.dispatch(_burst.joined(tuple(group)))])
        if saved.chats or saved.outbox:
            log.info("gateway %s: re-attached to %d turn(s), %d reply(ies) owed", self.platform, len(saved.chats), len(saved.outbox))
        self.begin()
        send = self.scheduled_sender()
        if self.senders is not None and send is not None:
            self.senders[self.platform] = send

    def stopping(self) -> None:
        """A graceful stop (not a crash): the incarnation's waits end now, but a final reply
        whose send is in flight finishes it (its call is shielded) and is marked sent; then the
        adapter's last state is written. Both within :data:`STOP_DEADLINE`, before the
        incarnation ends, so the next one (a restart, a new ``hermes serve``) neither answers a
        sent reply again nor misses what this one decided."""
        if self.context is None:
            return
        done = threading.Event()
        try:
            for end in self.close_desk():  # none fires from now on; a fired one's chat end is decided now
                self.answering(end)
            self.reactor.cancel_owner(self.actor_urn)  # polls, retry sleeps, followed turns: now
            self.reactor.call_soon(trio.lowlevel.spawn_system_task, self._settle, self.durable(), done.set)
        except ReactorStopped:
            return  # the reactor is gone (its waits with it): nothing is in flight
        if not done.wait(STOP_DEADLINE + 1.0):
            log.warning("gateway %s: the state was not settled within %g s at stop", self.platform, STOP_DEADLINE)

    async def _settle(self, state: Durable, done: Callable[[], None]) -> None:
        try:
            with trio.CancelScope(deadline=trio.current_time() + STOP_DEADLINE, shield=True) as scope:
                await self.state_file.settle(state)
            if scope.cancelled_caught:
                log.warning("gateway %s: a reply's send or the last save did not end within %g s of the stop", self.platform, STOP_DEADLINE)
        except Exception:  # a system task must not raise
            log.exception("gateway %s: the last save at stop failed", self.platform)
        finally:
            done()

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
            case Answering(end=end):
                self.answering(end)
            case StreamOpened(turn_id=turn_id, message_id=message_id):
                self.streams[turn_id] = message_id
                # a restart edits this message, not a second one; the stream edits only once it is saved
                self.commit(self.stream_saved_effects(turn_id))
            case AdapterTimer(what="burst"):
                self.burst_due()
            case WaitFinished(tag="screen", status=status, value=value):
                batch, offset = self.screening.pop(0)
                self.decide(batch, offset, value if status == "ok" else {})
                if self.screening:
                    self.screen_next()
            case WaitFinished(tag="ask", status=status, value=value, error=error):
                self.asked(status, value, error)
            case ApprovalRequested():
                self.approvals[message.session_id] = message
                chat = self.chats.chats.get(chat_key_of(message.session_id))
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
            case WaitFinished(tag="answered-turn", status=status, value=value, error=error):
                self.answered_turn(status, value, error)
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
        """Dedup a batch, decide what is new, save the log with the chats, then run the effects
        (the ``pre_gateway_dispatch`` hooks first, when any is registered: batches wait their turn)."""
        self.counts["received"] += len(batch)
        if self.screened():
            self.screening.append((batch, offset))
            if len(self.screening) == 1:
                self.screen_next()
            return
        self.decide(batch, offset, {})

    def _fresh(self, batch: list[PlatformMessage]) -> list[int]:
        """The indexes of the batch's new messages (the first of each key not seen before)."""
        keys = [self.dedup_key(m) for m in batch]
        fresh = set(self.seen.fresh(keys))
        found = []
        for index, key in enumerate(keys):
            if key in fresh:
                fresh.discard(key)
                found.append(index)
        return found

    def screen_next(self) -> None:
        batch, _ = self.screening[0]
        indexes = self._fresh(batch)
        self.start_wait(self._screen, batch, indexes, tag="screen", timeout=60.0 + 310.0 * len(indexes))

    async def _screen(self, batch: list[PlatformMessage], indexes: list[int]) -> dict[int, tuple[str, str]]:
        verdicts = await screen(self.hooks, [batch[i] for i in indexes])
        return dict(zip(indexes, verdicts, strict=True))

    def decide(self, batch: list[PlatformMessage], offset: int | None, verdicts: dict[int, tuple[str, str]]) -> None:
        keys = [self.dedup_key(m) for m in batch]
        fresh = set(self._fresh(batch))
        effects: list[Effect] = []
        for index, item in enumerate(batch):
            if index not in fresh:
                self.counts["duplicates"] += 1
                continue
            action, detail = verdicts.get(index, ("allow", ""))
            if action == "skip":  # marked seen all the same: it is not delivered again
                log.info("gateway %s: message %s skipped by %s%s", self.platform, item.message_id, HOOK, f" ({detail})" if detail else "")
                continue
            effects.extend(self.handle(msgspec.structs.replace(item, text=detail) if action == "rewrite" else item))
        early, effects = split(effects)
        for effect in early:  # the fast path first: the turns' StartTurn (``_effects.py``)
            effect()
        self.laned.clear()
        self.told_by_lane.clear()  # a laned turn started later (the chat got busy meanwhile) is told again: dropped as known
        previous = self.seen
        self.seen = previous.add(keys, offset=offset)
        if self.seen is previous and not effects:
            self.persisted(previous)
            return
        self.commit(effects, inbound=True)

    def commit(self, effects: list[Effect], *, inbound: bool = False) -> None:
        """Save the seen log, the chats and the outbox, then run ``effects`` (in ``persist``'s
        outcome), their leading :class:`Early` ones at once; ``inbound``: the save of a received
        batch (``persisted`` follows)."""
        early, effects = split(effects)
        durable = self.durable()
        self.newest = durable  # before the early effects: a reply they send writes it if the save did not yet
        for effect in early:  # the fast path: safe before the save (``_effects.py``)
            effect()
        self.start_wait(self._save, durable, effects, inbound, tag="persist", timeout=30.0)

    def durable(self) -> Durable:
        """The adapter's state now, as the next version to save."""
        self.version += 1
        held = tuple(m for burst in self.bursts.values() for m in burst.messages)
        return Durable(
            seen=self.seen,
            chats=tuple(self.chats.chats.values()),
            outbox=tuple(self.outbox.values()),
            streams=tuple(self.streams.items()),
            version=self.version,
            sessions=dict(self.sessions),
            held=held,
        )

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

    def allowed(self, message: PlatformMessage) -> list[Effect]:
        """A message of an allowed user: a command, or a message for the agent (held while a burst lasts)."""
        parsed = parse(message.text) if self.takes_commands else None
        if parsed is None:
            return self.hold(message) if self.burst_window > 0 else self.dispatch(message)
        effects = self.release(key_of(message))  # a burst held before the command goes first
        decision = decide_command(parsed, running=key_of(message) in self.chats.chats)
        if lookup(parsed.name, "gateway") is not None and parsed.name not in SESSION_FIRES:
            session_id = self.current_session(key_of(message))
            context = {"platform": self.platform, "user_id": message.user_id, "session_id": session_id, "command": parsed.name, "args": parsed.argument}
            effects.append(lambda: self.fire([(f"command:{parsed.name}", context, self.where(session_id))]))
        match decision:
            case Builtin(name="stop"):
                self.chats, actions = self.chats.on_stop(message)
                effects.append(lambda: self.execute(actions))
            case Builtin(name=name):
                named = [w[1:] for w in parsed.argument.split()[:1] if w.startswith("#")]  # a button names its request: "/approve #<id>"
                effects.append(lambda: self.resolve(message, approve=name == "approve", request_id=named[0] if named else ""))
            case Notice(text=text):
                effects.append(lambda: self.execute([Reply(message, text, final=False)]))
            case NewSession():
                effects += self.new_session(message, "new")
                effects.append(lambda: self.execute([Reply(message, "Started a new session; the last one is kept.", final=False)]))
            case AskSession(what=what, argument=argument):
                effects.append(lambda: self.ask(message, what, argument))
        return effects

    def resolve(self, message: PlatformMessage, *, approve: bool, request_id: str = "") -> None:
        """Answer the approval the chat's turn waits for (``/approve``, ``/deny``, a button;
        a button of an earlier approval never answers a later one)."""
        session_id = self.current_session(key_of(message))
        request = self.approvals.get(session_id)
        if request is None or (request_id and not request.request_id.endswith(request_id)):
            self.execute([Reply(message, "Nothing is waiting for an approval.", final=False)])
            return
        del self.approvals[session_id]
        self.tell_session(session_id, ResolveApproval(request_id=request.request_id, choice="once" if approve else "deny"))

    # -- effects --------------------------------------------------------------------------

    def execute(self, actions: list[Action]) -> None:
        for action in actions:
            match action:
                case Start(message=message, turn_id=turn_id, interrupt=interrupt, session_id=session_id):
                    self.follow(message, turn_id, interrupt=interrupt, session_id=session_id)
                case Reply(message=message, text=text, final=True, turn_id=turn_id) if turn_id:
                    self.send_final(self.outbox[turn_id])
                case Reply(message=message, text=text, final=final):
                    pieces = chunk_text(text, self.limit, self.measure) if self.limit else [text]
                    self.start_wait(self._deliver, message, pieces, "" if not final else "-", tag="deliver", timeout=math.inf)
                case Cancel(session_id=session_id, turn_id=turn_id):
                    self.tell_session(session_id, CancelTurn(turn_id=turn_id, reason="stopped from the chat (/stop)"))

    def follow(self, message: PlatformMessage, turn_id: str, *, interrupt: bool, resume: bool = False, session_id: str = "") -> None:
        """Start (or, ``resume``, re-attach to) the turn ``turn_id`` of ``message``'s chat
        (in ``session_id``, else the chat's key), as one wait."""
        start = StartTurn(text=message.text, turn_id=turn_id, policy="interrupt" if interrupt else "queue", instructions=self.instructions(message))
        registry = self._context().registry
        stream, prepare = self.streamer(message, turn_id), self.preparer(message)
        told = not resume and prepare is None
        if told and turn_id not in self.told_by_lane:  # the fast path: told now, from this thread; the wait follows it from the hub's first kept event
            self.tell_session(session_id or key_of(message), start)
        to = self.chats.answer_to(key_of(message), turn_id) if not resume and stream is None else None
        plan = AnswerPlan(turn_id, to) if to is not None else None
        if plan is not None:
            self.plans[turn_id] = plan
        self.start_wait(
            *((follow_turn,) if plan is None else (self._follow_and_answer, plan)),
            registry,
            self.reactor,
            self.hubs,
            session_id or key_of(message),
            start,
            self.address.tell,
            TURN_DEADLINE,
            self.home / "state.db",  # every turn: a redelivered message's turn may have run already (``_effects.py``)
            stream,
            prepare,
            told,
            tag="turn" if plan is None else "answered-turn",
            timeout=math.inf,
        )

    def streamer(self, message: PlatformMessage, turn_id: str) -> Stream | None:
        """What shows the turn's answer while it runs (platforms that edit messages; None: the final reply only)."""
        return None

    def preparer(self, message: PlatformMessage) -> Prepare | None:
        """What turns ``message``'s files into the turn's input (platforms that take files; None: text only)."""
        return None

    def send_final(self, owed: Outgoing) -> None:
        pieces, markup = self.final_call(owed, self.streams.get(owed.turn_id, ""))
        self.start_wait(self._deliver, owed.message, pieces, owed.turn_id, markup, tag="deliver", timeout=math.inf)

    def final_call(self, owed: Outgoing, streamed: str) -> tuple[list[str], Any]:
        """A final reply's pieces and the ``markup`` :meth:`deliver` takes (``streamed``: the
        message its answer was streamed into, "" for none). Pure: the reactor calls it too."""
        return (chunk_text(owed.text, self.limit, self.measure) if self.limit else [owed.text]), None

    def tell_session(self, session_id: str, command: SessionCommand) -> None:
        registry = self._context().registry
        tell_session(registry, registry.lookup(SESSIONS_PATH), session_id, command)

    def instructions(self, message: PlatformMessage) -> str:
        return instructions_for(message, self.platform, self.context_line)

    def turn_ended(self, status: str, value: Any, error: str, *, sent: AnswerPlan | None = None) -> None:
        """A followed turn's end; ``sent``: its planned reply is being sent already (by the wait)."""
        if status != "ok":  # follow_turn returns every end itself (its deadline included): only a bug lands here
            raise RuntimeError(f"following a turn failed ({status}: {error})")
        event = value
        session_id = event.session_id
        self.approvals.pop(session_id, None)
        match event:
            case TurnCompleted(text=text):
                self.chats, actions = self.chats.on_end(session_id, event.turn_id, answer_text(text))
            case TurnFailed(error=why):
                self.chats, actions = self.chats.on_end(session_id, event.turn_id, f"Sorry, that failed: {why}")
            case TurnRejected(reason=why):
                self.chats, actions = self.chats.on_end(session_id, event.turn_id, f"Not taken: {why}")
            case TurnCancelled():
                self.chats, actions = self.chats.on_end(session_id, event.turn_id, "", cancelled=True)
            case _:
                actions = []
        if not actions:
            if sent is not None:
                self.decided(sent)
            return
        for action in actions:
            if isinstance(action, Reply) and action.turn_id:
                self.outbox[action.turn_id] = Outgoing(turn_id=action.turn_id, message=action.message, text=action.text)
        replies: list[Action] = [a for a in actions if isinstance(a, Reply) and (sent is None or a.turn_id != sent.turn_id)]
        rest: list[Action] = [a for a in actions if not isinstance(a, Reply)]
        # The reply goes at once, while the outbox and the chat's end are saved; the chat's next
        # turn starts only after that save, so a restart in between re-attaches to this turn as
        # the session's last one and finds its answer in the store (``_effects.py``). A planned
        # reply went already: its send marks it sent with the state decided here.
        self.commit([Early(lambda: self.execute(replies)), lambda: self.execute(rest)])
        if sent is not None:
            self.decided(sent)

    async def _deliver(self, message: PlatformMessage, pieces: list[str], final: str, markup: Any = None, fired: Fired | None = None) -> tuple[str, int, str]:
        """``(final, retries, why it was given up or "")``: the outcome always names the reply.
        ``fired``: a planned reply, sent before the actor decided its chat's end: marked sent with
        the state the actor decides (``_answer_plan``: waited for without a short deadline)."""
        import trio

        owed = final and final != "-"
        try:
            async with self.state_file.sending() if owed else contextlib.nullcontext():  # a graceful stop waits for it
                with trio.fail_after(DELIVERY_DEADLINE):
                    retries = await self.deliver(message, pieces, markup)
                if owed:
                    newest = self.newest if fired is None else await self._decision(final, fired)
                    with trio.CancelScope(shield=True):  # a stop now must not leave a sent reply owed
                        await self.state_file.mark_sent(final, newest)
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
