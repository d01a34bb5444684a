"""``hermes hooks list|test|doctor``: the configured hooks, a dry run of them, their health."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import trio

from actors.config import load_config
from actors.config._env import hermes_home

from ._consent import drift, find, load_approvals, script_of
from ._decide import block_message, context_of
from ._gateway import discover_gateway_hooks
from ._plugins import discover
from ._shell import ShellHook, ShellOutcome, payload, run_shell_hook, shell_hooks


def _configured(home: Path) -> tuple[list[ShellHook], list[str]]:
    loaded = load_config(home, dict(os.environ))
    return shell_hooks(loaded.config.hooks)


def run_hooks_cli(action: str, *, home: Path | None, event: str = "", tool: str | None = None, payload_file: Path | None = None) -> int:
    home = home or hermes_home(dict(os.environ))
    hooks, warnings = _configured(home)
    for line in warnings:
        print(f"warning: {line}")
    if action == "list":
        return _list(home, hooks)
    if action == "test":
        return _test(hooks, event, tool, payload_file)
    return _doctor(home, hooks)


def _list(home: Path, hooks: list[ShellHook]) -> int:
    approvals = load_approvals(home)
    print(f"shell hooks ({home / 'config.yaml'}):" if hooks else "shell hooks: none configured")
    for hook in hooks:
        allowed = "allowed" if find(approvals, hook) else "not allowed yet (stays unregistered)"
        matcher = f" matcher={hook.matcher.pattern!r}" if hook.matcher else ""
        print(f"  {hook.event}{matcher} timeout={hook.timeout:g}s  {hook.command}  [{allowed}]")
    plugins, problems = discover(home)
    gateway, more = discover_gateway_hooks(home)
    print(f"plugins ({home / 'plugins'}): " + (", ".join(p.name for p in plugins) or "none"))
    print(f"gateway hooks ({home / 'hooks'}): " + (", ".join(g.name for g in gateway) or "none"))
    for line in (*problems, *more):
        print(f"  {line}")
    return 0


def _describe(outcome: ShellOutcome) -> str:
    if outcome.problem is not None:
        return f"skipped ({outcome.reason}): {outcome.problem}"
    value = outcome.value
    if (message := block_message(value)) is not None:
        return f"block: {message}"
    if context := context_of(value):
        return f"context: {context!r}"
    return f"no-op: {json.dumps(value)}"


def _test(hooks: list[ShellHook], event: str, tool: str | None, payload_file: Path | None) -> int:
    chosen = [h for h in hooks if h.event == event and (h.matcher is None or (tool is not None and h.matcher.fullmatch(tool)))]
    if not chosen:
        print(f"no shell hook of {event!r}" + (f" matches tool {tool!r}" if tool else "") + " in config.yaml")
        return 1
    extra: dict[str, Any] = {}
    tool_input: Any = {}
    if payload_file is not None:
        try:
            given = json.loads(payload_file.read_text())
        except (OSError, ValueError) as exc:
            print(f"hermes hooks test: {payload_file} is not readable JSON: {exc}")
            return 2
        tool_input = given.get("tool_input", {}) if isinstance(given, dict) else {}
        extra = given.get("extra", {}) if isinstance(given, dict) else {}
    body = payload(event, extra, session_id="hooks-test", cwd=os.getcwd(), tool_name=tool, tool_input=tool_input)
    for hook in chosen:
        started = time.monotonic()
        outcome = trio.run(run_shell_hook, hook, body)
        print(f"{hook.command}: {_describe(outcome)}  ({(time.monotonic() - started) * 1000:.0f} ms)")
    return 0


def _doctor(home: Path, hooks: list[ShellHook]) -> int:
    approvals = load_approvals(home)
    problems = 0
    for hook in hooks:
        lines = []
        script = script_of(hook)
        if script is not None and not script.is_file():
            lines.append(f"the script {script} does not exist")
        elif script is not None and not os.access(script, os.X_OK):
            lines.append(f"the script {script} is not executable (chmod +x)")
        approval = find(approvals, hook)
        if approval is None:
            lines.append("not allowed yet: it stays unregistered until you allow it (--accept-hooks or a yes on a terminal)")
        if (changed := drift(approval, hook)) is not None:
            lines.append(changed)
        if not lines or all("not allowed" in line or "changed" in line for line in lines):
            body = payload(hook.event, {}, session_id="hooks-doctor", cwd=os.getcwd(), tool_name=None, tool_input={})
            started = time.monotonic()
            outcome = trio.run(run_shell_hook, hook, body)
            took = (time.monotonic() - started) * 1000
            if outcome.problem is not None:
                lines.append(f"a dry run failed ({outcome.reason}): {outcome.problem}")
            else:
                print(f"ok   {hook.event}: {hook.command}: answers valid JSON in {took:.0f} ms")
        for line in lines:
            problems += 1
            print(f"FIX  {hook.event}: {hook.command}: {line}")
    if not hooks:
        print("no shell hooks configured")
    return 1 if problems else 0
