"""Walk a parsed command: unwrap prefixes, follow nested shells, resolve paths, collect findings.

:class:`Analysis` holds what was found (hardline ``blocked`` and ``dangerous`` findings,
each a stable key with a reason) and the state a reader of the command needs: the home
directory, the working directory as ``cd`` moves it, and how deep nested shells go. The
per-command rules live in ``_danger_rules``.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Callable

from ._danger_shell import OUTPUT_OPS, Command, Script, TooDeep, Word, parse_script, walk_commands

MAX_SHELL_DEPTH = 8
"""Nested shells (``bash -c "bash -c ..."``) read before giving up as unreviewable."""

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
RESERVED = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "coproc", "[[", "]]"})
_RAW_DISK = re.compile(
    r"/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|md\d|dm-\d|loop\d|sr\d|disk\d|rdisk\d|"
    r"mapper/|disk/|root$|mem$|kmem$|port$|nbd\d|zd\d|bcache\d)"
)
_HARMLESS_DEV = re.compile(r"/dev/(?:null|zero|full|random|urandom|tty|stdin|stdout|stderr|ptmx)$|/dev/(?:fd|shm|pts)/")
SYSTEM_TOPS = frozenset(
    {"etc", "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "boot", "var", "root", "sys", "proc", "dev", "snap", "run"}
)
"""Top-level directories whose trees belong to the system."""
_SYSTEM_ROOTS = frozenset({"/home", "/opt", "/srv", "/mnt", "/media"})
"""Directories that are system paths themselves, though what is under them is not."""
_WRITE_SYSTEM_TOPS = frozenset({"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "boot", "sys", "proc"})
_DYNAMIC_NAME = re.compile(r"^(?:\$\(|`)\s*(?:which|command\s+-v|type\s+-p|whereis)\s+([\w.+-]+)\s*(?:\)|`)$")


def command_name(word: Word) -> str:
    """The program a word names: ``/usr/bin/RM`` is ``rm``; ``$(which rm)`` is ``rm``."""
    text = word.text
    if word.dynamic:
        found = _DYNAMIC_NAME.match(text.strip())
        if found:
            text = found.group(1)
    return text.rsplit("/", 1)[-1].lower()


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


def _normpath(path: str) -> str:
    return posixpath.normpath(re.sub("/+", "/", path)) if path else path


def _brace_expand(text: str, limit: int = 64) -> list[str]:
    found = re.search(r"\{([^{}]*,[^{}]*)\}", text)
    if not found:
        return [text]
    out: list[str] = []
    for alternative in found.group(1).split(","):
        out += _brace_expand(text[: found.start()] + alternative + text[found.end() :], limit)
        if len(out) >= limit:
            break
    return out[:limit]


def positionals(args: list[Word], with_arg: frozenset[str] = frozenset()) -> list[Word]:
    """Arguments that are not options (and not an option's value)."""
    out: list[Word] = []
    skip = False
    ended = False
    for word in args:
        text = word.text
        if skip:
            skip = False
        elif not ended and text == "--":
            ended = True
        elif not ended and text.startswith("-") and text != "-":
            skip = text in with_arg
        else:
            out.append(word)
    return out


def short_flags(args: list[Word]) -> str:
    """All single-letter options given (``-rf -v`` gives ``rfv``), up to ``--``."""
    flags = []
    for word in args:
        if word.text == "--":
            break
        if re.fullmatch(r"-[A-Za-z0-9]+", word.text):
            flags.append(word.text[1:])
    return "".join(flags)


def long_options(args: list[Word]) -> list[str]:
    out = []
    for word in args:
        if word.text == "--":
            break
        if word.text.startswith("--"):
            out.append(word.text[2:].split("=", 1)[0])
    return out


@dataclasses.dataclass(slots=True)
class Ctx:
    """One simple command, unwrapped, handed to its rule."""

    analysis: Analysis
    name: str
    args: list[Word]
    command: Command
    upstream: list[Command]
    """The earlier stages of the pipeline (the last one feeds this command's stdin)."""
    depth: int


Rule = Callable[[Ctx], None]
Prefix = Callable[[Ctx, list[Word], int], int | None]
"""Given the words and the prefix's index: the index of the command it runs, or None."""


class Analysis:
    """Findings about one command, and the state needed to read it."""

    def __init__(self, *, home: str, cwd: str | None, rules: dict[str, Rule], prefixes: dict[str, Prefix]) -> None:
        self.home = home.rstrip("/") or "/"
        self.cwd = cwd
        self.rules = rules
        self.prefixes = prefixes
        self.blocked: dict[str, str] = {}
        self.dangerous: dict[str, str] = {}
        self.segments: list[str] = []
        """The text of every simple command seen, for deny globs."""

    def block(self, key: str, reason: str) -> None:
        self.blocked.setdefault(key, reason)

    def warn(self, key: str, reason: str) -> None:
        self.dangerous.setdefault(key, reason)

    # -- paths ----------------------------------------------------------------------------------------

    def resolve(self, word: Word) -> list[str] | None:
        """The absolute paths a word names, or None when that cannot be known."""
        text = word.text
        if text == "~" or text.startswith("~/"):
            text = self.home + text[1:]
        text = re.sub(r"\$\{HOME\}|\$HOME\b", lambda _m: self.home, text)
        if word.dynamic and ("$" in text or "`" in text):
            return None
        out = []
        for path in _brace_expand(text):
            if not path.startswith("/"):
                if self.cwd is None or not path:
                    return None
                path = f"{self.cwd}/{path}"
            out.append(_normpath(path))
        return out

    def writes(self, words: list[Word], verb: str, *, disk_key: str = "disk-write") -> None:
        """``words`` name files the command writes, creates or removes."""
        for word in words:
            for path in self.resolve(word) or ():
                if is_raw_disk(path):
                    self.block(disk_key, f"writes straight to the disk device {path} ({verb})")
                elif path == "/etc" or path.startswith("/etc/"):
                    self.warn("write-etc", f"changes system configuration under /etc ({verb} {path})")
                elif top_of(path) in _WRITE_SYSTEM_TOPS:
                    self.warn("write-system", f"changes system files ({verb} {path})")

    # -- walking --------------------------------------------------------------------------------------

    def text(self, text: str, depth: int) -> None:
        """Read ``text`` as a shell script run by a nested shell (its ``cd`` stays inside)."""
        if depth > MAX_SHELL_DEPTH:
            self.warn("unreviewable", "shells are nested too deeply to check")
            return
        try:
            script = parse_script(text)
        except TooDeep:
            self.warn("unreviewable", "substitutions are nested too deeply to check")
            return
        saved = self.cwd
        try:
            self.script(script, depth)
        finally:
            self.cwd = saved

    def script(self, script: Script, depth: int) -> None:
        for pipeline in script:
            for index, command in enumerate(pipeline):
                self.command(command, pipeline[:index], depth)

    def subshell(self, script: Script, depth: int) -> None:
        saved = self.cwd
        try:
            self.script(script, depth)
        finally:
            self.cwd = saved

    def command(self, command: Command, upstream: list[Command], depth: int) -> None:
        for word in command.words:
            for sub in word.subs:
                self.subshell(sub, depth)
        for redirect in command.redirects:
            for sub in redirect.target.subs:
                self.subshell(sub, depth)
            target = redirect.target.text
            if redirect.op in OUTPUT_OPS and not (redirect.op == ">&" and (target.isdigit() or target == "-")):
                self.writes([redirect.target], f"redirect {redirect.op}")
        for sub in command.subs:
            self.subshell(sub, depth)
        if command.words:
            self.segments.append(" ".join(w.text for w in command.words))
            self.argv(command.words, command, upstream, depth)

    def argv(self, words: list[Word], command: Command, upstream: list[Command], depth: int) -> None:
        """Judge one command line: skip assignments, reserved words and prefixes, then apply its rule."""
        index = 0
        while index < len(words):
            word = words[index]
            if _ASSIGNMENT.match(word.text):
                index += 1
                continue
            name = command_name(word)
            if name in RESERVED:
                index += 1
                continue
            prefix = self.prefixes.get(name)
            if prefix is None:
                break
            following = prefix(Ctx(self, name, words[index + 1 :], command, upstream, depth), words, index)
            if following is None:
                return
            index = following
        if index >= len(words):
            return
        if index:
            self.segments.append(" ".join(w.text for w in words[index:]))
        name = command_name(words[index])
        rule = self.rules.get(name)
        if rule is None and name.startswith("mkfs"):
            rule = self.rules.get("mkfs")
        if rule is None and re.fullmatch(r"python[0-9.]*|pypy[0-9.]*", name):
            rule = self.rules.get("python")
        if rule is not None:
            rule(Ctx(self, name, words[index + 1 :], command, upstream, depth))


def head_name(command: Command) -> str:
    """The program a command runs, past assignments and the common prefixes (cheap, no findings)."""
    skipping = {"sudo", "doas", "env", "command", "nohup", "exec", "time", "nice", "builtin", "busybox", "stdbuf"}
    after_prefix = False
    for word in command.words:
        if _ASSIGNMENT.match(word.text):
            continue
        name = command_name(word)
        if name in RESERVED or name in skipping:
            after_prefix = True
            continue
        if after_prefix and word.text.startswith("-"):
            continue
        return name
    return ""


def mentions(script: Script, names: frozenset[str]) -> bool:
    """Whether any command of ``script`` (substitutions included) runs one of ``names``."""
    return any(head_name(command) in names for command in walk_commands(script))
