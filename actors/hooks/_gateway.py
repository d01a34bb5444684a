"""Gateway hooks: ``HERMES_HOME/hooks/<name>/`` with ``HOOK.yaml`` (its events) and ``handler.py``
(``handle(event_type, context)``, plain or ``async``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import yaml

from ._names import GATEWAY_EVENTS, gateway_matches
from ._plugins import PluginError, PluginManifest


def discover_gateway_hooks(home: Path) -> tuple[list[PluginManifest], list[str]]:
    """Hook folders under ``home/hooks``, sorted by name, and the problems of those skipped."""
    root = home / "hooks"
    found: list[PluginManifest] = []
    problems: list[str] = []
    if not root.is_dir():
        return found, problems
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        manifest, handler = folder / "HOOK.yaml", folder / "handler.py"
        if not manifest.is_file() or not handler.is_file():
            problems.append(f"gateway hook {folder.name}: needs HOOK.yaml and handler.py in {folder}; skipped")
            continue
        found.append(PluginManifest(folder.name, folder, handler))
    return found, problems


def gateway_events(manifest: PluginManifest) -> tuple[tuple[str, ...], list[str]]:
    """The events a hook's HOOK.yaml lists, and a warning for each it cannot be given."""
    try:
        meta = yaml.safe_load((manifest.folder / "HOOK.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise PluginError(f"gateway hook {manifest.name}: HOOK.yaml cannot be read ({exc})") from exc
    events = meta.get("events") if isinstance(meta, dict) else None
    if not isinstance(events, list) or not events:
        raise PluginError(f"gateway hook {manifest.name}: HOOK.yaml lists no events")
    kept: list[str] = []
    warnings: list[str] = []
    for event in map(str, events):
        if any(gateway_matches(event, known) or event == known for known in GATEWAY_EVENTS) or event.startswith("command:"):
            kept.append(event)
        else:
            warnings.append(f"gateway hook {manifest.name}: {event!r} is not a gateway event ({', '.join(GATEWAY_EVENTS)}); ignored")
    return tuple(kept), warnings


def load_handler(manifest: PluginManifest) -> Any:
    """Import ``handler.py`` afresh; its ``handle``."""
    module_name = f"hermes_gateway_hooks_{manifest.name.replace('-', '_')}"
    sys.modules.pop(module_name, None)
    spec = importlib.util.spec_from_file_location(module_name, manifest.entry)
    if spec is None or spec.loader is None:
        raise PluginError(f"gateway hook {manifest.name}: {manifest.entry} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise PluginError(f"gateway hook {manifest.name}: loading failed: {type(exc).__name__}: {exc}") from exc
    handle = getattr(module, "handle", None)
    if not callable(handle):
        raise PluginError(f"gateway hook {manifest.name}: handler.py defines no handle(event_type, context)")
    return handle
