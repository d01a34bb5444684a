"""tools: the registry, toolsets, and the tools themselves (each module registers its tools)."""

# Importing a tool module registers its tools.
from . import _clarify as _clarify
from . import _cronjob as _cronjob
from . import _delegate as _delegate
from . import _execute as _execute
from . import _fact_store as _fact_store
from . import _files as _files
from . import _memory as _memory
from . import _patch as _patch
from . import _search as _search
from . import _session_search as _session_search
from . import _skills as _skills
from . import _terminal as _terminal
from . import _todo as _todo
from ._registry import REGISTRY as REGISTRY
from ._registry import Registry as Registry
from ._registry import Tool as Tool
from ._registry import tool as tool
from ._toolsets import PRESETS as PRESETS
from ._toolsets import Toolset as Toolset
from ._toolsets import resolve_toolsets as resolve_toolsets

__all__ = [
    "PRESETS",
    "REGISTRY",
    "Registry",
    "Tool",
    "Toolset",
    "resolve_toolsets",
    "tool",
]
