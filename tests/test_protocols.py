"""The message conventions: frozen, kw_only, tagged Structs, one codec, no imports from actors/."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

import protocols
from protocols import (
    ChildExited,
    Message,
    NodeSnapshot,
    TreeSnapshot,
    from_json,
    from_msgpack,
    to_json,
    to_msgpack,
)

ROOT = Path(__file__).resolve().parent.parent


def all_message_classes() -> list[type[Message]]:
    found: list[type[Message]] = []
    pending = [Message]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            if sub.__module__.startswith("protocols"):
                found.append(sub)
            pending.append(sub)
    return found


def test_every_message_class_is_frozen_keyword_only_and_tagged_with_its_class_name() -> None:
    classes = all_message_classes()
    assert len(classes) >= 10
    for cls in classes:
        config = cls.__struct_config__
        assert config.frozen, f"{cls.__name__} is not frozen"
        positional = [p.name for p in inspect.signature(cls).parameters.values() if p.kind is not inspect.Parameter.KEYWORD_ONLY]
        assert positional == [], f"{cls.__name__} does not say kw_only=True (it is not inherited)"
        assert config.tag == cls.__name__, f"{cls.__name__} is tagged {config.tag!r}"


def test_messages_round_trip_through_json_and_msgpack() -> None:
    leaf = NodeSnapshot(path="/a", kind="worker", state="running", incarnation=2, restarts=1, mailbox=0, uptime_s=1.5)
    tree = TreeSnapshot(
        root=NodeSnapshot(path="/", kind="supervisor", state="running", incarnation=1, restarts=0, mailbox=3, uptime_s=2.0, children=(leaf,)),
        reactor_lag_ms=0.2,
        reactor_lag_max_ms=1.0,
        reactor_waits=4,
        reactor_faults=0,
    )
    assert from_json(to_json(tree), TreeSnapshot) == tree
    assert from_msgpack(to_msgpack(tree), TreeSnapshot) == tree
    assert b'"type":"TreeSnapshot"' in to_json(tree)


def test_a_union_of_messages_decodes_by_tag() -> None:
    exited = ChildExited(path="/x", child_id="x", incarnation=3, kind="crashed", error="ValueError: no")
    decoded = from_json(to_json(exited), ChildExited | NodeSnapshot)
    assert decoded == exited


def test_a_message_of_the_wrong_shape_is_rejected_with_a_validation_error() -> None:
    with pytest.raises(msgspec.ValidationError, match="incarnation"):
        from_json(b'{"type":"ChildExited","path":"/x","child_id":"x","incarnation":"three","kind":"crashed"}', ChildExited)
    with pytest.raises(msgspec.ValidationError):
        from_json(b'{"type":"ChildExited","path":"/x","child_id":"x","incarnation":1,"kind":"exploded"}', ChildExited)


def test_messages_are_immutable() -> None:
    exited = ChildExited(path="/x", child_id="x", incarnation=1, kind="normal")
    with pytest.raises(AttributeError):
        exited.kind = "crashed"  # type: ignore[misc]


def test_protocols_imports_nothing_from_actors_statically() -> None:
    offenders = []
    for path in sorted((ROOT / "protocols").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ("actors", "supervisor")]
    assert offenders == []


def test_importing_protocols_loads_no_actor_module() -> None:
    code = "import sys, protocols; print(sorted(m for m in sys.modules if m.split('.')[0] in ('actors', 'supervisor', 'pykka', 'trio')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
    assert protocols.__name__ == "protocols"
