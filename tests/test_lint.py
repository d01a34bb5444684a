"""The code passes ruff (lint and format), configured in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ruff", *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_ruff_finds_nothing_to_lint() -> None:
    out = _ruff("check", ".")
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_code_is_formatted_as_ruff_formats_it() -> None:
    out = _ruff("format", "--check", ".")
    assert out.returncode == 0, out.stdout + out.stderr
