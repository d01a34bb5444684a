"""Context compression as steps of the turn machine: when a pass starts, its summary call, and
the new segment it leaves. Pure, like the machine: effects only, the planning in ``_compress``.

A pass starts before a fresh model call when the prompt's estimate reaches the threshold
(preflight, at most ``max_passes`` a turn), or when a call failed with a context overflow (the
classifier's ``compress`` action). It asks the summary model (``MachineConfig.summary_model``,
else the session's; an unavailable summary model is replaced by the session's once), then
replaces the transcript with head + summary + tail and commits it as the session's next segment
(one write: a crash leaves the old segment or the new one). ``ContextCompressed`` follows the
commit; then the model call the pass came before is made.

A failed summary call never fails the turn: the guard cools down (60 s, then 600 s) and the call
goes ahead uncompressed; a later overflow then fails the turn with the provider's words.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import msgspec

from protocols import ChatMessage, Token
from protocols._session import ContextCompressed
from protocols._store import SegmentStart

from ._compress import CompressionSettings, assemble, fit_to_window, may_compress, needs_compression, plan, prune, record_failure, record_pass
from ._tokens import calibrate, estimate_tokens, message_tokens, request_size
from ._turn_io import CallModel, ModelFailed, ModelReplied, Persist
from ._turn_state import Compressing, PersistingSegment, Turn

if TYPE_CHECKING:
    from ._machine import _Step

UNAVAILABLE = frozenset({"model_not_found", "overloaded", "server"})
"""Summary-call failures that send the summary to the session's own model instead."""


def _settings(run: _Step) -> CompressionSettings | None:
    settings = run.config.compression
    return None if settings is None else fit_to_window(settings, run.config.context_length)


def _sent(run: _Step) -> tuple[ChatMessage, ...]:
    return (ChatMessage(role="system", content=run.state.system_prompt), *run.state.transcript)


def preflight(run: _Step, turn: Turn, now: float) -> bool:
    """Before a fresh model call: start a pass if the prompt is over the threshold (True: started)."""
    settings = _settings(run)
    if settings is None or turn.compressions >= settings.max_passes:
        return False
    tokens = estimate_tokens(_sent(run), ratio=run.state.ratio) + run.config.tools_tokens
    return needs_compression(tokens, run.config.context_length, settings) and start(run, turn, now, settings)


def after_overflow(run: _Step, turn: Turn, now: float) -> bool:
    """A call failed with a context overflow: start a pass if one may run (True: started)."""
    settings = _settings(run)
    return settings is not None and turn.compressions < settings.max_passes and start(run, turn, now, settings)


def start(run: _Step, turn: Turn, now: float, settings: CompressionSettings, *, model: str | None = None) -> bool:
    if may_compress(run.state.guard, now, settings=settings) is not True:
        return False
    estimate = functools.partial(message_tokens, ratio=run.state.ratio)
    pruned = prune(run.state.transcript, estimate=estimate, settings=settings)
    found = plan(pruned.messages, estimate=estimate, settings=settings)
    if found is None:
        return pruned.saved_tokens > 0 and _prune_only(run, turn, pruned.messages, pruned.saved_tokens, settings)
    passes = turn.compressions + 1
    model = run.config.summary_model if model is None else model
    token = Token(step="compress", turn_id=turn.turn_id, n=turn.iteration, attempt=passes, provider=turn.provider)
    run.set_turn(msgspec.structs.replace(turn, compressions=passes, phase=Compressing(token=token, plan=found, model=model)))
    timeout = max(0.001, min(run.config.model_timeout, turn.deadline - now))
    run.effects.append(
        CallModel(token=token, turn_id=turn.turn_id, messages=found.request, use_tools=False, timeout=timeout, provider=turn.provider, model=model)
    )
    return True


def _prune_only(run: _Step, turn: Turn, pruned: tuple[ChatMessage, ...], saved: int, settings: CompressionSettings) -> bool:
    """Nothing worth a summary (the middle, once pruned, is smaller than a summary would be), but
    pruning old tool output made room: the pruned conversation is the next segment, without a
    summary call. Else the bulk pruning removes would stay, and every later call would overflow."""
    before = estimate_tokens(run.state.transcript, ratio=run.state.ratio)
    after = max(0, before - saved)
    guard = record_pass(run.state.guard, tokens_before=before, tokens_after=after, settings=settings)
    run.state = msgspec.structs.replace(run.state, transcript=pruned, guard=guard)
    passes = turn.compressions + 1
    token = Token(step="segment", turn_id=turn.turn_id, n=turn.iteration, attempt=passes)
    phase = PersistingSegment(token=token, tokens_before=before, tokens_after=after, summarised=0)
    run.set_turn(msgspec.structs.replace(turn, compressions=passes, phase=phase))
    segment = SegmentStart(reason="prune", tokens_before=before, tokens_after=after)
    run.effects.append(Persist(token=token, messages=pruned, acked=True, segment=segment))
    return True


def on_summary(run: _Step, turn: Turn, phase: Compressing, reply: ModelReplied) -> None:
    """The summary came: the transcript becomes head + summary + tail, committed as a new segment."""
    compressed = assemble(phase.plan, reply.content)
    before = phase.plan.tokens_before
    after = estimate_tokens(compressed, ratio=run.state.ratio)
    settings = _settings(run) or CompressionSettings()
    guard = record_pass(run.state.guard, tokens_before=before, tokens_after=after, settings=settings)
    run.state = msgspec.structs.replace(run.state, transcript=compressed, guard=guard)
    token = Token(step="segment", turn_id=turn.turn_id, n=turn.iteration, attempt=turn.compressions)
    summarised = len(phase.plan.middle)
    run.set_turn(msgspec.structs.replace(turn, phase=PersistingSegment(token=token, tokens_before=before, tokens_after=after, summarised=summarised)))
    segment = SegmentStart(summary=reply.content, tokens_before=before, tokens_after=after, summarised=summarised)
    run.effects.append(Persist(token=token, messages=compressed, acked=True, segment=segment))


def on_segment_saved(run: _Step, turn: Turn, phase: PersistingSegment, now: float) -> None:
    run.emit(
        ContextCompressed(
            turn_id=turn.turn_id, tokens_before=phase.tokens_before, tokens_after=phase.tokens_after, summarised=phase.summarised, segment=turn.compressions
        )
    )
    run.call_model(turn, now)


def on_summary_failed(run: _Step, turn: Turn, phase: Compressing, failure: ModelFailed) -> None:
    """The summary call failed: once more on the session's model if the summary model is not
    available, else cool down and make the call uncompressed."""
    settings = _settings(run) or CompressionSettings()
    if phase.model and failure.kind in UNAVAILABLE:
        back = msgspec.structs.replace(turn, compressions=turn.compressions - 1)
        if start(run, back, failure.now, settings, model=""):
            return
    unavailable = failure.kind in UNAVAILABLE
    run.state = msgspec.structs.replace(run.state, guard=record_failure(run.state.guard, failure.now, unavailable=unavailable, settings=settings))
    run.call_model(turn, failure.now)


def learn(run: _Step, reply: ModelReplied) -> None:
    """A reply's reported prompt tokens correct the chars-per-token estimate (compression on only).
    The tool schemas' share of them (``tools_tokens``, when tools were offered) is left out: it
    is not the conversation's text."""
    if run.config.compression is not None and reply.input_tokens > 0:
        turn = run.state.turn
        tools = run.config.tools_tokens if turn is not None and not turn.grace else 0  # the schemas it was offered are not text
        ratio = calibrate(run.state.ratio, request_size(_sent(run)), reply.input_tokens - tools)
        if ratio != run.state.ratio:
            run.state = msgspec.structs.replace(run.state, ratio=ratio)
