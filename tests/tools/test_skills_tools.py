"""skills_list, skill_view and skill_manage through the registry, on real files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import actors.tools._skills  # noqa: F401 - registers the tools
from actors.agent import ToolContext, ToolOutput, Workspace
from actors.tools import REGISTRY


def skill_text(name: str, description: str = "Use when shipping a release.", body: str = "1. Tag.\n2. Push.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"


async def run(home: Path, tool: str, /, **arguments: Any) -> ToolOutput:
    call = ToolContext(session_id="s", turn_id="t", call_id="c", home=home, workspace=Workspace(home))
    return await REGISTRY.get(tool).run(arguments, call)


def test_the_three_tools_form_the_skills_toolset_and_only_manage_writes() -> None:
    assert sorted(t.name for t in REGISTRY.in_toolset("skills")) == ["skill_manage", "skill_view", "skills_list"]
    assert REGISTRY.get("skills_list").traits.read_only and REGISTRY.get("skill_view").traits.read_only
    assert not REGISTRY.get("skill_manage").traits.read_only
    assert REGISTRY.get("skill_manage").parameters()["required"] == ["action", "name"]


async def test_create_list_view_patch_edit_and_delete(tmp_path: Path) -> None:
    assert (await run(tmp_path, "skills_list")).content.startswith("No skills yet.")
    created = await run(tmp_path, "skill_manage", action="create", name="release", content=skill_text("release"))
    assert created.ok and created.content.startswith("Created skill 'release'.")
    await run(tmp_path, "skill_manage", action="create", name="arxiv", category="research", content=skill_text("arxiv", "Find papers."))
    listed = await run(tmp_path, "skills_list")
    assert listed.content == "2 skills:\n- arxiv [research]: Find papers.\n- release: Use when shipping a release."
    assert (await run(tmp_path, "skills_list", category="research")).content == "1 skill:\n- arxiv [research]: Find papers."
    assert (await run(tmp_path, "skill_view", name="release")).content == skill_text("release")
    patched = await run(tmp_path, "skill_manage", action="patch", name="release", old_string="2. Push.", new_string="2. Push the tag.")
    assert patched.content == "Patched SKILL.md of 'release' (1 place changed)."
    assert "2. Push the tag." in (await run(tmp_path, "skill_view", name="release")).content
    edited = await run(tmp_path, "skill_manage", action="edit", name="release", content=skill_text("release", "New.", "Steps."))
    assert edited.ok and (tmp_path / "skills" / "release" / "SKILL.md").read_text(encoding="utf-8") == skill_text("release", "New.", "Steps.")
    deleted = await run(tmp_path, "skill_manage", action="delete", name="release")
    assert deleted.content == "Deleted skill 'release'." and not (tmp_path / "skills" / "release").exists()


async def test_extra_files_are_written_shown_with_the_skill_viewed_and_removed(tmp_path: Path) -> None:
    await run(tmp_path, "skill_manage", action="create", name="kit", content=skill_text("kit"))
    wrote = await run(tmp_path, "skill_manage", action="write_file", name="kit", file_path="scripts/run.sh", file_content="echo hi\n")
    assert wrote.content == "Wrote scripts/run.sh in skill 'kit' (8 characters)."
    view = await run(tmp_path, "skill_view", name="kit")
    assert view.content.endswith("[extra files of this skill: scripts/run.sh; read one with skill_view(name, file_path)]")
    assert (await run(tmp_path, "skill_view", name="kit", file_path="scripts/run.sh")).content == "# kit/scripts/run.sh\necho hi\n"
    removed = await run(tmp_path, "skill_manage", action="remove_file", name="kit", file_path="scripts/run.sh")
    assert removed.content == "Removed scripts/run.sh from skill 'kit'."
    assert not (tmp_path / "skills" / "kit" / "scripts").exists()


async def test_bad_names_bad_frontmatter_escapes_and_missing_arguments_are_error_results(tmp_path: Path) -> None:
    await run(tmp_path, "skill_manage", action="create", name="kit", content=skill_text("kit"))
    os.symlink(tmp_path, tmp_path / "skills" / "kit" / "up")
    cases: dict[str, dict[str, Any]] = {
        "invalid skill name 'Bad_Name'": dict(action="create", name="Bad_Name", content=skill_text("Bad_Name")),
        "must start with YAML frontmatter": dict(action="create", name="new", content="no frontmatter"),
        "exists already": dict(action="create", name="kit", content=skill_text("kit")),
        "climbs out with '..'": dict(action="write_file", name="kit", file_path="../x.md", file_content="x"),
        "absolute path": dict(action="write_file", name="kit", file_path="/tmp/x.md", file_content="x"),
        "leads outside the skill folder": dict(action="write_file", name="kit", file_path="up/evil.md", file_content="x"),
        "occurs 2 times": dict(action="patch", name="kit", old_string=". ", new_string="! "),
        "no skill named 'ghost'": dict(action="delete", name="ghost"),
        "create needs 'content'": dict(action="create", name="x"),
        "write_file needs 'file_path' and 'file_content'": dict(action="write_file", name="kit"),
        "patch needs 'old_string' and 'new_string'": dict(action="patch", name="kit"),
    }
    for expected, arguments in cases.items():
        result = await run(tmp_path, "skill_manage", **arguments)
        assert not result.ok and result.content.startswith("[error] skill_manage: ") and expected in result.content, result.content
    assert not (tmp_path / "evil.md").exists() and not (tmp_path / "skills" / "x.md").exists()
    (tmp_path / "secret.txt").write_text("secret", encoding="utf-8")
    escaped = await run(tmp_path, "skill_view", name="kit", file_path="up/secret.txt")
    assert not escaped.ok and "leads outside" in escaped.content
