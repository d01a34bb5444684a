"""What a session needs to know of a tool: its schema for the model, its traits, how to run it.

The tool registry (issue "Tools") produces these; the session runs ``run`` as a wait in
the reactor, so every call is cancellable and has a deadline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ._plan import ToolTraits


@dataclasses.dataclass(frozen=True, slots=True)
class ToolOutput:
    content: str
    ok: bool = True


@dataclasses.dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: Mapping[str, Any]
    """JSON schema of the arguments object."""
    run: Callable[[dict[str, Any]], Awaitable[ToolOutput]]
    traits: ToolTraits = ToolTraits()

    def schema(self) -> dict[str, Any]:
        """The entry of the ``tools`` list sent to the model."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }
