"""The skill library: ``HERMES_HOME/skills/<name>/SKILL.md`` plus extra files in that folder.

A skill is a folder whose ``SKILL.md`` starts with YAML frontmatter holding ``name`` (equal
to the folder's name) and ``description`` (when to use it), followed by the instructions.
Hermes groups skills in category folders (``skills/<category>/<name>/``); those are read
too, and ``create`` can put a new skill in a category.

Names are lowercase letters and digits in groups joined by single ``-`` (at most 64
characters), so a name is always one safe path component. Extra files are addressed by
relative paths that may not be absolute, may not contain ``..``, and must still lead into
the skill's folder after symbolic links are resolved.

Only the frontmatter goes into the system prompt (through ``skills_index``), so only it is
threat-scanned on write. The instructions reach the model as a tool result when it asks
for them, and the agent can run commands anyway, so scanning them would add friction
without protection (Hermes leaves its skill scan off by default for the same reason).

Every method does file I/O: call them from a worker thread.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from ._errors import InvalidSkill, SkillError, SkillExists, SkillNotFound, ThreatBlocked, UnsafePath
from ._files import atomic_write_text, exclusive
from ._threats import scan_text

SKILLS_FOLDER = "skills"
SKILL_FILE = "SKILL.md"
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1_024
MAX_SKILL_CHARS = 100_000
MAX_FILE_CHARS = 1_000_000
MAX_LISTED_FILES = 200

_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_FRONTMATTER_HELP = "start SKILL.md with a line '---', then 'name: <name>' and 'description: <when to use it>', then '---'"


def check_skill_name(name: str, *, what: str = "skill name") -> str:
    """``name`` if it is a valid skill (or category) name.

    Raises:
        InvalidSkill: with what a valid name looks like.
    """
    if len(name) > MAX_NAME_CHARS:
        msg = f"the {what} is {len(name)} characters long; at most {MAX_NAME_CHARS}"
        raise InvalidSkill(msg)
    if not _NAME.fullmatch(name):
        msg = f"invalid {what} {name!r}: use lowercase letters and digits, joined by single '-' (e.g. 'deploy-docs')"
        raise InvalidSkill(msg)
    return name


@dataclasses.dataclass(frozen=True, slots=True)
class Skill:
    """One skill as listed."""

    name: str
    description: str
    folder: Path
    category: str | None = None
    problem: str | None = None
    """Why its SKILL.md is invalid, when it is (such a skill stays out of the index)."""


def parse_skill(text: str, name: str) -> tuple[dict[str, Any], str]:
    """The frontmatter and the body of a ``SKILL.md`` for the skill ``name``, validated.

    Raises:
        InvalidSkill: missing or malformed frontmatter, a name that differs, no description,
            no instructions.
    """
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")
    if lines[0].strip() != "---":
        msg = f"SKILL.md must start with YAML frontmatter: {_FRONTMATTER_HELP}"
        raise InvalidSkill(msg)
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        msg = "the frontmatter of SKILL.md is not closed: add a line '---' after it"
        raise InvalidSkill(msg)
    try:
        meta = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        msg = f"the frontmatter of SKILL.md is not valid YAML ({first}): {_FRONTMATTER_HELP}"
        raise InvalidSkill(msg) from None
    if not isinstance(meta, dict):
        msg = f"the frontmatter of SKILL.md must be a YAML mapping: {_FRONTMATTER_HELP}"
        raise InvalidSkill(msg)
    if meta.get("name") != name:
        msg = f"the frontmatter says name: {meta.get('name')!r}, but the skill is {name!r}; they must match"
        raise InvalidSkill(msg)
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        msg = "the frontmatter needs a non-empty 'description': one line saying when to use the skill"
        raise InvalidSkill(msg)
    if len(description) > MAX_DESCRIPTION_CHARS:
        msg = f"the description is {len(description):,} characters long; at most {MAX_DESCRIPTION_CHARS:,}"
        raise InvalidSkill(msg)
    body = "\n".join(lines[end + 1 :])
    if not body.strip():
        msg = "SKILL.md has no instructions after the frontmatter"
        raise InvalidSkill(msg)
    return meta, body


def validate_skill(text: str, name: str) -> str:
    """The description of a ``SKILL.md`` fit to be saved.

    Raises:
        InvalidSkill: too long, or see :func:`parse_skill`.
        ThreatBlocked: the name or description (which go into the system prompt) failed the scan.
    """
    if len(text) > MAX_SKILL_CHARS:
        msg = f"SKILL.md is {len(text):,} characters long; at most {MAX_SKILL_CHARS:,} (move details to extra files)"
        raise InvalidSkill(msg)
    meta, _ = parse_skill(text, name)
    description = str(meta["description"])
    threat = scan_text(f"{name}\n{description}")
    if threat is not None:
        msg = f"refused to save skill {name!r}: its description goes into the system prompt and {threat.reason}"
        raise ThreatBlocked(msg)
    return description


class SkillLibrary:
    """The skills under one HERMES_HOME."""

    def __init__(self, home: Path) -> None:
        self.root = home / SKILLS_FOLDER

    # -- reading ------------------------------------------------------------------------------

    def skills(self) -> list[Skill]:
        """Every skill, by name; a skill whose SKILL.md is invalid is listed with its ``problem``."""
        found: dict[str, Skill] = {}
        for folder, category in self._folders():
            if folder.name not in found:
                found[folder.name] = self._load(folder, category)
        return [found[name] for name in sorted(found)]

    def find(self, name: str) -> Skill:
        """The skill ``name``.

        Raises:
            InvalidSkill: a bad name.
            SkillNotFound: no such skill.
        """
        check_skill_name(name)
        direct = self.root / name
        if (direct / SKILL_FILE).is_file():
            return self._load(direct, None)
        for folder, category in self._folders():
            if folder.name == name:
                return self._load(folder, category)
        msg = f"there is no skill named {name!r}; skills_list shows the skills there are"
        raise SkillNotFound(msg)

    def read(self, name: str, file_path: str | None = None) -> str:
        """The text of SKILL.md, or of the extra file ``file_path``.

        Raises:
            SkillNotFound, InvalidSkill, UnsafePath, SkillError: no such skill or file, or not text.
        """
        skill = self.find(name)
        if file_path is None or file_path.strip() in ("", SKILL_FILE):
            return _read_text(skill.folder / SKILL_FILE, SKILL_FILE, MAX_SKILL_CHARS * 2)
        target = _inside(skill.folder, file_path)
        if not target.is_file():
            msg = f"skill {name!r} has no file {file_path!r}; its files: {', '.join(self.files(name)) or 'none besides SKILL.md'}"
            raise SkillError(msg)
        return _read_text(target, file_path, MAX_FILE_CHARS)

    def files(self, name: str) -> list[str]:
        """The extra files of skill ``name`` (relative paths, sorted; hidden files left out)."""
        folder = self.find(name).folder
        listed: list[str] = []
        for parent, dirs, names in os.walk(folder):  # does not follow symlinked folders
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for file_name in sorted(names):
                relative = (Path(parent) / file_name).relative_to(folder).as_posix()
                if not file_name.startswith(".") and relative != SKILL_FILE:
                    listed.append(relative)
                    if len(listed) == MAX_LISTED_FILES:
                        return listed
        return listed

    # -- changing -----------------------------------------------------------------------------

    def create(self, name: str, content: str, *, category: str | None = None) -> Skill:
        """A new skill ``name`` (in ``category`` if given) whose SKILL.md is ``content``.

        Raises:
            InvalidSkill, ThreatBlocked: nothing was written.
            SkillExists: the name is taken (in any category).
        """
        check_skill_name(name)
        parent = self.root
        if category is not None:
            check_skill_name(category, what="category name")
            parent = self.root / category
            if (parent / SKILL_FILE).exists():
                msg = f"{category!r} is a skill, not a category; choose another category or none"
                raise InvalidSkill(msg)
        try:
            existing: Skill | None = self.find(name)
        except SkillNotFound:
            existing = None
        if existing is not None:
            msg = f"a skill named {name!r} exists already ({self._where(existing)}); change it with edit or patch, or delete it first"
            raise SkillExists(msg)
        description = validate_skill(content, name)
        parent.mkdir(parents=True, exist_ok=True)
        folder = parent / name
        try:
            folder.mkdir()
        except FileExistsError:
            msg = f"{self._where_folder(folder)} exists already (without a valid SKILL.md); delete it or choose another name"
            raise SkillExists(msg) from None
        try:
            atomic_write_text(folder / SKILL_FILE, content)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return Skill(name=name, description=description, folder=folder, category=category)

    def edit(self, name: str, content: str) -> Skill:
        """Rewrite SKILL.md of ``name`` with ``content``.

        Raises:
            SkillNotFound, InvalidSkill, ThreatBlocked: nothing was written.
        """
        skill = self.find(name)
        description = validate_skill(content, name)
        with exclusive(skill.folder):
            atomic_write_text(skill.folder / SKILL_FILE, content)
        return dataclasses.replace(skill, description=description, problem=None)

    def patch(self, name: str, old_string: str, new_string: str, *, replace_all: bool = False) -> tuple[Skill, int]:
        """Replace ``old_string`` by ``new_string`` in SKILL.md; it must occur once unless ``replace_all``.

        Returns the skill and how many places changed.

        Raises:
            SkillNotFound, SkillError (no match, several), InvalidSkill, ThreatBlocked: nothing was written.
        """
        skill = self.find(name)
        if not old_string:
            msg = "old_string is empty: copy the exact text to replace from the skill (skill_view shows it)"
            raise SkillError(msg)
        path = skill.folder / SKILL_FILE
        with exclusive(skill.folder):
            text = _read_text(path, SKILL_FILE, MAX_SKILL_CHARS * 2)
            count = text.count(old_string)
            if count == 0:
                msg = f"old_string was not found in {name}/SKILL.md; view the skill and copy the exact text, whitespace included"
                raise SkillError(msg)
            if count > 1 and not replace_all:
                msg = f"old_string occurs {count} times in {name}/SKILL.md; include more surrounding text so it matches once, or set replace_all"
                raise SkillError(msg)
            patched = text.replace(old_string, new_string, -1 if replace_all else 1)
            description = validate_skill(patched, name)
            atomic_write_text(path, patched)
        return dataclasses.replace(skill, description=description, problem=None), count if replace_all else 1

    def delete(self, name: str) -> Skill:
        """Remove the skill's folder (a symlinked skill folder loses the link, not its target)."""
        skill = self.find(name)
        with exclusive(skill.folder):
            if skill.folder.is_symlink():
                skill.folder.unlink()
            else:
                shutil.rmtree(skill.folder)
        return skill

    def write_file(self, name: str, file_path: str, content: str) -> str:
        """Write an extra file of the skill (created with its folders, or replaced); returns its relative path.

        Raises:
            SkillNotFound, UnsafePath, InvalidSkill: nothing was written.
        """
        skill = self.find(name)
        relative = _relative(file_path, for_change=True)
        if len(content) > MAX_FILE_CHARS:
            msg = f"the file is {len(content):,} characters long; at most {MAX_FILE_CHARS:,}"
            raise InvalidSkill(msg)
        target = _inside(skill.folder, file_path)
        if target == skill.folder.resolve() / SKILL_FILE:
            msg = f"{file_path!r} leads to SKILL.md, which is changed with the edit or patch actions"
            raise InvalidSkill(msg)
        with exclusive(skill.folder):
            if target.is_dir():
                msg = f"{file_path!r} is a folder in skill {name!r}; give a file path"
                raise SkillError(msg)
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(target, content)
        return relative.as_posix()

    def remove_file(self, name: str, file_path: str) -> str:
        """Remove an extra file (a symlink loses the link only), and folders it leaves empty.

        Raises:
            SkillNotFound, UnsafePath, SkillError: nothing was removed.
        """
        skill = self.find(name)
        relative = _relative(file_path, for_change=True)
        base = skill.folder.resolve()
        # The folders on the way are resolved (a symlinked folder must not lead out); the
        # last component is not, so removing a symlink removes only the link.
        parent = _inside(skill.folder, relative.parent.as_posix()) if relative.parent.parts else base
        target = parent / relative.name
        with exclusive(skill.folder):
            if not target.is_symlink() and not target.exists():
                msg = f"skill {name!r} has no file {file_path!r}; nothing removed"
                raise SkillError(msg)
            if target.is_dir() and not target.is_symlink():
                msg = f"{file_path!r} is a folder; remove the files in it one by one"
                raise SkillError(msg)
            target.unlink()
            while parent != base and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent
        return relative.as_posix()

    # -- internals ----------------------------------------------------------------------------

    def _folders(self) -> list[tuple[Path, str | None]]:
        """Skill folders with their category: ``skills/<name>/`` first, then ``skills/<category>/<name>/``."""
        if not self.root.is_dir():
            return []
        top: list[tuple[Path, str | None]] = []
        nested: list[tuple[Path, str | None]] = []
        for entry in sorted(self.root.iterdir()):
            if not _NAME.fullmatch(entry.name) or len(entry.name) > MAX_NAME_CHARS or not entry.is_dir():
                continue
            if (entry / SKILL_FILE).is_file():
                top.append((entry, None))
                continue
            for sub in sorted(entry.iterdir()):
                if _NAME.fullmatch(sub.name) and len(sub.name) <= MAX_NAME_CHARS and (sub / SKILL_FILE).is_file():
                    nested.append((sub, entry.name))
        return top + nested

    def _load(self, folder: Path, category: str | None) -> Skill:
        try:
            text = _read_text(folder / SKILL_FILE, SKILL_FILE, MAX_SKILL_CHARS * 2)
            meta, _ = parse_skill(text, folder.name)
        except SkillError as exc:
            return Skill(name=folder.name, description="", folder=folder, category=category, problem=str(exc))
        return Skill(name=folder.name, description=str(meta["description"]), folder=folder, category=category)

    def _where(self, skill: Skill) -> str:
        return self._where_folder(skill.folder)

    def _where_folder(self, folder: Path) -> str:
        return f"{SKILLS_FOLDER}/{folder.relative_to(self.root).as_posix()}"


def _relative(file_path: str, *, for_change: bool = False) -> PurePosixPath:
    if not file_path.strip():
        msg = "file_path is empty: give a path inside the skill folder, e.g. 'references/api.md'"
        raise UnsafePath(msg)
    if "\x00" in file_path or "\\" in file_path:
        msg = f"{file_path!r}: use '/' between folders, and no NUL characters"
        raise UnsafePath(msg)
    path = PurePosixPath(file_path)
    if path.is_absolute() or re.match(r"[A-Za-z]:", file_path):
        msg = f"{file_path!r} is an absolute path; give a path relative to the skill folder, e.g. 'references/api.md'"
        raise UnsafePath(msg)
    if ".." in path.parts:
        msg = f"{file_path!r} climbs out with '..'; files must stay inside the skill folder"
        raise UnsafePath(msg)
    if not path.parts:
        msg = f"{file_path!r} names the skill folder itself; give a file path inside it"
        raise UnsafePath(msg)
    if for_change and path.parts == (SKILL_FILE,):
        msg = "SKILL.md is changed with the edit or patch actions, which validate its frontmatter"
        raise InvalidSkill(msg)
    return path


def _inside(folder: Path, file_path: str) -> Path:
    """The resolved path of ``file_path`` in ``folder``, checked to stay inside it after symlinks."""
    relative = _relative(file_path)
    base = folder.resolve()
    target = (folder / relative).resolve()
    if target == base or not target.is_relative_to(base):
        msg = f"{file_path!r} leads outside the skill folder (through a symbolic link); files must stay inside it"
        raise UnsafePath(msg)
    return target


def _read_text(path: Path, shown: str, limit: int) -> str:
    try:
        with path.open("rb") as source:
            data = source.read(limit + 1)
    except FileNotFoundError:
        msg = f"{shown} does not exist"
        raise SkillError(msg) from None
    if len(data) > limit:
        msg = f"{shown} is larger than {limit:,} bytes; too large to read as a skill file"
        raise SkillError(msg)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        msg = f"{shown} is not a UTF-8 text file"
        raise SkillError(msg) from None
