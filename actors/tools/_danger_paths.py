"""What a path is to the checker: the whole filesystem, a system tree, a disk, a credential, the agent's own files.

Pure string work on absolute, normalised paths (no file system access): the checker judges
a command before it runs, often for a machine state it cannot see.

- :func:`hardline_target`: deleting this recursively is never allowed (``/``, a top-level
  system directory, the user's home, in their macOS ``/private`` spellings too).
- :func:`sensitive_file`: writing this needs a person's yes (keys, shell start-up files,
  ``.env`` files, anything under HERMES_HOME).
"""

from __future__ import annotations

import posixpath
import re

SYSTEM_TOPS = frozenset({"etc", "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "boot", "var", "root", "sys", "proc", "dev", "snap", "run"})
"""Top-level directories whose trees belong to the system (changing them needs approval)."""
_SYSTEM_ROOTS = frozenset({"/home", "/opt", "/srv", "/mnt", "/media"})
"""Directories that are system paths themselves, though what is under them is not."""
WRITE_SYSTEM_TOPS = frozenset({"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "boot", "sys", "proc"})

_HARDLINE_TOPS = ("etc", "usr", "var", "boot", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "home", "root", "opt", "srv", "sys", "proc", "dev")
HARDLINE_DIRS = frozenset(
    {f"/{top}" for top in _HARDLINE_TOPS} | {f"/private/{top}" for top in _HARDLINE_TOPS} | {"/private", "/System", "/Library", "/Applications", "/Users"}
)
"""Top-level system directories (and their macOS ``/private`` and ``/System`` forms): deleting one recursively is the hardline."""

_RAW_DISK = re.compile(
    r"/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|md\d|dm-\d|loop\d|sr\d|disk\d|rdisk\d|"
    r"mapper/|disk/|root$|mem$|kmem$|port$|nbd\d|zd\d|bcache\d)"
)
_HARMLESS_DEV = re.compile(r"/dev/(?:null|zero|full|random|urandom|tty|stdin|stdout|stderr|ptmx)$|/dev/(?:fd|shm|pts)/")
_GLOB = re.compile(r"[*?\[]")

_CREDENTIAL_DIRS = (".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".docker")
_CREDENTIAL_FILES = frozenset({".netrc", ".pgpass", ".git-credentials", ".npmrc", ".pypirc", ".config/gh/hosts.yml", ".my.cnf"})
_STARTUP_FILES = frozenset(
    {
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".zshrc",
        ".zprofile",
        ".zshenv",
        ".zlogin",
        ".zlogout",
        ".cshrc",
        ".tcshrc",
        ".kshrc",
        ".mkshrc",
        ".config/fish/config.fish",
        ".xprofile",
        ".xinitrc",
    }
)
_STARTUP_DIRS = (".config/fish/conf.d", ".config/fish/functions", ".bashrc.d", ".config/autostart", ".config/systemd/user")
_ENV_TEMPLATES = frozenset({"example", "sample", "template", "dist"})
"""``.env.example`` and friends document the variables; they hold no secrets and nothing loads them."""
_OTHER_HOME = re.compile(r"^/(?:root|home/[^/]+|Users/[^/]+)(?:/(.*))?$")


def normpath(path: str) -> str:
    return posixpath.normpath(re.sub("/+", "/", path)) if path else path


def is_root(path: str) -> bool:
    """``/`` itself, or a glob that names everything in it (``/*``, ``/?*``)."""
    return path == "/" or re.fullmatch(r"/[*?]+", path) is not None


def is_raw_disk(path: str) -> bool:
    return _RAW_DISK.match(path) is not None


def is_device(path: str) -> bool:
    """A device node that is not one of the harmless ones (``/dev/null``, ``/dev/stdout``)."""
    return path.startswith("/dev/") and _HARMLESS_DEV.match(path) is None


def top_of(path: str) -> str:
    return path.split("/")[1] if path.startswith("/") else ""


def is_system(path: str) -> bool:
    return is_root(path) or top_of(path) in SYSTEM_TOPS or path in _SYSTEM_ROOTS


def is_etc(path: str) -> bool:
    return path == "/etc" or path.startswith(("/etc/", "/private/etc/")) or path == "/private/etc"


def _emptied(path: str) -> str:
    """The directory a trailing ``/*`` (or ``/.*``-free glob of only ``*?``) empties: ``/etc/*`` is ``/etc``."""
    while path != "/" and re.fullmatch(r"[*?]+", path.rsplit("/", 1)[-1]):
        path = path.rsplit("/", 1)[0] or "/"
    return path


def _glob_names(pattern: str, candidates: set[str]) -> str | None:
    """The candidate a glob matches, segment by segment as the shell would (``/e*`` names ``/etc``)."""
    parts = pattern.split("/")
    for candidate in sorted(candidates):
        names = candidate.split("/")
        if len(names) == len(parts) and all(glob_matches(p, n) for p, n in zip(parts, names, strict=True)):
            return candidate
    return None


def glob_matches(pattern: str, name: str) -> bool:
    """Whether the glob ``pattern`` (``*`` any run, ``?`` one character, all else literal) matches
    the whole of ``name``.

    Greedy, going back only to the last ``*`` seen: at most ``len(pattern) * len(name)`` steps.
    (A regular expression with ``.*`` for each star backtracks through every way of cutting the
    name: ``rm -rf /home/`` and thirty stars and an ``x`` took minutes, and held the GIL.)
    """
    p = n = 0
    star = -1  # where the last star is in the pattern; ``resume``: where its run would end next
    resume = 0
    while n < len(name):
        if p < len(pattern) and pattern[p] == "*":
            star, resume = p, n
            p += 1
        elif p < len(pattern) and pattern[p] in ("?", name[n]):
            p += 1
            n += 1
        elif star >= 0:  # let the last star take one more character, and match on from there
            resume += 1
            p, n = star + 1, resume
        else:
            return False
    return pattern[p:].strip("*") == ""


def hardline_target(path: str, home: str) -> tuple[str, str] | None:
    """(key, what) when deleting ``path`` recursively is the hardline, else None."""
    if is_root(path):
        return "rm-root", "the whole filesystem"
    base = _emptied(path)
    if base == "/":
        return "rm-root", "the whole filesystem"
    if _GLOB.search(base):
        named = _glob_names(base, {*HARDLINE_DIRS, home})
        base = named if named is not None else base
    if base == home:
        return "rm-home", f"the home directory {home}"
    if base in HARDLINE_DIRS:
        return "rm-system", f"the system directory {base}"
    return None


def _home_relative(path: str, home: str) -> str | None:
    """``path`` relative to the user's (or another user's) home directory, or None."""
    if path.startswith(home + "/"):
        return path[len(home) + 1 :]
    found = _OTHER_HOME.match(path)
    return found.group(1) if found and found.group(1) else None


def is_env_file(name: str) -> bool:
    if name == ".env":
        return True
    return name.startswith(".env.") and name[5:].lower() not in _ENV_TEMPLATES


def sensitive_file(path: str, home: str, hermes_home: str) -> tuple[str, str] | None:
    """(key, why) when changing ``path`` needs approval for what the file is, else None.

    ``path`` is absolute and normalised, or (when it could not be resolved) as written.
    """
    if path == hermes_home or path.startswith(hermes_home + "/"):
        return "write-hermes-home", "changes the agent's own configuration"
    name = path.rsplit("/", 1)[-1]
    parts = path.split("/")
    if ".ssh" in parts or ".gnupg" in parts:
        return "write-credentials", "changes SSH or GPG keys"
    relative = _home_relative(path, home) if path.startswith("/") else None
    if relative is not None:
        if relative in _CREDENTIAL_FILES or any(relative == d or relative.startswith(d + "/") for d in _CREDENTIAL_DIRS):
            return "write-credentials", "changes stored credentials"
        if relative in _STARTUP_FILES or any(relative.startswith(d + "/") for d in _STARTUP_DIRS):
            return "write-startup", "changes a shell start-up file that runs at every login"
    if is_env_file(name):
        return "write-env-file", "changes a .env file of secrets and settings"
    if name == ".envrc":
        return "write-startup", "changes a direnv file that runs when a shell enters its directory"
    return None
