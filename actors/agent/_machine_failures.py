"""A failed model call as steps of the turn machine: retry after a back-off, rotate the key,
fall back to the next provider, compress after a context overflow, or fail the turn; bounded by
the attempts and the turn's deadline. Pure, like the machine: effects only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from protocols import Token
from protocols._session import ModelFallback, ModelRetrying, TurnFailed

from . import _machine_compress as compression
from ._retry import ModelError, backoff_delay
from ._turn_io import NO_KEY, ModelFailed, StartTimer
from ._turn_state import BackingOff, Calling, Turn

if TYPE_CHECKING:
    from ._machine import _Step

NO_KEY_MIN_WAIT = 0.5
"""Seconds at least between two leases of a provider whose keys are all benched."""


def on_model_failed(run: _Step, turn: Turn, phase: Calling, failure: ModelFailed) -> None:
    """What a failed call leads to: the classifier's action (retry, rotate the key, fall
    back, compress, fail), bounded by the attempts and the turn's deadline."""
    now = failure.now
    if failure.kind == NO_KEY:  # every key of this provider is benched
        why = "; ".join(part for part in (phase.problem, failure.detail) if part)
        if fall_back(run, turn, why, now):
            return
        wait = max(NO_KEY_MIN_WAIT, failure.retry_after or 0.0)
        transient = failure.benched in ("", "rate_limit")
        if transient and now + wait < turn.deadline:  # a rate limit passes: wait for the first key back
            back_off(run, turn, phase, wait, why, now)
            return
        if transient:
            why += "; that is after this turn's deadline: ask again then, or add a key"
        run.end_turn(turn, TurnFailed(turn_id=turn.turn_id, error=why, kind=failure.benched or "rate_limit"), now)
        return
    error = ModelError(kind=failure.kind, status=failure.status, detail=failure.detail, retry_after=failure.retry_after)  # type: ignore[arg-type]
    attempt = phase.attempt + 1
    action = error.action
    if action == "compress" and compression.after_overflow(run, turn, now):
        return  # the call is made again once the compressed conversation is committed
    if action == "rotate" and attempt < run.config.max_attempts:
        # The host benched the key; the next lease takes another one (or says none is left).
        run.emit(ModelRetrying(turn_id=turn.turn_id, attempt=attempt, delay_s=0.0, reason=f"{error.describe()}; trying another key"))
        run.call_model(turn, now, attempt=attempt, extra=phase.extra, problem=error.describe())
        return
    if action == "retry" and attempt < run.config.max_attempts:
        delay = backoff_delay(attempt, str(phase.token), retry_after=error.retry_after, base=run.config.retry_base, cap=run.config.retry_cap)
        if now + delay < turn.deadline:
            back_off(run, turn, phase, delay, error.describe(), now)
            return
        text = f"{error.describe()}; gave up: waiting {delay:.1f} s more would pass the turn's deadline"
    elif action in ("retry", "rotate"):
        text = f"{error.describe()}; gave up after {attempt} attempts, try again later"
    else:
        text = error.describe()
    if action in ("retry", "rotate", "fallback") and fall_back(run, turn, text, now):
        return
    run.end_turn(turn, TurnFailed(turn_id=turn.turn_id, error=text, kind=error.kind), now)


def back_off(run: _Step, turn: Turn, phase: Calling, delay: float, reason: str, now: float) -> None:
    attempt = phase.attempt + 1
    token = Token(step="model", turn_id=turn.turn_id, n=turn.iteration, attempt=attempt, provider=turn.provider)
    run.set_turn(msgspec.structs.replace(turn, phase=BackingOff(token=token, attempt=attempt, extra=phase.extra)))
    run.effects.append(StartTimer(token=token, delay=delay))
    run.emit(ModelRetrying(turn_id=turn.turn_id, attempt=attempt, delay_s=delay, reason=reason))


def fall_back(run: _Step, turn: Turn, reason: str, now: float) -> bool:
    """Go on with the next provider of the chain, if there is one (the call is made again there)."""
    chain = run.config.providers
    if turn.provider + 1 >= len(chain):
        return False
    (old, _), (new, model) = chain[turn.provider], chain[turn.provider + 1]
    run.emit(ModelFallback(turn_id=turn.turn_id, from_provider=old, to_provider=new, model=model, reason=reason))
    phase = turn.phase
    extra = phase.extra if isinstance(phase, Calling) else ()
    run.call_model(msgspec.structs.replace(turn, provider=turn.provider + 1), now, attempt=0, extra=extra)
    return True
