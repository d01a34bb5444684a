"""Inbound dedup, pure: the message ids a platform has delivered, bounded, oldest forgotten first.

The adapter persists the log (with the platform's poll offset) before it starts the turns of a
batch, so a message delivered again, also after a restart, is dropped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from typing import cast

KEEP = 10_000
"""Ids remembered per platform: far more than a platform redelivers after an outage."""


@dataclasses.dataclass(frozen=True)
class SeenLog:
    ids: tuple[str, ...] = ()
    offset: int = 0
    """The platform's poll position (Telegram: the next ``update_id``); 0 when it has none."""
    version: int = 0
    """Counts changes: a write of an older version never replaces a newer one."""

    def seen(self, message_id: str) -> bool:
        return message_id in self._set()

    def _set(self) -> AbstractSet[str]:
        """The ids as a set: built once, then handed on from each log to the one :meth:`add`
        makes (updated in place: a batch costs its own size, not 10,000 ids); a log whose set was
        handed on builds its own again if it is asked."""
        cached = self.__dict__.get("_cache")
        if cached is None or cached[0] is not self.ids:
            cached = (self.ids, set(self.ids))
            object.__setattr__(self, "_cache", cached)
        members: AbstractSet[str] = cached[1]
        return members

    def fresh(self, message_ids: Iterable[str]) -> list[str]:
        """The ids not seen before, each once, in order."""
        known = self._set()  # not copied (10,000 ids): the batch's own ids are kept apart
        batch: set[str] = set()
        out = []
        for message_id in message_ids:
            if message_id not in known and message_id not in batch:
                batch.add(message_id)
                out.append(message_id)
        return out

    def add(self, message_ids: Iterable[str], *, offset: int | None = None) -> SeenLog:
        new = self.fresh(message_ids)
        moved = offset is not None and offset != self.offset
        if not new and not moved:
            return self
        kept = tuple(new)[-KEEP:]
        drop = max(0, len(self.ids) + len(kept) - KEEP)
        ids = self.ids[drop:] + kept
        log = SeenLog(ids=ids, offset=self.offset if offset is None else offset, version=self.version + 1)
        members = cast("set[str]", self._set())
        self.__dict__.pop("_cache")  # handed on: this log builds its own if it is asked again
        members.update(kept)
        members.difference_update(self.ids[:drop])
        object.__setattr__(log, "_cache", (ids, members))
        return log
