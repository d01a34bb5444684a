"""What a session needs to know of a tool: its schema for the model, its traits, how to run it.

The tool registry (``actors.tools``) produces these; the session runs ``run`` as a wait
in the reactor, so every call is cancellable and has a deadline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.memory import MemorySettings
from protocols._session import SessionEvent

from ._approvals import ApprovalGate
from ._clarify import Clarifier
from ._delegation import Delegation
from ._plan import ToolTraits

if TYPE_CHECKING:
    from actors.hooks import Hooks

    from ._auxiliary import AuxiliaryModel


@dataclasses.dataclass(frozen=True, slots=True)
class ToolOutput:
    content: str
    ok: bool = True


class Workspace:
    """Per-session state that tools keep between calls (working directory, todo list, ...).

    Touched only by tool coroutines, which all run in the reactor thread: no lock needed.
    ``extras`` is for tools to keep their own state under their own key.
    """

    def __init__(self, cwd: Path, approvals: ApprovalGate | None = None, clarifier: Clarifier | None = None) -> None:
        self.cwd = cwd
        self.approvals = approvals
        """Where a tool asks before doing something dangerous; None means nobody can answer."""
        self.clarifier = clarifier
        """Where a tool asks the attached person a question."""
        self.extras: dict[str, Any] = {}
        self.closers: list[Callable[[], object]] = []
        """Called (in the reactor) when the session's actor ends: tools stop what they left running."""
        self.running: list[Callable[[], bool]] = []
        """Each says whether a tool still runs something of this session (a background command)."""

    def busy(self) -> bool:
        """Whether something a tool started still runs (ending the session would stop it)."""
        return any(check() for check in self.running)

    def close(self) -> None:
        closers, self.closers = self.closers, []
        for closer in closers:
            closer()


@dataclasses.dataclass(frozen=True, slots=True)
class ToolSettings:
    """What config.yaml sets for the tools of every session of a runtime."""

    terminal_timeout: float = 180.0
    """``terminal.timeout``: seconds a command runs when the model does not say."""
    memory: MemorySettings = MemorySettings()
    """``memory:``: which memory files are in use, and their limits."""


@dataclasses.dataclass(frozen=True, slots=True)
class ToolContext:
    """The context of one running tool call: who is calling, from where, with what.

    Passed to every tool run. Not to be confused with :class:`protocols.ToolCall`, the
    model's request for a tool in a transcript.
    """

    session_id: str
    turn_id: str
    call_id: str
    home: Path
    """HERMES_HOME: where memory, skills and config live."""
    workspace: Workspace
    publish: Callable[[SessionEvent], object] = lambda _event: None
    """Send an event on the session's stream (progress, questions)."""
    store_file: str | Path | None = None
    """The session store, for tools that search past sessions (open a read-only reader)."""
    delegation: Delegation | None = None
    """Starts child sessions (delegate_task); None where delegation is not possible."""
    tools: Mapping[str, ToolSpec] = dataclasses.field(default_factory=dict)
    """The session's tools, for tools that call tools (execute_code)."""
    settings: ToolSettings = ToolSettings()
    hooks: Hooks | None = None
    """The runtime's hooks, for a tool's own hook points (the terminal's ``transform_terminal_output``)."""
    auxiliary: AuxiliaryModel | None = None
    """The model a tool may ask for text of its own (session_search's summaries); None: no model."""
    registry: Any = None
    """The runtime's registry (``actors.Registry``), for tools that message an actor (memory); None outside a runtime."""


@dataclasses.dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: Mapping[str, Any]
    """JSON schema of the arguments object."""
    run: Callable[[dict[str, Any], ToolContext], Awaitable[ToolOutput]]
    traits: ToolTraits = ToolTraits()

    def schema(self) -> dict[str, Any]:
        """The entry of the ``tools`` list sent to the model."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }
