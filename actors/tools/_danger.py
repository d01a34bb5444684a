"""Dangerous-command detection: a pure judgement of a shell command before it runs.

:func:`check_command` answers one of three verdicts:

- ``blocked``: the hardline. Deleting ``/``, a top-level system directory or the home
  directory recursively, signalling every process (``kill -1``), formatting or overwriting
  a disk device, a fork bomb, stopping the machine, or a user's deny glob. Nothing
  overrides it: not an approval, not ``yolo``.
- ``dangerous``: needs a person's approval. Each finding has a stable key
  (``rm-recursive``, ``write-hermes-home``, ``git-force-push``, ...) that ``session`` /
  ``always`` approvals remember, and a one-line reason.
- ``ok``: ordinary work (``rm file.txt``, ``git push``, ``cat /etc/hosts``, ``echo reboot``).

How a command is read: every simple command is judged, wherever it sits (pipelines,
``;``, ``&&``, ``||``, ``$(...)``, backticks, ``<(...)``, heredocs fed to a shell,
``bash -c '...'``, ``eval``, ``find -exec``, ``xargs``, ``ssh host '...'``), past
prefixes (``sudo``, ``env``, ``nohup``, ``exec``, ``timeout``, ``nice``, ...) and
assignments. The command is judged twice: as written (what bash runs) and normalised (what
it looks like: ANSI escapes stripped, NFKC, invisible characters removed, whitespace
collapsed), and the findings of both count, so neither a look-alike nor a character that
only bash notices hides anything. A command that splits words with ``$IFS``
(``rm${IFS}-rf${IFS}/``) is read a third time with the spaces bash would see.

What the checker cannot see is itself a finding: a command string built at run time
(``dynamic-shell``), a command name in a variable (``dynamic-command``), code fed to an
interpreter on stdin (``heredoc-script``), a file written or downloaded and then run
(``write-then-run``, ``pipe-to-shell``), hidden or look-alike characters (``obfuscated``).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
from collections.abc import Iterable
from typing import Literal

from ._danger_network import socket_redirects
from ._danger_rules import PREFIXES, RULES
from ._danger_scan import Analysis
from ._danger_text import display_command, hidden_character, ifs_spelling, normalize_command, strip_ansi

__all__ = ["MAX_COMMAND_CHARS", "Verdict", "check_command", "display_command", "normalize_command", "strip_ansi"]

MAX_COMMAND_CHARS = 100_000
"""Longer commands are not read; they need approval as unreviewable."""

Status = Literal["ok", "dangerous", "blocked"]

_FUNCTION = re.compile(
    r"(?:\bfunction\s+)?(?<![^\s(){}|&;<>'\"])(?P<name>[^\s(){}|&;<>'\"]+)\s*\(\s*\)\s*\{(?P<body>[^}]*)\}"
    r"|\bfunction\s+(?P<name2>[^\s(){}|&;<>'\"]+)\s*\{(?P<body2>[^}]*)\}"
)
"""A shell function definition. A name starts only after a delimiter (the look-behind): tried at
every character of a long word, the search was quadratic (a 4,000-character word took 230 ms)."""
_OTHER_BOMBS = re.compile(r"\bfork\s+while\s+fork\b|\bwhile\s*\(?\s*(?:1|true|True)\s*\)?\s*[:{]?\s*(?:os\.)?fork\s*\(\s*\)", re.IGNORECASE)


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    """What :func:`check_command` found."""

    status: Status
    reasons: tuple[str, ...] = ()
    """Why, one short phrase per finding (for ``blocked``: why it is blocked)."""
    keys: tuple[str, ...] = ()
    """Stable pattern keys, in the order found."""
    normalized: str = ""
    """The command as judged (normalised)."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def dangerous(self) -> bool:
        return self.status == "dangerous"

    @property
    def blocked(self) -> bool:
        return self.status == "blocked"


def _fork_bombs(analysis: Analysis, text: str) -> None:
    for found in _FUNCTION.finditer(text):
        name = re.escape(found.group("name") or found.group("name2"))
        body = found.group("body") if found.group("body") is not None else found.group("body2")
        piped = re.search(rf"(?:^|[\s;&|]){name}\s*\|\s*{name}(?=$|[\s;&|])", body)
        backgrounded = re.search(rf"(?:^|[\s;&|]){name}\s*&(?!&)", body)
        if piped or backgrounded:
            analysis.block("fork-bomb", "a fork bomb: a function that keeps spawning copies of itself")
    if _OTHER_BOMBS.search(text):
        analysis.block("fork-bomb", "a fork bomb: a loop that forks forever")


def _hidden(analysis: Analysis, command: str) -> None:
    char = hidden_character(command)
    if char is not None:
        shown = display_command(char)
        analysis.warn("obfuscated", f"contains a control or invisible character ({shown}) that changes how the command looks")


def check_command(
    command: str,
    *,
    deny_globs: Iterable[str] = (),
    cwd: str | os.PathLike[str] | None = None,
    home: str | None = None,
    hermes_home: str | os.PathLike[str] | None = None,
) -> Verdict:
    """Judge a shell command before it runs.

    Args:
        command: the command as the model wrote it.
        deny_globs: the user's own blocklist; a glob (``fnmatch``) that matches the
            normalised command, or any one simple command inside it, blocks it.
        cwd: where the command starts, to resolve relative paths (``rm -rf *`` in ``/``);
            None leaves relative paths unknown.
        home: the home directory ``~`` and ``$HOME`` mean (default: this process's).
        hermes_home: the agent's own directory (config, keys, approvals); any write under it
            needs approval. None: ``$HERMES_HOME``, else ``~/.hermes`` of ``home``.
    """
    normalized = normalize_command(command)
    start = os.fspath(cwd) if cwd is not None else None
    user_home = home or os.path.expanduser("~")
    if hermes_home is None:
        hermes_home = os.environ.get("HERMES_HOME") or os.path.join(user_home, ".hermes")
    agent_home = os.path.expanduser(os.fspath(hermes_home))
    analysis = Analysis(home=user_home, hermes_home=agent_home, cwd=start, rules=RULES, prefixes=PREFIXES, sockets=socket_redirects)
    if len(command) > MAX_COMMAND_CHARS:
        analysis.warn("unreviewable", f"the command is too long to check ({len(command):,} characters)")
    else:
        _hidden(analysis, command)
        split = ifs_spelling(command)
        if split is not None:
            analysis.warn("ifs-trick", "splits words with $IFS, a way to hide what runs (rm${IFS}-rf)")
        for text in dict.fromkeys((command, normalized, *((split,) if split is not None else ()))):
            analysis.restart(start)
            analysis.text(text, 0)
            _fork_bombs(analysis, text)
    subjects = (normalized, *analysis.segments)
    matched = [g for g in deny_globs if g and any(fnmatch.fnmatchcase(s, g) for s in subjects)]
    if matched:
        analysis.block("deny-glob", "matches your deny list: " + ", ".join(repr(g) for g in matched))
    if analysis.blocked:
        return Verdict("blocked", tuple(analysis.blocked.values()), tuple(analysis.blocked), normalized)
    if analysis.dangerous:
        return Verdict("dangerous", tuple(analysis.dangerous.values()), tuple(analysis.dangerous), normalized)
    return Verdict("ok", normalized=normalized)
