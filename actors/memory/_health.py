"""What ``/health/detailed`` says about the memory providers: each one's state and its prefetches.

Written from the provider actors (start, crash) and from the sessions' prefetch waits (their
outcomes), read by the API server: hence the lock. Plain counters, no decision.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any


@dataclasses.dataclass(slots=True)
class _Provider:
    state: str = "starting"
    incarnation: int = 0
    crashes: int = 0
    prefetches: int = 0
    skipped: int = 0
    last_skip: str = ""


class MemoryHealth:
    """Each provider's state (``running``, ``restarting``), restarts and prefetch skips."""

    def __init__(self, providers: tuple[str, ...] = ()) -> None:
        self._lock = threading.Lock()
        self._providers: dict[str, _Provider] = {name: _Provider() for name in providers}

    def started(self, name: str, incarnation: int) -> None:
        with self._lock:
            entry = self._providers.setdefault(name, _Provider())
            entry.state, entry.incarnation = "running", incarnation

    def crashed(self, name: str) -> None:
        with self._lock:
            entry = self._providers.setdefault(name, _Provider())
            entry.state = "restarting"
            entry.crashes += 1

    def prefetched(self, name: str, outcome: str, detail: str = "") -> None:
        with self._lock:
            entry = self._providers.setdefault(name, _Provider())
            entry.prefetches += 1
            if outcome in ("timeout", "error", "unavailable"):
                entry.skipped += 1
                entry.last_skip = f"{outcome}: {detail}" if detail else outcome

    def statuses(self) -> dict[str, Any]:
        """The ``memory`` section of ``/health/detailed``: provider name → its record."""
        with self._lock:
            return {name: dataclasses.asdict(entry) for name, entry in sorted(self._providers.items())}
