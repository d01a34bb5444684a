"""Python plugins: ``HERMES_HOME/plugins/<name>/`` with ``plugin.yaml`` and ``register(ctx)``.

The package's ``__init__.py`` (or ``plugin.py``) defines ``register(ctx)``; it calls
``ctx.register_hook(event, callback)``. Loading imports the code afresh each time (a
restarted plugin starts from a clean module), under ``hermes_plugins.<name>``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from ._names import PLUGIN_HOOKS, did_you_mean


class PluginError(Exception):
    """A plugin could not be loaded (its code raised, or it has no ``register``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class PluginManifest:
    name: str
    folder: Path
    entry: Path
    """The file that defines ``register``."""
    description: str = ""
    version: str = ""


def discover(home: Path) -> tuple[list[PluginManifest], list[str]]:
    """Plugins under ``home/plugins``, sorted by folder name (the dispatch order), and problems."""
    root = home / "plugins"
    found: list[PluginManifest] = []
    problems: list[str] = []
    if not root.is_dir():
        return found, problems
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        manifest = folder / "plugin.yaml"
        if not manifest.is_file():
            manifest = folder / "plugin.yml"
        if not manifest.is_file():
            problems.append(f"plugin {folder.name}: no plugin.yaml in {folder}; skipped")
            continue
        try:
            meta = yaml.safe_load(manifest.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            problems.append(f"plugin {folder.name}: {manifest} cannot be read ({exc}); skipped")
            continue
        if not isinstance(meta, dict):
            problems.append(f"plugin {folder.name}: {manifest} is not a mapping; skipped")
            continue
        if meta.get("enabled") is False:
            continue
        entry = next((p for p in (folder / "__init__.py", folder / "plugin.py") if p.is_file()), None)
        if entry is None:
            problems.append(f"plugin {folder.name}: no __init__.py or plugin.py in {folder}; skipped")
            continue
        found.append(PluginManifest(folder.name, folder, entry, str(meta.get("description") or ""), str(meta.get("version") or "")))
    return found, problems


class PluginContext:
    """What ``register(ctx)`` is handed."""

    def __init__(self, manifest: PluginManifest) -> None:
        self.name = manifest.name
        self.manifest = manifest
        self.hooks: dict[str, list[Callable[..., Any]]] = {}
        self.warnings: list[str] = []

    def register_hook(self, event: str, callback: Callable[..., Any]) -> None:
        if event not in PLUGIN_HOOKS:
            self.warnings.append(f"plugin {self.name}: {event!r} is not a hook event{did_you_mean(event)}; not registered")
            return
        if not callable(callback):
            self.warnings.append(f"plugin {self.name}: the callback for {event} is not callable; not registered")
            return
        self.hooks.setdefault(event, []).append(callback)

    def register_tool(self, *args: Any, **kwargs: Any) -> None:
        self.warnings.append(f"plugin {self.name}: plugin tools are not supported by this build; register_tool ignored")


def load(manifest: PluginManifest) -> PluginContext:
    """Import the plugin's code afresh and run its ``register(ctx)``."""
    module_name = f"hermes_plugins.{manifest.name}"
    if "hermes_plugins" not in sys.modules:  # the parent package, so a plugin's relative imports resolve
        parent = types.ModuleType("hermes_plugins")
        parent.__path__ = []
        sys.modules["hermes_plugins"] = parent
    sys.modules.pop(module_name, None)
    spec = importlib.util.spec_from_file_location(module_name, manifest.entry, submodule_search_locations=[str(manifest.folder)])
    if spec is None or spec.loader is None:
        raise PluginError(f"plugin {manifest.name}: {manifest.entry} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
        register = getattr(module, "register", None)
        if not callable(register):
            raise PluginError(f"plugin {manifest.name}: {manifest.entry.name} defines no register(ctx)")
        context = PluginContext(manifest)
        register(context)
    except PluginError:
        raise
    except Exception as exc:
        raise PluginError(f"plugin {manifest.name}: loading failed: {type(exc).__name__}: {exc}") from exc
    return context
