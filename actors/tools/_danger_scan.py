"""Walk a parsed command: unwrap prefixes, follow nested shells, resolve paths, collect findings.

:class:`Analysis` holds what was found (hardline ``blocked`` and ``dangerous`` findings,
each a stable key with a reason) and the state a reader of the command needs: the home
directory, the working directory as ``cd`` moves it, variables assigned on the way
(``x=/; rm -rf $x``), the files the command writes (a script written, then run, was
never shown to anyone) and how deep nested shells go. The per-command rules live in
``_danger_rules`` and the modules it gathers; what a path *is* lives in ``_danger_paths``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from ._danger_paths import WRITE_SYSTEM_TOPS, is_etc, is_raw_disk, normpath, sensitive_file, top_of
from ._danger_shell import OUTPUT_OPS, Command, Script, TooDeep, Word, parse_script, walk_commands
from ._danger_text import display_command

MAX_SHELL_DEPTH = 8
"""Nested shells (``bash -c "bash -c ..."``) read before giving up as unreviewable."""

ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
RESERVED = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "coproc", "[[", "]]"})
_DYNAMIC_NAME = re.compile(r"^(?:\$\(|`)\s*(?:which|command\s+-v|type\s+-p|whereis)\s+([\w.+-]+)\s*(?:\)|`)$")
_VARIABLE = re.compile(r"\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::?[-=](?P<default>[^}$]*)|[%#/:^,][^}]*)?\}|\$(?P<plain>[A-Za-z_][A-Za-z0-9_]*)")
_ECHOED = re.compile(
    r"\$\(\s*(?:echo|printf)\s+(?P<q>['\"]?)(?P<value>[^'\"$`()\s;|&]+)(?P=q)\s*\)"
    r"|`\s*(?:echo|printf)\s+(?P<q2>['\"]?)(?P<value2>[^'\"$`()\s;|&]+)(?P=q2)\s*`"
)
"""``$(echo /)``: a substitution whose output is plain to see."""
_WHOLE_VARIABLE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")
_PLAIN_NAME = re.compile(r"[\w.+/-]+")
_UNICODE_DASHES = frozenset("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe63\uff0d")


MAX_REASON_CHARS = 200


def one_line(reason: str) -> str:
    """A reason as one short line: quoted command text may hold newlines, escapes or a whole script."""
    text = " ".join(display_command(reason).split())
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


def command_name(word: Word) -> str:
    """The program a word names: ``/usr/bin/RM`` is ``rm``; ``$(which rm)`` is ``rm``."""
    text = word.text
    if word.dynamic:
        found = _DYNAMIC_NAME.match(text.strip())
        if found:
            text = found.group(1)
    return text.rsplit("/", 1)[-1].lower()


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


def abbreviates(options: list[str], name: str, shortest: int = 1) -> bool:
    """Whether one of ``options`` is ``name`` or a prefix of it (getopt and git accept unambiguous prefixes)."""
    return any(len(o) >= shortest and name.startswith(o) for o in options)


class Upstream(list[Command]):
    """The earlier stages of a pipeline, and what the rules ask of all of them, kept as it grows.

    A rule asking "is there a downloader anywhere before me?" at every stage of ``sh|sh|...|sh``
    walked the whole list each time: 1,000 stages took 2.4 s, a 100,000-character command hours.
    Each question is now answered from where the last one stopped: linear in the pipeline.
    """

    __slots__ = ("_answers", "_gathered", "_names")

    def __init__(self) -> None:
        super().__init__()
        self._names: set[str] = set()
        self._answers: dict[object, tuple[int, bool]] = {}
        self._gathered: dict[str, tuple[int, list[str]]] = {}

    def add(self, commands: list[Command]) -> None:
        self.extend(commands)
        self._names.update(head_name(c) for c in commands)

    def any_named(self, names: frozenset[str]) -> bool:
        """Whether an earlier stage runs one of ``names`` (by :func:`head_name`)."""
        return not self._names.isdisjoint(names)

    def any_of(self, test: Callable[[Command], bool]) -> bool:
        """Whether ``test`` holds for an earlier stage; ``test`` must be the same function each time
        (a module-level one): the stages it already saw are not asked again."""
        seen, found = self._answers.get(test, (0, False))
        for index in range(seen, len(self)):
            if found:
                break
            found = test(self[index])
        self._answers[test] = (len(self), found)
        return found

    def gathered(self, key: str, collect: Callable[[Command], list[str]]) -> list[str]:
        """What ``collect`` finds in every earlier stage, in order; ``key`` names the question (the
        stages already asked under it are not asked again)."""
        seen, found = self._gathered.get(key, (0, []))
        found = found + [item for index in range(seen, len(self)) for item in collect(self[index])]
        self._gathered[key] = (len(self), found)
        return found


NO_UPSTREAM = Upstream()
"""For a command run alone (``find -exec``, ``xargs``): nothing feeds it. Never added to."""


@dataclasses.dataclass(slots=True)
class Ctx:
    """One simple command, unwrapped, handed to its rule."""

    analysis: Analysis
    name: str
    args: list[Word]
    command: Command
    upstream: Upstream
    """The earlier stages of the pipeline (the last one feeds this command's stdin)."""
    depth: int
    head: Word = dataclasses.field(default_factory=lambda: Word(""))
    """The word that named the program, as written (``TRUNCATE`` is SQL, ``truncate`` is coreutils)."""


Rule = Callable[[Ctx], None]
Prefix = Callable[[Ctx, list[Word], int], int | None]
"""Given the words and the prefix's index: the index of the command it runs, or None."""
SocketCheck = Callable[["Analysis", Command, list[Word]], None]
_SOCKET_PATH = re.compile(r"^/dev/(?:tcp|udp)/[^/]+/\d+$")


class Analysis:
    """Findings about one command, and the state needed to read it."""

    def __init__(
        self,
        *,
        home: str,
        hermes_home: str,
        cwd: str | None,
        rules: dict[str, Rule],
        prefixes: dict[str, Prefix],
        sockets: SocketCheck | None = None,
    ) -> None:
        self.home = normpath(home) or "/"
        self.user = self.home.rsplit("/", 1)[-1]
        self.hermes_home = normpath(hermes_home) or "/"
        self.rules = rules
        self.prefixes = prefixes
        self.sockets = sockets
        """Judges a command with redirects to ``/dev/tcp``/``/dev/udp`` (``_danger_network``)."""
        self.blocked: dict[str, str] = {}
        self.dangerous: dict[str, str] = {}
        self.segments: list[str] = []
        """The text of every simple command seen, for deny globs."""
        self.cwd = cwd
        self.variables: dict[str, str] = {}
        """Variables assigned earlier in the command to a value known now."""
        self.ifs_changed = False
        """``IFS`` was reassigned: unquoted expansions may split anywhere, so none is trusted."""
        self.created: dict[str, str] = {}
        """Files the command wrote (``written``) or downloaded (``downloaded``), by path."""
        self.in_shell_string = 0
        """How many ``sh -c`` / ``eval`` strings the reader is inside (a shell in one is a nested shell)."""

    def restart(self, cwd: str | None) -> None:
        """Forget what one reading learnt (the command is read more than once)."""
        self.cwd = cwd
        self.variables = {}
        self.ifs_changed = False
        self.created = {}
        self.in_shell_string = 0

    def block(self, key: str, reason: str) -> None:
        self.blocked.setdefault(key, one_line(reason))

    def warn(self, key: str, reason: str) -> None:
        self.dangerous.setdefault(key, one_line(reason))

    # -- words and paths --------------------------------------------------------------------------

    def value_of(self, name: str) -> str | None:
        if name == "HOME":
            return self.home
        if name == "HERMES_HOME":
            return self.hermes_home
        if name in ("USER", "LOGNAME"):
            return self.user
        if name == "PWD":
            return self.cwd
        return None if self.ifs_changed else self.variables.get(name)

    def expand(self, word: Word) -> Word:
        """``word`` with the variables and ``$(echo ...)`` whose values are known put in."""
        if not word.dynamic:
            return word

        def variable(found: re.Match[str]) -> str:
            value = self.value_of(found.group("braced") or found.group("plain"))
            if value is None:
                default = found.group("default")
                return default if default is not None else found.group(0)
            return value

        text = _ECHOED.sub(lambda m: m.group("value") or m.group("value2"), word.text)
        text = _VARIABLE.sub(variable, text)
        return Word(text, word.subs, "$" in text or "`" in text, word.quoted, word.raw, word.escaped)

    def expand_all(self, words: list[Word]) -> list[Word]:
        out: list[Word] = []
        for word in words:
            expanded = self.expand(word)
            if word.dynamic and not expanded.dynamic and _WHOLE_VARIABLE.fullmatch(word.raw) and len(expanded.text.split()) > 1:
                out += [Word(part, raw=part) for part in expanded.text.split()]  # unquoted: the shell splits it
            else:
                out.append(expanded)
        return out

    def resolve(self, word: Word) -> list[str] | None:
        """The absolute paths a word names, or None when that cannot be known."""
        text = self.expand(word).text
        if "$" in text or "`" in text:
            return None
        if text == "~" or text.startswith("~/"):
            text = self.home + text[1:]
        elif text.startswith("~"):
            user, _, rest = text[1:].partition("/")
            home = self.home if user == self.user else "/root" if user == "root" else f"/home/{user}"
            text = f"{home}/{rest}"
        out = []
        for path in _brace_expand(text):
            if not path.startswith("/"):
                if self.cwd is None or not path:
                    return None
                path = f"{self.cwd}/{path}"
            out.append(normpath(path))
        return out

    def show(self, path: str) -> str:
        """A path as a person reads it (``~/.bashrc``)."""
        return "~" + path[len(self.home) :] if path == self.home or path.startswith(self.home + "/") else path

    def writes(self, words: list[Word], verb: str, *, disk_key: str = "disk-write", content: bool = True) -> None:
        """``words`` name files the command writes, creates or removes.

        ``content=False`` (chmod, touch, mkdir): only metadata or an empty file; what the
        file is (a key, a start-up file) does not matter then, where it is still does.
        """
        for word in words:
            paths = self.resolve(word)
            for path in paths if paths is not None else [normpath(word.text)]:
                if is_raw_disk(path):
                    self.block(disk_key, f"writes straight to the disk device {path} ({verb})")
                elif is_etc(path):
                    self.warn("write-etc", f"changes system configuration under /etc ({verb} {path})")
                elif top_of(path) in WRITE_SYSTEM_TOPS:
                    self.warn("write-system", f"changes system files ({verb} {path})")
                found = sensitive_file(path, self.home, self.hermes_home) if content else None
                if found is not None:
                    self.warn(found[0], f"{found[1]} ({verb} {self.show(path)})")

    def _file_key(self, word: Word) -> str | None:
        paths = self.resolve(word)
        if paths is not None:
            return paths[0] if len(paths) == 1 else None
        return None if word.dynamic else normpath(word.text)

    def created_file(self, word: Word, how: str = "written") -> None:
        """The command writes (``written``) or downloads (``downloaded``) the file ``word`` names."""
        key = self._file_key(word)
        if key is not None and not key.startswith("/dev/") and (how == "downloaded" or key not in self.created):
            self.created[key] = how

    def runs_file(self, word: Word, how: str) -> None:
        """``word`` is a script or program the command runs: was it written or fetched on the way?"""
        key = self._file_key(word)
        made = self.created.get(key) if key is not None else None
        if made == "downloaded":
            self.warn("pipe-to-shell", f"runs a script it has just downloaded ({how} {word.text})")
        elif made == "written":
            self.warn("write-then-run", f"runs a file written or made executable in the same command, unseen ({how} {word.text})")

    # -- walking --------------------------------------------------------------------------------

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
        self.subshell(script, depth)

    def script(self, script: Script, depth: int) -> None:
        for pipeline in script:
            upstream = Upstream()  # the commands before this one, grown as the walk goes (rules only read it)
            for command in pipeline:
                self.command(command, upstream, depth)
                upstream.add(command.group or [command])

    def subshell(self, script: Script, depth: int) -> None:
        saved = self.cwd
        try:
            self.script(script, depth)
        finally:
            self.cwd = saved

    def command(self, command: Command, upstream: Upstream, depth: int) -> None:
        for word in command.words:
            for sub in word.subs:
                self.subshell(sub, depth)
        sockets: list[Word] = []
        for redirect in command.redirects:
            for sub in redirect.target.subs:
                self.subshell(sub, depth)
            target = self.expand(redirect.target)
            if _SOCKET_PATH.match(target.text):
                sockets.append(target)  # a connection, not a file
            elif redirect.op in OUTPUT_OPS and not (redirect.op == ">&" and (target.text.isdigit() or target.text == "-")):
                self.writes([target], f"redirect {redirect.op}")
                self.created_file(target)
        if sockets and self.sockets is not None:
            self.sockets(self, command, sockets)
        for sub in command.subs:
            self.subshell(sub, depth)
        if command.words:
            self.segments.append(" ".join(w.text for w in command.words))
            self.argv(command.words, command, upstream, depth)

    def argv(self, words: list[Word], command: Command, upstream: Upstream, depth: int) -> None:
        """Judge one command line: skip assignments, reserved words and prefixes, then apply its rule."""
        words = self.expand_all(words)
        if words and not words[0].quoted and re.fullmatch(r"\{[^{}\s]*,[^{}\s]*\}", words[0].raw):
            words = [Word(part, raw=part) for part in words[0].text[1:-1].split(",")] + words[1:]  # {rm,-rf,/}
        assignments: list[Word] = []
        index = 0
        while index < len(words):
            word = words[index]
            if ASSIGNMENT.match(word.text):
                assignments.append(word)
                index += 1
                continue
            name = command_name(word)
            if name in RESERVED:
                index += 1
                continue
            prefix = self.prefixes.get(name)
            if prefix is None:
                break
            following = prefix(Ctx(self, name, words[index + 1 :], command, upstream, depth, word), words, index)
            if following is None:
                return
            index = following
        if index >= len(words):
            self.assign(assignments)
            return
        if index:
            self.segments.append(" ".join(w.text for w in words[index:]))
        head = words[index]
        self._look_at(head, words[index + 1 :])
        name = command_name(head)
        rule = self.rules.get(name)
        if rule is None and name.startswith("mkfs"):
            rule = self.rules.get("mkfs")
        if rule is None and re.fullmatch(r"python[0-9.]*|pypy[0-9.]*", name):
            rule = self.rules.get("python")
        if rule is not None:
            rule(Ctx(self, name, words[index + 1 :], command, upstream, depth, head))

    def assign(self, assignments: list[Word]) -> None:
        """A command of assignments only: the variables keep their values for what follows."""
        for word in assignments:
            name, _, value = word.text.partition("=")
            name = name.rstrip("+")
            if name == "IFS":
                self.ifs_changed = True
            elif word.dynamic or "[" in name:
                self.variables.pop(name, None)
            else:
                self.variables[name] = value

    def _look_at(self, head: Word, args: list[Word]) -> None:
        """What the command's name and options show before any rule: tricks, and files run."""
        text = head.text
        if head.dynamic and not _DYNAMIC_NAME.match(text.strip()) and "dynamic-shell" not in self.dangerous:
            self.warn("dynamic-command", f"runs a command whose name is only known when it runs ({display_command(head.raw or text)})")
        elif head.escaped:
            self.warn("obfuscated", f"the command name is spelled in escapes ({display_command(head.raw)})")
        elif not text.isascii():
            self.warn("obfuscated", f"the command name has look-alike Unicode letters ({display_command(text)})")
        elif head.raw and head.raw != text and _PLAIN_NAME.fullmatch(text) and head.raw not in ("\\" + text, f"'{text}'", f'"{text}"'):
            self.warn("obfuscated", f"the command name is broken up by quotes or backslashes ({head.raw})")
        if any(word.text[:1] in _UNICODE_DASHES for word in args):
            self.warn("obfuscated", "an option starts with a Unicode dash that only looks like '-'")
        if "/" in text and not head.dynamic:
            self.runs_file(head, "runs")


def head_name(command: Command) -> str:
    """The program a command runs, past assignments and the common prefixes (cheap, no findings)."""
    skipping = {"sudo", "doas", "env", "command", "nohup", "exec", "time", "nice", "builtin", "busybox", "stdbuf"}
    after_prefix = False
    for word in command.words:
        if ASSIGNMENT.match(word.text):
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
