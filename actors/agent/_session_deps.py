"""What every session actor of a runtime shares: its model, tools, limits and policies."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from actors.credentials import ProviderSpec
from actors.memory import MemoryOptions
from protocols._store import Interrupted

from ._approval_settings import ApprovalSettings
from ._delegation import DelegationLimits
from ._hub import HubRegistry
from ._machine import MachineConfig
from ._model import ModelClients, ModelSettings
from ._node import NodeIdentity
from ._nudges import NudgeSettings
from ._tools import ToolSettings, ToolSpec

if TYPE_CHECKING:
    from actors.hooks import Hooks

    from ._delegation import SessionOverrides

RecoveryPolicy = Literal["resume", "fail"]


@dataclasses.dataclass(frozen=True)
class SessionDeps:
    """What every session actor of a runtime shares."""

    hubs: HubRegistry
    open_reader: Callable[[], Any]
    """Opens a read-only store connection (``actors.store.StoreReader``); called in a worker thread."""
    model: ModelSettings
    clients: ModelClients
    tools: Mapping[str, ToolSpec] = dataclasses.field(default_factory=dict)
    config: MachineConfig = MachineConfig()
    source: str = "api"
    platform_hint: str = ""
    recovery: RecoveryPolicy = "fail"
    idle_timeout: float = 600.0
    load_timeout: float = 30.0
    store_path: str = "/store"
    """Where the store writer lives in the tree."""
    home: Path = dataclasses.field(default_factory=lambda: Path.home() / ".hermes")
    """HERMES_HOME, handed to tools (memory, skills)."""
    workdir: Path = dataclasses.field(default_factory=Path.cwd)
    """Where a session's working directory starts."""
    store_file: str | Path | None = None
    """The store's file, handed to tools that search past sessions."""
    approvals: ApprovalSettings = ApprovalSettings()
    """Approval mode, timeout, allowlist and deny globs (``off`` never skips the hardline list)."""
    tool_settings: ToolSettings = ToolSettings()
    """What config.yaml sets for the tools (terminal timeout, memory files and limits)."""
    delegation: DelegationLimits = DelegationLimits()
    """How many children a session runs at once, how deep, with what budget."""
    store_ack_timeout: float = 30.0
    """Seconds a write may stay unanswered before the session stops trusting its memory and
    reloads from the store (a lost reply, a wedged writer); far above any commit (the
    writer's busy timeout is 2 s)."""
    providers: tuple[ProviderSpec, ...] = ()
    """The fallback chain, primary first, each with its keys (leased from ``/credentials/<name>``
    when the tree has that pool); empty: one provider made of ``model``. ``config.providers``
    names the same chain for the turn machine."""
    interrupted: Mapping[str, Interrupted] = dataclasses.field(default_factory=dict)
    """Session id -> what settling the store at this runtime's start did to it: the turns a
    stopped process left running (now failed, reason ``interrupted``) and how many of their
    tool calls got a result (``actors.store.settle_interrupted``)."""
    hooks: Hooks | None = None
    """Plugin, gateway and shell hooks (``actors.hooks``); None: no hook, no cost."""
    nudges: NudgeSettings = NudgeSettings.OFF
    memory: MemoryOptions = MemoryOptions()
    """``/memory``: the external provider (``memory.provider``) and the prefetch deadline; shared with child sessions."""
    """When a session forks a background review (``memory.nudge_interval`` and friends); off unless config.yaml's settings are applied."""
    node: NodeIdentity | None = None
    """This process as a cluster node (``cluster.enabled``): sessions hold a lease and fence their writes. None: one process, no lease."""


def child_deps(deps: SessionDeps, overrides: SessionOverrides) -> SessionDeps:
    """What a delegated child session runs with: its blocked tools removed (or only its allowed ones),
    its own budget, no resume, no nudges."""
    allowed = overrides.allowed_tools
    tools = {n: t for n, t in deps.tools.items() if n not in overrides.blocked_tools and (allowed is None or n in allowed)}
    traits = {n: t for n, t in deps.config.traits.items() if n in tools}
    config = dataclasses.replace(deps.config, traits=traits, max_iterations=overrides.max_iterations)
    return dataclasses.replace(deps, tools=tools, config=config, source=overrides.source, recovery="fail", nudges=NudgeSettings.OFF)
