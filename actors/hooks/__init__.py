"""Event hooks: Python plugins, gateway hooks (HOOK.yaml + handler.py) and shell hooks.

One dispatcher (``Hooks``) serves all three; each plugin has its own supervised actor under
``/hooks`` (well-behaved plugins' callbacks run in one shared thread, the others in their
actor's own: ``_placement``), each shell hook runs in its own process group. The decisions on what the answers
mean are pure (``_decide``).
"""

from ._decide import Answer as Answer
from ._decide import first_block as first_block
from ._decide import first_text as first_text
from ._decide import joined_context as joined_context
from ._dispatch import HOOKS_PATH as HOOKS_PATH
from ._dispatch import Hooks as Hooks
from ._dispatch import hooks_spec as hooks_spec
from ._names import GATEWAY_EVENTS as GATEWAY_EVENTS
from ._names import PLUGIN_HOOKS as PLUGIN_HOOKS
from ._setup import build_hooks as build_hooks
from ._shell import ShellHook as ShellHook

__all__ = [
    "Answer",
    "GATEWAY_EVENTS",
    "HOOKS_PATH",
    "Hooks",
    "PLUGIN_HOOKS",
    "ShellHook",
    "build_hooks",
    "first_block",
    "first_text",
    "hooks_spec",
    "joined_context",
]
