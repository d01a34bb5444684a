"""When a platform call is tried again, pure.

A 429 waits what the platform said (Telegram's ``parameters.retry_after``), a 5xx or a
transport error backs off exponentially (0.5 s doubling to 30 s, jitter from the attempt),
and anything else (400, 401, 403, 404) is not retried: it will not get better by itself.
"""

from __future__ import annotations

BASE = 0.5
CAP = 30.0


class CallFailed(Exception):
    """A platform call that did not succeed: ``status`` 0 for a transport error."""

    def __init__(self, status: int, description: str, retry_after: float | None = None) -> None:
        super().__init__(status, description, retry_after)
        self.status = status
        self.description = description
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"HTTP {self.status}: {self.description}" if self.status else self.description


def retry_delay(failure: CallFailed, attempt: int) -> float | None:
    """Seconds before attempt ``attempt + 1`` (attempts count from 1), or None: give up."""
    if failure.status == 429:
        told = failure.retry_after
        return max(float(told) if told is not None else BASE * 2.0 ** (attempt - 1), 0.0)
    if failure.status == 0 or failure.status >= 500:
        delay = min(CAP, BASE * 2.0 ** (attempt - 1))
        return delay * (0.75 + 0.25 * ((attempt * 7919) % 100) / 100)
    return None
