"""The skills tools (toolset "skills"): ``skills_list``, ``skill_view`` and ``skill_manage``.

The file logic lives in :class:`actors.memory.SkillLibrary`; these are the model-facing
wrappers, running the library in reactor worker threads. ``skills_list`` and
``skill_view`` only read; ``skill_manage`` runs alone in its batch (default traits).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
import trio

from actors.agent import ToolContext, ToolOutput, ToolTraits
from actors.memory import KnowledgeError, SkillLibrary

from ._registry import tool

MANAGE_DESCRIPTION = """\
Create and maintain skills: reusable instructions saved in HERMES_HOME/skills/<name>/SKILL.md.

Create one after a complex task succeeded (many tool calls, errors overcome, or an approach
the user corrected), so the next time goes straight. Update one when you find its steps
stale, wrong, or missing something. A good skill says when to use it, gives numbered steps
with exact commands, lists pitfalls, and says how to verify the result.

SKILL.md starts with YAML frontmatter, then the instructions:
---
name: <the skill's name>
description: <one line: when to use this skill>
---
Names: lowercase letters, digits and '-', at most 64 characters.
Actions: 'create' (name, content, optional category), 'edit' (name, content: full rewrite),
'patch' (name, old_string, new_string: exact text, unique unless replace_all), 'delete'
(name), 'write_file' / 'remove_file' (name, file_path relative to the skill folder such as
'references/api.md' or 'scripts/run.sh', and file_content to write)."""


class SkillsListArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    category: Annotated[str | None, msgspec.Meta(description="Only the skills of this category.")] = None


class SkillViewArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: Annotated[str, msgspec.Meta(description="The skill's name.")]
    file_path: Annotated[str | None, msgspec.Meta(description="An extra file of the skill to read instead of SKILL.md, e.g. 'references/api.md'.")] = None


class SkillManageArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    action: Annotated[Literal["create", "patch", "edit", "delete", "write_file", "remove_file"], msgspec.Meta(description="What to do.")]
    name: Annotated[str, msgspec.Meta(description="The skill's name (lowercase letters, digits and '-', at most 64).")]
    content: Annotated[str | None, msgspec.Meta(description="The full SKILL.md: frontmatter and instructions (create, edit).")] = None
    old_string: Annotated[str | None, msgspec.Meta(description="The exact text to find in SKILL.md (patch).")] = None
    new_string: Annotated[str | None, msgspec.Meta(description="The text to put in its place (patch).")] = None
    replace_all: Annotated[bool, msgspec.Meta(description="patch: replace every occurrence, not just a unique one.")] = False
    category: Annotated[str | None, msgspec.Meta(description="create: a category folder to put the skill in.")] = None
    file_path: Annotated[str | None, msgspec.Meta(description="write_file, remove_file: a path relative to the skill folder.")] = None
    file_content: Annotated[str | None, msgspec.Meta(description="write_file: the file's content.")] = None


@tool(
    name="skills_list",
    toolset="skills",
    description="List the saved skills: name, category and a one-line description of when to use each.",
    traits=ToolTraits(read_only=True),
)
async def skills_list(context: ToolContext, args: SkillsListArgs) -> ToolOutput:
    skills = await trio.to_thread.run_sync(SkillLibrary(context.home).skills)
    if args.category is not None:
        skills = [skill for skill in skills if skill.category == args.category]
    if not skills:
        where = f" in category {args.category!r}" if args.category is not None else ""
        return ToolOutput(content=f"No skills{where} yet. Create one with skill_manage after a task worth repeating.")
    lines = [f"{len(skills)} skill{'s' if len(skills) != 1 else ''}:"]
    for skill in skills:
        category = f" [{skill.category}]" if skill.category else ""
        about = f"(invalid: {skill.problem})" if skill.problem else " ".join(skill.description.split())
        lines.append(f"- {skill.name}{category}: {about}")
    return ToolOutput(content="\n".join(lines))


@tool(
    name="skill_view",
    toolset="skills",
    description="Read a skill's SKILL.md (and the list of its extra files), or one of its extra files.",
    traits=ToolTraits(read_only=True),
)
async def skill_view(context: ToolContext, args: SkillViewArgs) -> ToolOutput:
    library = SkillLibrary(context.home)

    def view() -> str:
        text = library.read(args.name, args.file_path)
        if args.file_path not in (None, "", "SKILL.md"):
            return f"# {args.name}/{args.file_path}\n{text}"
        files = library.files(args.name)
        listing = f"\n\n[extra files of this skill: {', '.join(files)}; read one with skill_view(name, file_path)]" if files else ""
        return text + listing

    try:
        return ToolOutput(content=await trio.to_thread.run_sync(view))
    except KnowledgeError as exc:
        return _error("skill_view", str(exc))


@tool(name="skill_manage", toolset="skills", description=MANAGE_DESCRIPTION)
async def skill_manage(context: ToolContext, args: SkillManageArgs) -> ToolOutput:
    library = SkillLibrary(context.home)
    missing = _missing(args)
    if missing:
        return _error("skill_manage", f"{args.action} needs {missing}")

    def manage() -> str:
        match args.action:
            case "create":
                assert args.content is not None
                skill = library.create(args.name, args.content, category=args.category)
                return f"Created skill {skill.name!r}. It is listed in the system prompt from the next session on."
            case "edit":
                assert args.content is not None
                library.edit(args.name, args.content)
                return f"Rewrote SKILL.md of {args.name!r}."
            case "patch":
                assert args.old_string is not None and args.new_string is not None
                _, count = library.patch(args.name, args.old_string, args.new_string, replace_all=args.replace_all)
                return f"Patched SKILL.md of {args.name!r} ({count} place{'s' if count != 1 else ''} changed)."
            case "delete":
                library.delete(args.name)
                return f"Deleted skill {args.name!r}."
            case "write_file":
                assert args.file_path is not None and args.file_content is not None
                written = library.write_file(args.name, args.file_path, args.file_content)
                return f"Wrote {written} in skill {args.name!r} ({len(args.file_content):,} characters)."
            case "remove_file":
                assert args.file_path is not None
                removed = library.remove_file(args.name, args.file_path)
                return f"Removed {removed} from skill {args.name!r}."
        raise AssertionError(args.action)  # Literal exhausted above

    try:
        return ToolOutput(content=await trio.to_thread.run_sync(manage))
    except KnowledgeError as exc:
        return _error("skill_manage", str(exc))


_NEEDS: dict[str, tuple[str, ...]] = {
    "create": ("content",),
    "edit": ("content",),
    "patch": ("old_string", "new_string"),
    "delete": (),
    "write_file": ("file_path", "file_content"),
    "remove_file": ("file_path",),
}


def _missing(args: SkillManageArgs) -> str:
    absent = [field for field in _NEEDS[args.action] if getattr(args, field) is None]
    return " and ".join(f"'{field}'" for field in absent)


def _error(name: str, text: str) -> ToolOutput:
    return ToolOutput(content=f"[error] {name}: {text}", ok=False)
