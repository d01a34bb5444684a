"""Context compression as steps of the turn machine: when a pass starts, its summary call, and
the new segment it leaves. Pure, like the machine: effects only, the planning in ``_compress``.

A pass starts before a fresh model call when the prompt's estimate reaches the threshold
(preflight, at most ``max_passes`` a turn), or when a call failed with a context overflow (the
classifier's ``compress`` action). It asks the summary model (``MachineConfig.summary_model``,
else the session's; an unavailable summary model is replaced by the session's once), then
replaces the transcript with head + summary + tail and commits it as the session's next segment
(one write: a crash leaves the old segment or the new one). ``ContextCompressed`` follows the
commit; then the model call the pass came before is made. When pruning leaves too little between
head and tail to be worth a summary but saves at least ``min_saving`` itself (large old tool
results), the pruned transcript is committed the same way, with no summary call.

A failed summary call never fails the turn: the guard cools down (60 s, then 600 s) and the call
goes ahead uncompressed; a later overflow then fails the turn with the provider's words.

``/compress [topic]`` (``UserInput.compress``) is a turn of its own with no message: one pass,
forced past the pause and the cooldown, the topic kept in detail; the turn's end is committed
with the segment, and it answers with what was saved (or that there was nothing to compress). A
failed summary fails that turn, and the conversation stays as it was.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from protocols import ChatMessage, Token
from protocols._session import ContextCompressed, TurnFailed
from protocols._store import SegmentStart, TurnMark

from ._compress import CompressionSettings, Pruned, assemble, fit_to_window, may_compress, needs_compression, plan, prune, record_failure, record_pass
from ._tokens import RequestSize, TokenRatio, calibrate, estimate_tokens, request_size, token_estimator
from ._turn_io import CallModel, ModelFailed, ModelReplied, Persist
from ._turn_state import Compressing, PersistingSegment, Turn

if TYPE_CHECKING:
    from ._machine import _Step

SCHEMA_RATIO = TokenRatio()
"""The ratio the tool schemas are always counted at (see :func:`_schema_tokens`)."""
UNAVAILABLE = frozenset({"model_not_found", "overloaded", "server"})
"""Summary-call failures that send the summary to the session's own model instead."""


def _settings(run: _Step) -> CompressionSettings | None:
    settings = run.config.compression
    return None if settings is None else fit_to_window(settings, run.config.context_length)


def _sent(run: _Step) -> tuple[ChatMessage, ...]:
    return (ChatMessage(role="system", content=run.state.system_prompt), *run.state.transcript)


def _schema_tokens(run: _Step) -> int:
    """The tool schemas' tokens, at a fixed 4 characters a token: their JSON's density is its own,
    not the conversation's, so the ratio a session learns is not applied to them (measured in
    bench_compression: calibrated against real tokenizers, p90 error 7.6 % this way, 10 % when
    the schemas followed the learned ratio)."""
    return run.config.tools_size.tokens(SCHEMA_RATIO)


def _size(run: _Step, *, tools: bool) -> RequestSize:
    """The size of the next call's request: the conversation, and the tool schemas (as fixed
    tokens) if they go too."""
    sent = request_size(_sent(run))
    return RequestSize(chars=sent.chars, fixed=sent.fixed + _schema_tokens(run)) if tools else sent


def preflight(run: _Step, turn: Turn, now: float) -> bool:
    """Before a fresh model call: start a pass if the prompt is over the threshold (True: started)."""
    settings = _settings(run)
    if settings is None or turn.compressions >= settings.max_passes:
        return False
    # Each message estimated once: the sum decides, and a pass it starts plans with the same list.
    estimate = token_estimator(run.state.ratio)
    each = [estimate(m) for m in run.state.transcript]
    prompt = estimate(ChatMessage(role="system", content=run.state.system_prompt)) + _schema_tokens(run)
    return needs_compression(prompt + sum(each), run.config.context_length, settings) and start(run, turn, now, settings, tokens=each)


def after_overflow(run: _Step, turn: Turn, now: float) -> bool:
    """A call failed with a context overflow: start a pass if one may run (True: started)."""
    settings = _settings(run)
    return settings is not None and turn.compressions < settings.max_passes and start(run, turn, now, settings)


def on_requested(run: _Step, turn: Turn, now: float) -> None:
    """A ``/compress`` turn is recorded: one pass, forced past the pause and the cooldown. With
    compression off in config.yaml it still runs, on the default settings for the window."""
    settings = _settings(run) or fit_to_window(CompressionSettings(), run.config.context_length)
    if start(run, turn, now, settings):
        return
    count = len(run.state.transcript)
    text = f"Nothing to compress: the conversation ({count} messages) is no longer than what compression keeps (its first messages and the recent ones)."
    _end_requested(run, turn, text, now)


def _end_requested(run: _Step, turn: Turn, text: str, now: float, *, recorded: bool = False) -> None:
    """A ``/compress`` turn ends: its answer is the outcome (recorded with the segment's write,
    or in a write of its own)."""
    if not recorded:
        token = Token(step="end", turn_id=turn.turn_id)
        run.effects.append(Persist(token=token, messages=(), turn=TurnMark(turn_id=turn.turn_id, event="completed")))
    run.finish(turn, text, now)


def start(run: _Step, turn: Turn, now: float, settings: CompressionSettings, *, model: str | None = None, tokens: list[int] | None = None) -> bool:
    """Plan a pass and start it (True), or say none can run now. ``tokens``: each message's
    estimate at the session's ratio, when the caller has them (preflight)."""
    forced = turn.focus is not None
    if may_compress(run.state.guard, now, forced=forced, settings=settings) is not True:
        return False
    estimate = token_estimator(run.state.ratio)
    pruned = prune(run.state.transcript, estimate=estimate, settings=settings, tokens=tokens)
    found = plan(pruned.messages, estimate=estimate, settings=settings, focus=turn.focus or None, tokens=pruned.tokens)
    if found is None:
        return _commit_pruned(run, turn, pruned, settings)
    passes = turn.compressions + 1
    model = run.config.summary_model if model is None else model
    token = Token(step="compress", turn_id=turn.turn_id, n=turn.iteration, attempt=passes, provider=turn.provider)
    run.set_turn(msgspec.structs.replace(turn, compressions=passes, phase=Compressing(token=token, plan=found, model=model)))
    timeout = max(0.001, min(run.config.model_timeout, turn.deadline - now))
    run.effects.append(
        CallModel(token=token, turn_id=turn.turn_id, messages=found.request, use_tools=False, timeout=timeout, provider=turn.provider, model=model)
    )
    return True


def _commit_pruned(run: _Step, turn: Turn, result: Pruned, settings: CompressionSettings) -> bool:
    """No summary is worth asking for (pruning left the middle smaller than a summary's budget), but
    pruning alone saves at least ``min_saving``: commit the pruned transcript as the next segment,
    with no model call (True: committing). Without this, old tool results that pruning would shrink
    stayed whole until the window overflowed, and the overflow then failed the turn."""
    before, saved, pruned = result.tokens_before, result.saved_tokens, result.messages
    if before <= 0 or saved < before * settings.min_saving:
        return False
    passes = turn.compressions + 1
    guard = record_pass(run.state.guard, tokens_before=before, tokens_after=before - saved, settings=settings)
    run.state = msgspec.structs.replace(run.state, transcript=pruned, guard=guard)
    token = Token(step="segment", turn_id=turn.turn_id, n=turn.iteration, attempt=passes)
    run.set_turn(
        msgspec.structs.replace(
            turn, compressions=passes, phase=PersistingSegment(token=token, tokens_before=before, tokens_after=before - saved, summarised=0)
        )
    )
    segment = SegmentStart(reason="prune", tokens_before=before, tokens_after=before - saved)
    run.effects.append(Persist(token=token, messages=pruned, acked=True, segment=segment, turn=_end_mark(turn)))
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
    run.effects.append(Persist(token=token, messages=compressed, acked=True, segment=segment, turn=_end_mark(turn)))


def _end_mark(turn: Turn) -> TurnMark | None:
    """A /compress turn ends with its segment: both are committed in one write, or neither."""
    return TurnMark(turn_id=turn.turn_id, event="completed") if turn.focus is not None else None


def on_segment_saved(run: _Step, turn: Turn, phase: PersistingSegment, now: float) -> None:
    run.emit(
        ContextCompressed(
            turn_id=turn.turn_id, tokens_before=phase.tokens_before, tokens_after=phase.tokens_after, summarised=phase.summarised, segment=turn.compressions
        )
    )
    if turn.focus is None:
        run.call_model(turn, now)
        return
    saving = f"about {phase.tokens_before:,} -> {phase.tokens_after:,} tokens"
    text = f"Compressed the conversation: {phase.summarised} messages summarised, {saving}."
    if not phase.summarised:
        text = f"Shrank old tool results, {saving} (too little was left to be worth a summary)."
    _end_requested(run, turn, text, now, recorded=True)


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
    if turn.focus is None:
        run.call_model(turn, failure.now)
        return
    error = f"the summary call failed ({failure.detail or failure.kind}); the conversation is unchanged, run /compress again later"
    run.end_turn(turn, TurnFailed(turn_id=turn.turn_id, error=error, kind="compression"), failure.now)


def learn(run: _Step, turn: Turn, reply: ModelReplied) -> None:
    """A reply's reported prompt tokens correct the chars-per-token estimate (compression on only).
    The count covers the tool schemas too when they were sent (every call but the grace call)."""
    if run.config.compression is not None and reply.input_tokens > 0:
        ratio = calibrate(run.state.ratio, _size(run, tools=not turn.grace), reply.input_tokens)
        if ratio != run.state.ratio:
            run.state = msgspec.structs.replace(run.state, ratio=ratio)
