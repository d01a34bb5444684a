"""The todo tool: a per-session list in the workspace, answered whole after every call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import actors.tools._todo  # noqa: F401 - registers the tool
from actors.agent import ToolContext, ToolOutput, Workspace
from actors.tools import REGISTRY
from actors.tools._todo import TodoList


async def todo(workspace: Workspace, **arguments: Any) -> ToolOutput:
    call = ToolContext(session_id="s", turn_id="t", call_id="c", home=workspace.cwd, workspace=workspace)
    return await REGISTRY.get("todo").run(arguments, call)


async def test_items_are_added_with_ids_updated_and_the_whole_list_comes_back_each_time(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    assert (await todo(workspace, action="list")).content == "The todo list is empty."
    added = await todo(workspace, action="add", items=["Read the issue", "Write   the\ntests", "Ship"])
    assert added.content == ("Todo (0/3 done):\n[ ] 1. Read the issue (pending)\n[ ] 2. Write the tests (pending)\n[ ] 3. Ship (pending)")
    await todo(workspace, action="update", id=1, status="done")
    await todo(workspace, action="update", id="2", status="in_progress", content="Write the tests first")
    updated = await todo(workspace, action="update", id=3, status="cancelled")
    assert updated.content == ("Todo (1/3 done):\n[x] 1. Read the issue (done)\n[>] 2. Write the tests first (in_progress)\n[-] 3. Ship (cancelled)")
    assert isinstance(workspace.extras["todo"], TodoList)


async def test_clear_empties_the_list_and_ids_are_never_reused(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    await todo(workspace, action="add", items=["a", "b"])
    assert (await todo(workspace, action="clear")).content == "The todo list is empty."
    assert (await todo(workspace, action="add", items=["c"])).content == "Todo (0/1 done):\n[ ] 3. c (pending)"


async def test_each_session_has_its_own_list(tmp_path: Path) -> None:
    one, two = Workspace(tmp_path), Workspace(tmp_path)
    await todo(one, action="add", items=["only in one"])
    assert (await todo(two, action="list")).content == "The todo list is empty."


async def test_bad_requests_answer_an_error_with_the_unchanged_list(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    await todo(workspace, action="add", items=["a"])
    cases: dict[str, dict[str, Any]] = {
        "add needs 'items'": dict(action="add"),
        "non-empty": dict(action="add", items=["ok", "  "]),
        "there is no item 9 (ids: 1)": dict(action="update", id=9, status="done"),
        "update needs 'id'": dict(action="update", id=1),
        "at most 500": dict(action="add", items=["x" * 501]),
        "at most 100": dict(action="add", items=[f"t{i}" for i in range(100)]),
    }
    for expected, arguments in cases.items():
        result = await todo(workspace, **arguments)
        assert not result.ok and result.content.startswith("[error] todo: ") and expected in result.content, result.content
        assert result.content.endswith("Todo (0/1 done):\n[ ] 1. a (pending)")
    bad_status = await todo(workspace, action="update", id=1, status="finished")
    assert not bad_status.ok and "invalid arguments" in bad_status.content
