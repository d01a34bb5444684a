"""The transcript on screen: session events (and stored transcripts) become widgets.

A turn is a user line, then assistant blocks and tool lines in the order they happened:
text streamed before a tool call stays above that call's line, text after it goes below.
Events of a turn that started before we attached create what they need on the way.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Callable, Sequence

from textual.containers import VerticalScroll
from textual.widget import Widget

from protocols import (
    ApprovalRequested,
    ApprovalResolved,
    ChatMessage,
    ClarificationRequested,
    ContextCompressed,
    MemorySkipped,
    ModelFallback,
    ModelRetrying,
    ReasoningDelta,
    ReviewFinished,
    SessionRecovered,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnQueued,
    TurnRejected,
    TurnStarted,
)

from ._handle import StreamItem, StreamNotice
from ._widgets import AssistantBlock, Notice, NoticeKind, ToolLine, UserLine

NOTICE_KINDS: dict[str, NoticeKind] = {"connected": "dim", "reconnecting": "warn", "gap": "warn", "failed": "error"}


@dataclasses.dataclass
class TurnView:
    turn_id: str
    block: AssistantBlock | None = None
    """Where the next text delta goes; None after a tool call started."""
    blocks: list[AssistantBlock] = dataclasses.field(default_factory=list)
    tools: dict[str, ToolLine] = dataclasses.field(default_factory=dict)


class Conversation:
    """Owns the transcript container; called on the UI's loop only."""

    def __init__(self, log: VerticalScroll, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.log = log
        self.clock = clock
        self.turns: dict[str, TurnView] = {}
        self.running: str | None = None
        """The turn id that runs now, as far as the events tell."""
        self.sent: collections.deque[str] = collections.deque()
        """Texts shown when sent, whose TurnStarted has not arrived yet."""
        self._cancel_notice: Notice | None = None

    async def _add(self, widget: Widget) -> None:
        await self.log.mount(widget)

    async def notice(self, text: str, kind: NoticeKind = "info") -> Notice:
        line = Notice(text, kind)
        await self._add(line)
        return line

    async def user(self, text: str, *, pending: bool = True) -> None:
        """Show what the person sent at once; a ``pending`` text's own TurnStarted will not repeat it."""
        if pending:
            self.sent.append(text)
        await self._add(UserLine(text))

    async def cancelling(self) -> None:
        """The person asked to cancel: say so now; the session's answer updates this line."""
        if self._cancel_notice is None:
            self._cancel_notice = await self.notice("■ cancelling...", "warn")

    async def clear(self) -> None:
        for view in self.turns.values():
            for block in view.blocks:
                await block.finish()
        self.turns.clear()
        self.running = None
        self.sent.clear()
        self._cancel_notice = None
        await self.log.remove_children()

    def tick(self) -> None:
        now = self.clock()
        for view in self.turns.values():
            for line in view.tools.values():
                line.tick(now)

    # -- events -----------------------------------------------------------------------------

    def _turn(self, turn_id: str) -> TurnView:
        view = self.turns.get(turn_id)
        if view is None:
            view = self.turns[turn_id] = TurnView(turn_id)
        return view

    async def _block(self, view: TurnView) -> AssistantBlock:
        if view.block is None:
            view.block = AssistantBlock()
            view.blocks.append(view.block)
            await self._add(view.block)
        return view.block

    async def _settle(self, view: TurnView, final_text: str | None = None) -> None:
        now = self.clock()
        for line in view.tools.values():
            line.interrupt(now)
        for block in view.blocks[:-1]:
            await block.finish()
        if view.blocks:
            await view.blocks[-1].finish(final_text if final_text else None)
        elif final_text:
            block = await self._block(view)
            await block.finish(final_text)
        view.block = None
        if self.running == view.turn_id:
            self.running = None

    async def handle(self, item: StreamItem) -> None:
        now = self.clock()
        match item:
            case StreamNotice(kind=kind, text=text):
                await self.notice(text, NOTICE_KINDS[kind])
            case TurnStarted(turn_id=turn_id, text=text):
                if self.sent and self.sent[0] == text:
                    self.sent.popleft()
                else:
                    await self._add(UserLine(text))  # sent by another client, or before we attached
                self._turn(turn_id)
                self.running = turn_id
                self._cancel_notice = None
            case TurnQueued(position=position):
                await self.notice(f"queued behind the running turn (position {position})", "dim")
            case TurnRejected(reason=reason):
                if self.sent:
                    self.sent.popleft()
                await self.notice(f"not sent: {reason}", "error")
            case TextDelta(turn_id=turn_id, text=text):
                block = await self._block(self._turn(turn_id))
                await block.add_text(text)
            case ReasoningDelta(turn_id=turn_id, text=text):
                block = await self._block(self._turn(turn_id))
                await block.add_reasoning(text)
            case ModelRetrying(attempt=attempt, delay_s=delay, reason=reason):
                await self.notice(f"the model call failed ({reason}); retry {attempt} in {delay:.1f}s", "dim")
            case ModelFallback(from_provider=old, to_provider=new, model=model, reason=reason):
                await self.notice(f"{old} cannot answer ({reason}); this turn goes on with {new} ({model})", "warn")
            case ContextCompressed(tokens_before=before, tokens_after=after, summarised=count):
                await self.notice(f"context compressed: {count} messages summarised, about {before:,} -> {after:,} tokens", "dim")
            case ToolStarted(turn_id=turn_id, call_id=call_id, name=name, arguments=arguments):
                view = self._turn(turn_id)
                if view.block is not None:
                    await view.block.finish()
                    view.block = None
                line = view.tools[call_id] = ToolLine(call_id, name, arguments, now)
                await self._add(line)
            case ToolFinished(turn_id=turn_id, call_id=call_id, name=name, ok=ok, preview=preview):
                view = self._turn(turn_id)
                known = view.tools.get(call_id)
                if known is None:  # it started before we attached
                    known = view.tools[call_id] = ToolLine(call_id, name, "", now)
                    await self._add(known)
                known.finish(ok, preview, now)
            case ApprovalRequested(command=command):
                await self.notice(f"approval asked for: {command}", "warn")
            case ApprovalResolved(choice=choice):
                await self.notice(f"approval: {choice}", "dim" if choice in ("once", "session", "always") else "warn")
            case ClarificationRequested(question=question):
                await self.notice(f"the agent asks: {question}", "info")
            case TurnCompleted(turn_id=turn_id, text=text):
                await self._settle(self._turn(turn_id), text)
            case TurnFailed(turn_id=turn_id, error=error):
                await self._settle(self._turn(turn_id))
                await self.notice(f"✗ the turn failed: {error}", "error")
            case TurnCancelled(turn_id=turn_id, reason=reason):
                await self._settle(self._turn(turn_id))
                text = f"■ cancelled: {reason}"
                if self._cancel_notice is not None:
                    self._cancel_notice.set_text(text)
                    self._cancel_notice = None
                else:
                    await self.notice(text, "warn")
            case SessionRecovered(settled_calls=settled, resumed=resumed):
                what = "continues the turn" if resumed else "its open turn failed"
                await self.notice(f"the session restarted ({settled} unfinished tool calls were not re-run); it {what}", "warn")
            case ReviewFinished(summary=summary, ok=ok, saved=saved):
                await self.notice(f"💾 {summary}" if saved else summary, "dim" if ok else "warn")
            case MemorySkipped(provider=provider, reason=reason, detail=detail):
                await self.notice(f"memory: the {provider} provider was left out of this turn ({reason}: {detail})", "warn")
            case _:
                pass  # UserMessageSaved and events this view does not show

    # -- stored transcripts -------------------------------------------------------------------

    async def show_transcript(self, messages: Sequence[ChatMessage]) -> None:
        """Render a stored conversation (no live widgets: tool lines are already finished)."""
        names: dict[str, ToolLine] = {}
        now = self.clock()
        for message in messages:
            if message.role == "user":
                await self._add(UserLine(message.content or ""))
            elif message.role == "assistant":
                if message.reasoning or message.content:
                    block = AssistantBlock()
                    await self._add(block)
                    if message.reasoning:
                        await block.add_reasoning(message.reasoning)
                    await block.finish(message.content or "")
                for call in message.tool_calls:
                    line = names[call.id] = ToolLine(call.id, call.name, call.arguments, now, timed=False)
                    await self._add(line)
            elif message.role == "tool" and message.tool_call_id in names:
                content = message.content or ""
                names[message.tool_call_id].finish(not content.startswith("[error]"), content[:2000], now)
        for line in names.values():
            line.interrupt(now)  # a call without a stored result
        if messages:
            await self.notice(f"— {len(messages)} stored messages above —", "dim")
