"""Shell hooks: the ``hooks:`` block of config.yaml, each entry a command run without a shell.

A command is split with shlex (a leading ``~`` expanded), started in its own process group,
given the event's JSON payload on stdin and read for a JSON answer on stdout. A bad answer,
a non-zero exit or a timeout is a warning and a skipped hook, never a failed turn; the group
is killed when the call ends, however it ends.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import trio

from actors._process import run_process

from ._decide import clamp_timeout, shell_answer
from ._names import PLUGIN_HOOKS, TOOL_EVENTS, did_you_mean


@dataclasses.dataclass(frozen=True, slots=True)
class ShellHook:
    event: str
    command: str
    """As written in config.yaml: the consent key."""
    argv: tuple[str, ...]
    matcher: re.Pattern[str] | None = None
    timeout: float = 60.0


@dataclasses.dataclass(frozen=True, slots=True)
class ShellOutcome:
    value: Any = None
    problem: str | None = None
    reason: str = ""
    """``bad_output``, ``exit``, ``timeout`` or ``spawn`` when ``problem`` is set."""


def shell_hooks(section: Mapping[str, Sequence[Any]]) -> tuple[list[ShellHook], list[str]]:
    """The ``hooks:`` block as shell hooks, and a warning for each entry left out or changed.

    ``section`` maps event names to entries with ``command``, ``matcher`` and ``timeout``
    attributes (``actors.config.HookEntry``) or keys (a raw mapping).
    """
    hooks: list[ShellHook] = []
    warnings: list[str] = []
    for event, entries in section.items():
        if event not in PLUGIN_HOOKS:
            warnings.append(f"hooks.{event}: not a hook event{did_you_mean(event)}; its entries are skipped")
            continue
        for index, entry in enumerate(entries or ()):
            where = f"hooks.{event}[{index}]"
            command = str(_field(entry, "command") or "").strip()
            if not command:
                warnings.append(f"{where}: no command; skipped")
                continue
            try:
                argv = tuple(os.path.expanduser(part) for part in shlex.split(command))
            except ValueError as exc:
                warnings.append(f"{where}: the command cannot be split ({exc}); skipped")
                continue
            matcher_text = str(_field(entry, "matcher") or "")
            matcher = None
            if matcher_text:
                if event not in TOOL_EVENTS:
                    warnings.append(f"{where}: matcher applies to pre_tool_call and post_tool_call only; ignored")
                else:
                    try:
                        matcher = re.compile(matcher_text)
                    except re.error as exc:
                        warnings.append(f"{where}: matcher {matcher_text!r} is not a regex ({exc}); skipped")
                        continue
            timeout, problem = clamp_timeout(_field(entry, "timeout"))
            if problem:
                warnings.append(f"{where}: {problem}")
            hooks.append(ShellHook(event=event, command=command, argv=argv, matcher=matcher, timeout=timeout))
    return hooks, warnings


def _field(entry: Any, name: str) -> Any:
    return entry.get(name) if isinstance(entry, Mapping) else getattr(entry, name, None)


def payload(event: str, kwargs: Mapping[str, Any], *, session_id: str, cwd: str, tool_name: str | None = None, tool_input: Any = None) -> bytes:
    """The JSON a shell hook reads on stdin; values JSON cannot hold are sent as their text."""
    extra = {k: v for k, v in kwargs.items() if k not in ("tool_name", "args", "session_id")}
    body = {"hook_event_name": event, "tool_name": tool_name, "tool_input": tool_input, "session_id": session_id, "cwd": cwd, "extra": extra}
    return json.dumps(body, default=str).encode()


async def run_shell_hook(hook: ShellHook, stdin: bytes, *, cwd: str | None = None, env: Mapping[str, str] | None = None) -> ShellOutcome:
    """Run one shell hook to its answer within its timeout (the group killed on any exit)."""
    try:
        with trio.fail_after(hook.timeout):
            result = await run_process(hook.argv, stdin=stdin, cwd=cwd if cwd and os.path.isdir(cwd) else None, env=env, grace=0.5, max_output=1 << 20)
    except trio.TooSlowError:
        return ShellOutcome(problem=f"it did not finish within {hook.timeout:g} s (killed)", reason="timeout")
    except OSError as exc:
        return ShellOutcome(problem=f"it could not be started: {exc.strerror or exc}", reason="spawn")
    if result.returncode != 0:
        tail = result.stderr.decode("utf-8", "replace").strip()[-200:]
        return ShellOutcome(problem=f"it exited with status {result.returncode}" + (f": {tail}" if tail else ""), reason="exit")
    value, problem = shell_answer(result.stdout)
    return ShellOutcome(value=value, problem=problem, reason="bad_output" if problem else "")
