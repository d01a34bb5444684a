"""Stored responses of the Responses API, least recently used out first."""

from __future__ import annotations

import collections
from typing import Any

MAX_STORED = 1_000


class ResponseStore:
    """Stored response objects, least recently used first out."""

    def __init__(self, limit: int = MAX_STORED) -> None:
        self.limit = limit
        self.items: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()
        self.sessions: dict[str, str] = {}

    def put(self, response: dict[str, Any], session_id: str) -> None:
        self.items[response["id"]] = response
        self.sessions[response["id"]] = session_id
        self.items.move_to_end(response["id"])
        while len(self.items) > self.limit:
            old, _ = self.items.popitem(last=False)
            self.sessions.pop(old, None)

    def get(self, response_id: str) -> dict[str, Any] | None:
        found = self.items.get(response_id)
        if found is not None:
            self.items.move_to_end(response_id)
        return found

    def delete(self, response_id: str) -> bool:
        self.sessions.pop(response_id, None)
        return self.items.pop(response_id, None) is not None
