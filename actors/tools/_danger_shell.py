"""Read a shell command the way bash would, closely enough to judge it.

:func:`parse_script` is a tolerant tokenizer: quotes, escapes, ``$'...'``, ``$(...)``,
backticks, ``<(...)``, redirections, heredocs, comments, and the operators
``; & && || | |&`` and newlines. It never fails: unterminated quotes run to the end, stray
parentheses separate commands. It is not bash; the detector in ``_danger`` errs towards
finding more commands (a function body, both branches of an ``if``), never fewer.
"""

from __future__ import annotations

import dataclasses
import re

MAX_NESTING = 40
"""Substitutions nested deeper than this are not read; the command is reported as unreviewable."""

# -- the parse tree -------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class Word:
    """One shell word, quotes removed and escapes applied."""

    text: str
    subs: list[Script] = dataclasses.field(default_factory=list)
    """Command and process substitutions inside the word: they run too."""
    dynamic: bool = False
    """The value depends on an expansion (``$x``, ``$(...)``): ``text`` shows it as written."""
    quoted: bool = False
    raw: str = ""
    """The word as written, quotes and escapes included (to tell ``r''m`` from ``rm``)."""
    escaped: bool = False
    """Some character was spelled as a ``$'\\x72'``-style escape."""


@dataclasses.dataclass(slots=True)
class Redirect:
    op: str
    """``>``, ``>>``, ``>|``, ``&>``, ``&>>``, ``<>``, ``<``, ``<<``, ``<<<``, ``>&``, ``<&``."""
    target: Word


@dataclasses.dataclass(slots=True)
class Command:
    """A simple command: words, redirections, and the text it reads on stdin if known."""

    words: list[Word] = dataclasses.field(default_factory=list)
    redirects: list[Redirect] = dataclasses.field(default_factory=list)
    stdin_texts: list[str] = dataclasses.field(default_factory=list)
    """Heredoc bodies and here-strings."""
    subs: list[Script] = dataclasses.field(default_factory=list)
    """Substitutions in heredoc bodies (unquoted delimiters expand them)."""
    group: list[Command] = dataclasses.field(default_factory=list)
    """For the end of a ``( ... )`` or ``{ ...; }`` group piped on: the group's commands (their output is what flows)."""

    def empty(self) -> bool:
        return not self.words and not self.redirects


Pipeline = list[Command]
Script = list[Pipeline]

OUTPUT_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})


class TooDeep(Exception):
    """Substitutions nested past :data:`MAX_NESTING`."""


# -- the parser ------------------------------------------------------------------------------------

_BREAK = frozenset(" \t\n;&|()<>")
_PLAIN = re.compile(r"[^ \t\n;&|()<>\\'\"$`]+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]")
_C_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


@dataclasses.dataclass(slots=True)
class _Heredoc:
    command: Command
    delimiter: str
    strip_tabs: bool
    expand: bool


class _Parser:
    def __init__(self, text: str, depth: int = 0) -> None:
        self.s = text
        self.i = 0
        self.n = len(text)
        self.depth = depth
        self.pending: list[_Heredoc] = []

    def peek(self, offset: int = 0) -> str:
        j = self.i + offset
        return self.s[j] if j < self.n else ""

    # -- scripts ------------------------------------------------------------------------------------

    def script(self, closer: str | None = None) -> Script:
        if self.depth > MAX_NESTING:
            raise TooDeep
        script: Script = []
        pipeline: Pipeline = []
        command = Command()
        parens = 0
        groups: list[int] = []
        """Where each open ``(`` / ``{`` group starts in ``script``."""
        just_closed: list[Command] | None = None

        def end_command() -> None:
            nonlocal command
            if not command.empty():
                pipeline.append(command)
            command = Command()

        def end_pipeline() -> None:
            nonlocal pipeline
            end_command()
            if pipeline:
                script.append(pipeline)
            pipeline = []

        def group_since(start: int) -> list[Command]:
            return [c for line in script[start:] for c in line]

        while self.i < self.n:
            c = self.s[self.i]
            if c in " \t":
                self.i += 1
                continue
            closed, just_closed = just_closed, None
            if c == "\\" and self.peek(1) == "\n":  # a line continuation between words
                self.i += 2
            elif c == "\n":
                self.i += 1
                end_pipeline()
                self.read_heredocs()
            elif c == "#":
                while self.i < self.n and self.s[self.i] != "\n":
                    self.i += 1
            elif c == ")":
                self.i += 1
                end_pipeline()
                if parens:
                    parens -= 1
                    just_closed = group_since(groups.pop() if groups else len(script))
                elif closer == ")":
                    return script
            elif c == "(":
                self.i += 1
                parens += 1
                end_pipeline()
                groups.append(len(script))
            elif c == "|":
                self.i += 1
                if self.peek() == "|":
                    self.i += 1
                    end_pipeline()
                else:
                    if self.peek() == "&":
                        self.i += 1
                    if closed is not None and not pipeline and command.empty():
                        pipeline.append(Command(group=closed))  # `( curl ... ) | bash`: the group feeds the pipe
                    end_command()
            elif c == ";":
                self.i += 1
                while self.peek() in (";", "&") and self.peek():
                    self.i += 1
                end_pipeline()
            elif c == "&" and self.peek(1) == "&":
                self.i += 2
                end_pipeline()
            elif c == "&" and self.peek(1) == ">":
                self.redirect(command, "")
            elif c == "&":
                self.i += 1
                end_pipeline()
            elif c in "<>" and self.peek(1) != "(":
                self.redirect(command, "")
            else:
                word = self.word()
                if word.text.isdigit() and not word.quoted and self.peek() in ("<", ">") and self.peek(1) != "(":
                    self.redirect(command, word.text)
                else:
                    if not command.words and not word.quoted and word.raw in ("{", "}"):
                        if word.raw == "{":
                            groups.append(len(script))
                        else:
                            command.group = group_since(groups.pop() if groups else len(script))
                    command.words.append(word)
        end_pipeline()
        return script

    def read_heredocs(self) -> None:
        pending, self.pending = self.pending, []
        for doc in pending:
            lines = []
            while self.i < self.n:
                end = self.s.find("\n", self.i)
                end = self.n if end < 0 else end
                line = self.s[self.i : end]
                self.i = min(end + 1, self.n)
                if (line.lstrip("\t") if doc.strip_tabs else line) == doc.delimiter:
                    break
                lines.append(line)
            body = "\n".join(lines)
            doc.command.stdin_texts.append(body)
            if doc.expand:
                doc.command.subs.extend(_Parser(body, self.depth + 1).expansions())

    def redirect(self, command: Command, fd: str) -> None:
        start = self.i
        if self.s.startswith("&>>", self.i) or self.s.startswith("<<<", self.i) or self.s.startswith("<<-", self.i):
            self.i += 3
        elif self.s[self.i : self.i + 2] in (">>", ">|", ">&", "&>", "<<", "<&", "<>"):
            self.i += 2
        else:
            self.i += 1
        op = self.s[start : self.i]
        while self.peek() in (" ", "\t") and self.peek():
            self.i += 1
        target = self.word() if self.i < self.n and self.s[self.i] not in _BREAK else Word("")
        if op in ("<<", "<<-"):
            self.pending.append(_Heredoc(command, target.text, op == "<<-", expand=not target.quoted))
            return
        if op == "<<<":
            command.stdin_texts.append(target.text)
        command.redirects.append(Redirect(op=op, target=target))

    # -- words --------------------------------------------------------------------------------------

    def word(self) -> Word:
        word = Word("")
        parts: list[str] = []
        begin = self.i
        if self.peek() in ("<", ">") and self.peek(1) == "(":
            start = self.i
            self.i += 2
            word.subs.append(self.nested(")"))
            word.dynamic = True
            parts.append(self.s[start : self.i])
        while self.i < self.n:
            c = self.s[self.i]
            if c in _BREAK:
                break
            plain = _PLAIN.match(self.s, self.i)
            if plain:
                parts.append(plain.group())
                self.i = plain.end()
            elif c == "\\":
                if self.peek(1) == "\n":
                    self.i += 2
                else:
                    parts.append(self.peek(1))
                    self.i += 2
            elif c == "'":
                end = self.s.find("'", self.i + 1)
                end = self.n if end < 0 else end
                parts.append(self.s[self.i + 1 : end])
                self.i = end + 1
                word.quoted = True
            elif c == '"':
                self.i += 1
                parts.append(self.dquoted(word, '"'))
                word.quoted = True
            elif c == "$" and self.peek(1) == "'":
                self.i += 2
                start = self.i
                parts.append(self.ansi_c())
                word.quoted = True
                word.escaped = word.escaped or "\\" in self.s[start : self.i]
            elif c == "$" and self.peek(1) == '"':
                self.i += 2
                parts.append(self.dquoted(word, '"'))
                word.quoted = True
            else:
                parts.append(self.expansion(word))
        word.text = "".join(parts)
        word.raw = self.s[begin : self.i]
        return word

    def dquoted(self, word: Word, end: str | None) -> str:
        """Read up to ``end`` (None: the end of the text) with double-quote rules."""
        parts: list[str] = []
        while self.i < self.n:
            c = self.s[self.i]
            if end is not None and c == end:
                self.i += 1
                break
            if c == "\\" and self.peek(1) in ("$", "`", '"', "\\", "\n") and self.peek(1):
                if self.peek(1) != "\n":
                    parts.append(self.peek(1))
                self.i += 2
            elif c in "$`":
                parts.append(self.expansion(word))
            else:
                parts.append(c)
                self.i += 1
        return "".join(parts)

    def expansion(self, word: Word) -> str:
        """At ``$`` or a backtick: read one expansion, keep its text as written."""
        start = self.i
        c = self.s[self.i]
        if c == "`":
            self.i += 1
            body = []
            while self.i < self.n and self.s[self.i] != "`":
                if self.s[self.i] == "\\" and self.peek(1) in ("`", "\\", "$"):
                    body.append(self.peek(1))
                    self.i += 2
                else:
                    body.append(self.s[self.i])
                    self.i += 1
            self.i += 1
            word.subs.append(_Parser("".join(body), self.depth + 1).script())
            word.dynamic = True
            return self.s[start : self.i]
        nxt = self.peek(1)
        if nxt == "(":
            self.i += 2
            word.subs.append(self.nested(")"))
            word.dynamic = True
            return self.s[start : self.i]
        if nxt == "{":
            self.i += 2
            depth = 1
            while self.i < self.n and depth:
                ch = self.s[self.i]
                if ch in "$`" and (ch == "`" or self.peek(1) in ("(", "{")):
                    self.expansion(word)
                    continue
                depth += {"{": 1, "}": -1}.get(ch, 0)
                self.i += 1
            word.dynamic = True
            return self.s[start : self.i]
        name = _NAME.match(self.s, self.i + 1)
        if name:
            self.i = name.end()
            word.dynamic = True
            return self.s[start : self.i]
        self.i += 1
        return "$"

    def nested(self, closer: str) -> Script:
        self.depth += 1
        try:
            return self.script(closer)
        finally:
            self.depth -= 1

    def expansions(self) -> list[Script]:
        """The substitutions in a text read with double-quote rules (an unquoted heredoc body)."""
        holder = Word("")
        self.dquoted(holder, None)
        return holder.subs

    def ansi_c(self) -> str:
        """Decode a ``$'...'`` string (the opening ``$'`` already read)."""
        out: list[str] = []
        while self.i < self.n and self.s[self.i] != "'":
            c = self.s[self.i]
            if c != "\\" or self.i + 1 >= self.n:
                out.append(c)
                self.i += 1
                continue
            e = self.s[self.i + 1]
            self.i += 2
            if e in _C_ESCAPES:
                out.append(_C_ESCAPES[e])
            elif e in "xuU":
                width = {"x": 2, "u": 4, "U": 8}[e]
                digits = re.match(rf"[0-9A-Fa-f]{{1,{width}}}", self.s[self.i : self.i + width])
                if digits:
                    self.i += len(digits.group())
                    out.append(chr(min(int(digits.group(), 16), 0x10FFFF)))
                else:
                    out.append("\\" + e)
            elif e in "01234567":
                digits = re.match(r"[0-7]{0,2}", self.s[self.i : self.i + 2])
                text = e + (digits.group() if digits else "")
                self.i += len(text) - 1
                out.append(chr(int(text, 8)))
            elif e == "c" and self.i < self.n:
                out.append(chr(ord(self.s[self.i]) & 0x1F))
                self.i += 1
            else:
                out.append(e)
        self.i += 1
        return "".join(out)


def parse_script(text: str, depth: int = 0) -> Script:
    """Split ``text`` into pipelines of simple commands.

    Raises:
        TooDeep: substitutions nested past :data:`MAX_NESTING`.
    """
    return _Parser(text, depth).script()


def walk_commands(script: Script) -> list[Command]:
    """Every simple command of ``script``, substitutions included, in reading order."""
    found: list[Command] = []
    for pipeline in script:
        for command in pipeline:
            found.append(command)
            for word in command.words:
                for sub in word.subs:
                    found += walk_commands(sub)
            for redirect in command.redirects:
                for sub in redirect.target.subs:
                    found += walk_commands(sub)
            for sub in command.subs:
                found += walk_commands(sub)
    return found
