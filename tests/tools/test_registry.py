"""The tool registry and toolsets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec
import pytest

from actors import UsageError
from actors.agent import ToolContext, ToolOutput, ToolTraits, Workspace
from actors.tools import Registry, Toolset, resolve_toolsets, tool


class Args(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    path: Annotated[str, msgspec.Meta(description="Where to look.")]
    count: int = 1
    mode: str | None = None


def registry_with_tools() -> Registry:
    registry = Registry()

    @tool(name="look", toolset="file", description="Look at a path.", traits=ToolTraits(read_only=True, path_argument="path"), registry=registry)
    async def look(call: ToolContext, args: Args) -> str:
        return f"{args.path} x{args.count}"

    @tool(name="boom", toolset="file", description="Always fails.", registry=registry)
    async def boom(call: ToolContext, args: Args) -> str:
        raise OSError("disk on fire")

    @tool(name="flood", toolset="noisy", description="Too much output.", max_result_chars=100, registry=registry)
    async def flood(call: ToolContext, args: Args) -> ToolOutput:
        return ToolOutput(content="x" * 1000)

    return registry


def call(tmp_path: Path) -> ToolContext:
    return ToolContext(session_id="s", turn_id="t", call_id="c", home=tmp_path, workspace=Workspace(tmp_path))


def test_the_schema_is_an_inlined_json_object_schema_the_openai_tool_format_accepts() -> None:
    spec = registry_with_tools().get("look").spec()
    params = spec.parameters
    assert params["type"] == "object" and params["required"] == ["path"]
    assert params["properties"]["path"] == {"description": "Where to look.", "type": "string"}
    assert "$ref" not in str(params) and "$defs" not in str(params)
    entry = spec.schema()
    assert entry["type"] == "function" and entry["function"]["name"] == "look"


async def test_arguments_are_coerced_and_invalid_ones_answer_a_clear_error(tmp_path: Path) -> None:
    look = registry_with_tools().get("look")
    assert (await look.run({"path": "a", "count": "42"}, call(tmp_path))).content == "a x42"
    bad = await look.run({"count": "many"}, call(tmp_path))
    assert not bad.ok and bad.content.startswith("[error] invalid arguments for look:")


async def test_a_failing_tool_and_an_oversized_result_become_short_results(tmp_path: Path) -> None:
    registry = registry_with_tools()
    failed = await registry.get("boom").run({"path": "a"}, call(tmp_path))
    assert (failed.ok, failed.content) == (False, "[error] boom failed: disk on fire")
    flood = await registry.get("flood").run({"path": "a"}, call(tmp_path))
    assert len(flood.content) <= 100 and "more characters cut" in flood.content


def test_duplicate_names_and_bad_handlers_are_refused() -> None:
    registry = registry_with_tools()
    with pytest.raises(UsageError, match="registered already"):

        @tool(name="look", toolset="x", description="again", registry=registry)
        async def again(call: ToolContext, args: Args) -> str:
            return ""

    with pytest.raises(UsageError, match="must be async"):

        @tool(name="odd", toolset="x", description="no args struct", registry=registry)
        async def odd(call: ToolContext, args: dict) -> str:  # type: ignore[type-arg]
            return ""


def test_toolsets_resolve_includes_all_and_enable_disable_lists() -> None:
    registry = registry_with_tools()
    presets = {"mix": Toolset("mix", "file + noisy", includes=("file", "noisy")), "outer": Toolset("outer", "", includes=("mix",))}
    assert resolve_toolsets(["outer"], registry=registry, presets=presets) == ["boom", "look", "flood"]
    assert resolve_toolsets(["*"], registry=registry, presets=presets) == ["boom", "flood", "look"]
    assert resolve_toolsets(["file"], disabled=["boom"], enabled=["flood"], registry=registry, presets=presets) == ["look", "flood"]


def test_unknown_names_get_a_did_you_mean_and_cycles_are_refused() -> None:
    registry = registry_with_tools()
    with pytest.raises(UsageError, match="unknown toolset 'fiel'; did you mean 'file'"):
        resolve_toolsets(["fiel"], registry=registry, presets={})
    with pytest.raises(UsageError, match="unknown tool 'lok'; did you mean 'look'"):
        resolve_toolsets([], enabled=["lok"], registry=registry, presets={})
    cyclic = {"a": Toolset("a", "", includes=("b",)), "b": Toolset("b", "", includes=("a",))}
    with pytest.raises(UsageError, match="cycle: a -> b -> a"):
        resolve_toolsets(["a"], registry=registry, presets=cyclic)
