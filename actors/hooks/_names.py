"""The hook events: the plugin (and shell) hook names, the gateway lifecycle events."""

from __future__ import annotations

import difflib

PLUGIN_HOOKS = (
    "pre_tool_call",
    "post_tool_call",
    "pre_llm_call",
    "post_llm_call",
    "on_session_start",
    "on_session_end",
    "on_session_finalize",
    "on_session_reset",
    "subagent_stop",
    "pre_gateway_dispatch",
    "pre_approval_request",
    "post_approval_response",
    "transform_tool_result",
    "transform_terminal_output",
    "transform_llm_output",
)
"""Every event a plugin's ``register(ctx)`` may subscribe to, and a ``hooks:`` entry may name."""

TOOL_EVENTS = frozenset({"pre_tool_call", "post_tool_call"})
"""Where a shell hook's ``matcher`` applies (a regex on the tool's name)."""

GATEWAY_EVENTS = ("gateway:startup", "session:start", "session:end", "session:reset", "agent:start", "agent:step", "agent:end", "command:*")
"""What a gateway hook's ``HOOK.yaml`` may list (``command:*`` matches every ``command:<name>``)."""


def did_you_mean(name: str, known: tuple[str, ...] = PLUGIN_HOOKS) -> str:
    """`` (did you mean X?)`` for a misspelt event name, or nothing."""
    close = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def gateway_matches(pattern: str, event: str) -> bool:
    """Whether a subscription (``agent:start``, ``command:*``) covers ``event``."""
    if pattern.endswith(":*"):
        return event.startswith(pattern[:-1])
    return pattern == event
