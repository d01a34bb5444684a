"""The package door of actors.memory, and what it may import."""

from __future__ import annotations

import ast
from pathlib import Path

import actors.memory

PACKAGE = Path(actors.memory.__file__).parent


def test_all_is_sorted_and_names_exactly_the_public_names() -> None:
    exported = list(actors.memory.__all__)
    assert exported == sorted(exported)
    public = sorted(n for n in vars(actors.memory) if not n.startswith("_") and type(getattr(actors.memory, n)).__name__ != "module")
    assert exported == public


def test_the_memory_package_imports_nothing_from_agent_tools_or_platforms() -> None:
    offenders = []
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.startswith(("actors.agent", "actors.tools", "actors.platforms"))]
    assert offenders == []
