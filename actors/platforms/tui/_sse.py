"""Server-sent events, parsed line by line (the subset ``hermes serve`` sends).

Fields are ``event:``, ``id:`` and ``data:`` (several ``data:`` lines join with newlines);
a line starting with ``:`` is a comment (the server's keepalive); an empty line ends an
event. Unknown fields are ignored, as the SSE specification says.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class ServerEvent:
    event: str
    """The event name (``message`` when the server sent none)."""
    data: str
    id: str | None = None


class SseParser:
    """Feed it lines without their line ending; it returns an event when one is complete."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, line: str) -> ServerEvent | None:
        if not line:
            if not self._data:
                self._event, self._id = "", None
                return None
            done = ServerEvent(event=self._event or "message", data="\n".join(self._data), id=self._id)
            self._event, self._data, self._id = "", [], None
            return done
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            self._id = value
        return None
