"""What a reload of config.yaml (SIGHUP, ``/reload``) may change in a running process; pure.

A section is *reloadable* when the sessions read it each time they start and nothing else holds
it: approvals and the allowlist, compression, prices and prompt caching, toolsets, the turn's
limits, the terminal's defaults, memory (but its external provider) and delegation limits. Sessions start again from the
store with the new values once no turn runs (:class:`protocols.RefreshSettings`).

Everything else (the model and its providers, whose key pools are actors of the tree; the API
server's address; platforms, MCP servers, hooks, cron) is held by actors started once: a change
there is reported as needing a restart and is not applied.
"""

from __future__ import annotations

import msgspec

from ._schema import HermesConfig

RELOADABLE = frozenset(
    {
        "approvals",
        "command_allowlist",
        "compression",
        "pricing",
        "prompt_caching",
        "toolsets",
        "platform_toolsets",
        "agent",
        "terminal",
        "memory",
        "delegation",
    }
)


class ReloadPlan(msgspec.Struct, frozen=True, kw_only=True):
    applied: tuple[str, ...] = ()
    """Top-level keys whose change takes effect."""
    restart: tuple[str, ...] = ()
    """Top-level keys whose change waits for a restart of the process."""

    def lines(self, file: str) -> list[str]:
        """What the process says about the reload, one line each."""
        if not self.applied and not self.restart:
            return [f"{file} reloaded: nothing changed"]
        lines = []
        if self.applied:
            lines.append(
                f"{file} reloaded: {', '.join(self.applied)} apply to every session from its next turn (one running commands in the background: once it ends)"
            )
        if self.restart:
            lines.append(f"{file}: {', '.join(self.restart)} changed, and take effect only after a restart (not applied)")
        return lines


HELD = {"memory": ("provider", "prefetch_timeout")}
"""Keys of reloadable sections that an actor holds all the same (``/memory`` runs the provider
with its prefetch deadline): reported as ``section.key`` needing a restart."""


def reload_plan(old: HermesConfig, new: HermesConfig) -> ReloadPlan:
    """Which changed keys a reload applies, and which need a restart."""
    applied: list[str] = []
    restart: list[str] = []
    for name in old.__struct_fields__:
        before, after = getattr(old, name), getattr(new, name)
        if before == after:
            continue
        if name not in RELOADABLE:
            restart.append(name)
            continue
        held = [key for key in HELD.get(name, ()) if getattr(before, key) != getattr(after, key)]
        restart.extend(f"{name}.{key}" for key in held)
        if not held or msgspec.structs.replace(before, **{key: getattr(after, key) for key in held}) != after:
            applied.append(name)  # something besides the held keys changed
    return ReloadPlan(applied=tuple(applied), restart=tuple(restart))
