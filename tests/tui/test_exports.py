"""The package door, and what loads before the prompt is drawn."""

from __future__ import annotations

import subprocess
import sys

import actors.platforms.tui as tui

COLD_START = """
import sys, types, pathlib, actors
# An empty actors.platforms, as a lazy package __init__ would leave it.
package = types.ModuleType("actors.platforms")
package.__path__ = [str(pathlib.Path(actors.__file__).parent / "platforms")]
sys.modules["actors.platforms"] = package
import actors.platforms.tui, actors.platforms.tui._app, actors.platforms.tui._cli
heavy = sorted(m for m in ("openai", "actors.agent", "actors.tools", "actors.store", "httpx", "markdown_it") if m in sys.modules)
print(",".join(heavy))
"""


def test_the_package_all_is_sorted_and_every_name_resolves() -> None:
    assert tui.__all__ == sorted(tui.__all__)
    for name in tui.__all__:
        assert getattr(tui, name) is not None
    assert set(tui.__all__) <= set(dir(tui))


def test_the_ui_and_the_command_line_load_without_the_runtime_the_sdk_or_the_http_client() -> None:
    out = subprocess.run([sys.executable, "-c", COLD_START], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == ""


def test_importing_the_package_does_not_load_textual() -> None:
    code = "import sys, actors.platforms.tui; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"
