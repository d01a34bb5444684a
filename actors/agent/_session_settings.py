"""What config.yaml sets for the sessions of a runtime, as the session core takes it; pure.

From the typed configuration (:class:`actors.config.HermesConfig`):

- ``toolsets`` / ``platform_toolsets.<platform>`` and ``agent.disabled_toolsets``: the toolset
  names of a platform's sessions, and those taken out (resolved to tools by the caller, which
  knows the registry);
- ``agent.max_turns``: a turn's model calls (unset: 90; 0, -1 or ``unlimited``: no cap, the
  turn's deadline still holds) and ``agent.api_max_retries``: retries of one model call;
- ``terminal.cwd`` / ``terminal.timeout``: where a session starts and a command's default deadline;
- ``memory.*``: which memory files are in use and their limits; ``memory.nudge_interval`` /
  ``memory.flush_min_turns`` and ``skills.creation_nudge_interval``: when a background review
  is forked (:mod:`._nudges`);
- ``delegation.*``: children at once, how deep, and a child turn's budget.

A value the schema accepts but that means nothing here (``max_turns: lots``, a ``cwd`` that is
not a directory) is a :class:`ConfigError` naming the key and what it takes.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from actors.config import ConfigError, HermesConfig
from actors.memory import MemorySettings

from ._delegation import DelegationLimits
from ._nudges import NudgeSettings
from ._tools import ToolSettings

DEFAULT_MAX_TURNS = 90
UNCAPPED = 1_000_000
"""The iteration cap of ``max_turns: unlimited``: never reached before the turn's deadline."""
DEFAULT_TOOLSETS = {
    "cli": ("hermes-cli",),
    "api_server": ("hermes-api-server",),
    "telegram": ("hermes-telegram",),
    "matrix": ("hermes-matrix",),
    "webhook": ("hermes-webhook",),
}
"""A platform's toolsets when config.yaml names none (``cli`` takes ``toolsets``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class SessionSettings:
    toolsets: tuple[str, ...]
    disabled_toolsets: tuple[str, ...]
    max_iterations: int
    max_attempts: int | None
    """Attempts of one model call (None: the machine's default)."""
    workdir: Path
    tools: ToolSettings
    delegation: DelegationLimits
    nudges: NudgeSettings = NudgeSettings()


def session_settings(config: HermesConfig, platform: str, *, file: Path, cwd: Path) -> SessionSettings:
    """The settings of ``platform``'s sessions (``cli``, ``api_server``); ``file`` names config.yaml in errors."""
    toolsets = config.platform_toolsets.get(platform) or (config.toolsets if platform == "cli" else None) or DEFAULT_TOOLSETS.get(platform, ("hermes-cli",))
    retries = config.agent.api_max_retries
    memory = config.memory
    delegation = config.delegation
    return SessionSettings(
        toolsets=tuple(toolsets),
        disabled_toolsets=tuple(config.agent.disabled_toolsets),
        max_iterations=max_iterations(config.agent.max_turns, file),
        max_attempts=None if retries is None else retries + 1,
        workdir=workdir(config.terminal.cwd, file, cwd),
        tools=ToolSettings(
            terminal_timeout=config.terminal.timeout,
            memory=MemorySettings(
                memory_enabled=memory.memory_enabled,
                user_enabled=memory.user_profile_enabled,
                memory_limit=memory.memory_char_limit,
                user_limit=memory.user_char_limit,
            ),
        ),
        delegation=DelegationLimits(
            max_children=delegation.max_concurrent_children, spawn_depth=delegation.max_spawn_depth, child_iterations=delegation.max_iterations
        ),
        nudges=nudge_settings(config),
    )


def nudge_settings(config: HermesConfig) -> NudgeSettings:
    """``memory.nudge_interval``, ``memory.flush_min_turns``, ``skills.creation_nudge_interval`` (or its
    older spelling ``memory.skill_nudge_interval``)."""
    memory = config.memory
    skills = config.skills.creation_nudge_interval
    skill_interval = skills if skills is not None else memory.skill_nudge_interval if memory.skill_nudge_interval is not None else 10
    return NudgeSettings(memory_interval=memory.nudge_interval, min_turns=memory.flush_min_turns, skill_interval=skill_interval)


def max_iterations(value: int | str | None, file: Path) -> int:
    """``agent.max_turns`` as the machine's iteration cap."""
    if value is None:
        return DEFAULT_MAX_TURNS
    text = str(value).strip().lower()
    if text in ("0", "-1", "unlimited", "none", "inf"):
        return UNCAPPED
    if text.isdigit():
        return int(text)
    msg = f"{file}: agent.max_turns is {value!r}; it takes a number of model calls above 0, or unlimited (fix it: hermes config set agent.max_turns 90)"
    raise ConfigError(msg)


def workdir(value: str, file: Path, cwd: Path) -> Path:
    """``terminal.cwd``: ``~`` expanded, relative to ``cwd``; it must be a directory."""
    if not value:
        return cwd
    path = (cwd / Path(value).expanduser()).resolve()
    if not path.is_dir():
        msg = f"{file}: terminal.cwd is {value!r}, and {path} is not a directory; create it or fix the key (empty: where hermes starts)"
        raise ConfigError(msg)
    return path
