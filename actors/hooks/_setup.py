"""What ``hermes serve`` starts with: the plugins, gateway hooks and admitted shell hooks of a home."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ._consent import admit, bypass_source
from ._dispatch import Hooks
from ._gateway import discover_gateway_hooks
from ._plugins import discover
from ._shell import ShellHook, shell_hooks
from ._unit import UnitSource


def ask_on_terminal(hook: ShellHook) -> bool:
    """Ask the person at the terminal whether a new shell hook may run."""
    print(f"config.yaml asks to run a shell hook on {hook.event}" + (f" (tools matching {hook.matcher.pattern!r})" if hook.matcher else "") + ":", flush=True)
    print(f"  {hook.command}", flush=True)
    try:
        reply = input("Allow it? It runs with your user's rights. [y/N] ")
    except EOFError:
        return False
    return reply.strip().lower() in ("y", "yes")


def build_hooks(
    home: Path,
    section: Mapping[str, Any],
    *,
    env: Mapping[str, str],
    accept: bool = False,
    auto_accept: bool = False,
    tty: bool | None = None,
    ask: Callable[[ShellHook], bool] | None = ask_on_terminal,
    gateway: bool = True,
) -> tuple[Hooks | None, list[str]]:
    """The runtime's hooks (None when there is none) and the lines to print at start."""
    plugins, problems = discover(home)
    units = [UnitSource("plugin", m) for m in plugins]
    if gateway:
        found, more = discover_gateway_hooks(home)
        units += [UnitSource("gateway", m) for m in found]
        problems += more
    shell, warnings = shell_hooks(section)
    lines = [*problems, *warnings]
    bypass = bypass_source(accept, env, auto_accept)
    if shell:
        admitted, refused = admit(shell, home, bypass=bypass is not None, tty=sys.stdin.isatty() if tty is None else tty, ask=ask)
        lines += refused
        if bypass is not None and admitted:
            lines.append(f"shell hooks accepted by {bypass}: {len(admitted)}")
        shell = admitted
    if not units and not shell:
        return None, lines
    return Hooks(units, shell, env=env, problems=lines), lines
