"""Paths for the file tools: resolving the model's path, the write denylist, "did you mean".

A path from the model is expanded (``~``) and, when relative, joined to the session's
working directory. :func:`write_refusal` decides whether a write may touch it; it looks at
the path twice, with ``..`` removed lexically and with every symlink resolved, and at the
protected locations the same two ways, so no spelling of a protected file gets through.

Invariant: nothing here blocks on more than a few ``stat`` calls; callers run it in a
worker thread anyway (``realpath`` touches the disk).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

_HOME_FILES = (
    (".aws/credentials", "cloud credentials"),
    (".aws/config", "cloud credentials"),
    (".netrc", "login credentials"),
    (".pgpass", "database credentials"),
    (".npmrc", "package registry credentials"),
    (".pypirc", "package registry credentials"),
    (".git-credentials", "git credentials"),
    (".docker/config.json", "container registry credentials"),
    (".kube/config", "cluster credentials"),
    (".config/gh/hosts.yml", "GitHub credentials"),
    (".bashrc", "a shell start-up file (runs on every login)"),
    (".bash_profile", "a shell start-up file (runs on every login)"),
    (".bash_login", "a shell start-up file (runs on every login)"),
    (".profile", "a shell start-up file (runs on every login)"),
    (".zshrc", "a shell start-up file (runs on every login)"),
    (".zprofile", "a shell start-up file (runs on every login)"),
    (".zshenv", "a shell start-up file (runs on every login)"),
)
"""Files under the user's home directory that no write may touch."""

_HOME_DIRS = (
    (".ssh", "SSH keys and authorized_keys"),
    (".gnupg", "GnuPG keys"),
    (".aws", "cloud credentials"),
    (".azure", "cloud credentials"),
    (".config/gcloud", "cloud credentials"),
    (".kube", "cluster credentials"),
)
"""Directories under the user's home directory that no write may touch (anything inside)."""

_SYSTEM_FILES = (
    ("/etc/passwd", "the system account database"),
    ("/etc/shadow", "the system password database"),
    ("/etc/group", "the system group database"),
    ("/etc/gshadow", "the system group password database"),
    ("/etc/sudoers", "the sudo policy"),
)

_SYSTEM_DIRS = (("/etc/sudoers.d", "the sudo policy"),)

_ANY_LEVEL_DIRS = {".ssh": "SSH keys and authorized_keys", ".gnupg": "GnuPG keys"}
"""Directory names refused wherever they are (another user's ``.ssh`` as much as ours)."""


def resolve(raw: str, cwd: Path) -> Path:
    """The absolute path the model means: ``~`` expanded, relative to ``cwd``, ``..`` kept."""
    expanded = Path(os.path.expanduser(raw))
    return expanded if expanded.is_absolute() else cwd / expanded


def display(path: Path, cwd: Path) -> str:
    """``path`` relative to ``cwd`` when it is inside it, else absolute (what results show)."""
    try:
        return str(path.relative_to(cwd)) or "."
    except ValueError:
        return str(path)


def _forms(path: Path) -> set[Path]:
    """The lexical (``..`` removed) and the physical (symlinks resolved) spelling of ``path``."""
    lexical = Path(os.path.normpath(path))
    return {lexical, Path(os.path.realpath(path))}


def _protected(hermes_home: Path) -> tuple[list[tuple[Path, str]], list[tuple[Path, str]]]:
    home = Path(os.path.expanduser("~"))
    files = [(home / rel, why) for rel, why in _HOME_FILES]
    files += [(Path(p), why) for p, why in _SYSTEM_FILES]
    files += [
        (hermes_home / ".env", "the runtime's own API keys (HERMES_HOME/.env)"),
        (hermes_home / "auth.json", "the runtime's own credentials (HERMES_HOME/auth.json)"),
    ]
    dirs = [(home / rel, why) for rel, why in _HOME_DIRS]
    dirs += [(Path(p), why) for p, why in _SYSTEM_DIRS]
    return files, dirs


def write_refusal(path: Path, hermes_home: Path) -> str | None:
    """Why a write to ``path`` is refused, or None if it is allowed.

    Every argument spelling is covered: ``..`` segments, symlinks anywhere on the way
    (the final file included), and a home directory that is itself a symlink.
    """
    files, dirs = _protected(hermes_home)
    targets = _forms(path)
    for candidate in targets:
        for part in candidate.parts:
            if part.lower() in _ANY_LEVEL_DIRS:  # lower(): case-insensitive filesystems (macOS) too
                return _ANY_LEVEL_DIRS[part.lower()]
        if candidate.parent == Path("/etc") and candidate.name.startswith("sudoers"):
            return "the sudo policy"
    for protected, why in files:
        if targets & _forms(protected):
            return why
    for protected, why in dirs:
        for form in _forms(protected):
            if any(t == form or form in t.parents for t in targets):
                return why
    return None


def missing_hint(path: Path) -> str:
    """A hint for a path that does not exist: similar names in its directory, or the missing directory."""
    parent = path.parent
    if not parent.is_dir():
        missing = parent
        while missing.parent != missing and not missing.parent.is_dir():
            missing = missing.parent
        return f" The directory {missing} does not exist."
    try:
        names = os.listdir(parent)
    except OSError:
        return ""
    close = difflib.get_close_matches(path.name, names, n=3, cutoff=0.6)
    if close:
        return " Did you mean: " + ", ".join(str(parent / name) for name in close) + "?"
    return f" Nothing similar in {parent} ({len(names)} entries); search_files(target='files') can look for it."
