"""Rules for commands that run other code: shells, interpreters, ``eval``, ``su``, ``ssh``, SQL clients.

A shell's script (``bash -c '...'``, a heredoc, text piped in by ``echo``) is read and
judged like the outer command, one level deeper. What cannot be read (a downloaded script,
base64-decoded text) is itself the finding: ``pipe-to-shell``. SQL clients are judged by
their statements (``DROP``, ``TRUNCATE``, ``DELETE`` without ``WHERE``).
"""

from __future__ import annotations

import re

from ._danger_scan import Analysis, Ctx, Rule, head_name, mentions, positionals
from ._danger_shell import Command, Word

DOWNLOADERS = frozenset({"curl", "wget", "fetch", "http", "https", "xh", "aria2c", "lwp-request"})
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish", "yash", "rbash", "csh", "tcsh", "oksh"})
INTERPRETERS = frozenset({"python", "perl", "ruby", "node", "nodejs", "php", "lua", "bun", "deno"})
"""``python`` stands for every ``python3.x`` / ``pypy`` too (see ``Analysis.argv``)."""
SQL_CLIENTS = frozenset(
    {"psql", "mysql", "mariadb", "sqlite3", "sqlite", "duckdb", "clickhouse-client", "pgcli", "mycli", "litecli", "usql", "sqlcmd"}
)


def _decodes(command: Command) -> bool:
    name = head_name(command)
    texts = [w.text for w in command.words]
    if name in ("base64", "base32", "basenc"):
        return any(t in ("-d", "--decode", "-D") for t in texts)
    if name == "xxd":
        return any(t.startswith("-r") for t in texts)
    return name == "openssl" and "-d" in texts


def _runs_fetched(analysis: Analysis, word: Word, how: str) -> None:
    """``word`` is a script the shell runs: judge downloads and decodings inside it."""
    for sub in word.subs:
        if mentions(sub, DOWNLOADERS):
            analysis.warn("pipe-to-shell", f"runs a downloaded script ({how})")
        elif any(_decodes(c) for pipeline in sub for c in pipeline):
            analysis.warn("pipe-to-shell", f"runs decoded, unreadable text as a script ({how})")


def _stdin_script(ctx: Ctx, *, literal: bool) -> None:
    """This command runs its stdin as a program: judge what feeds it."""
    kind = ctx.name
    if any(head_name(c) in DOWNLOADERS for c in ctx.upstream):
        ctx.analysis.warn("pipe-to-shell", f"runs a downloaded script (curl | {kind})")
    elif any(_decodes(c) for c in ctx.upstream):
        ctx.analysis.warn("pipe-to-shell", f"runs decoded, unreadable text as a script (base64 -d | {kind})")
    if not literal:
        return
    for text in ctx.command.stdin_texts:
        ctx.analysis.text(text, ctx.depth + 1)
    if ctx.upstream:
        feeder = ctx.upstream[-1]
        name = head_name(feeder)
        if name in ("echo", "printf"):
            texts = [w.text for w in feeder.words[1:] if not w.text.startswith("-")]
            for text in {" ".join(texts), *texts}:
                ctx.analysis.text(text, ctx.depth + 1)
        if name in ("cat", "echo", "printf"):
            for text in feeder.stdin_texts:
                ctx.analysis.text(text, ctx.depth + 1)


def _shell(ctx: Ctx) -> None:
    args = ctx.args
    command_mode = stdin_mode = False
    j = 0
    while j < len(args):
        text = args[j].text
        if text == "--":
            j += 1
            break
        if text.startswith(("-", "+")) and len(text) > 1 and not text.startswith("--"):
            command_mode = command_mode or (text[0] == "-" and "c" in text[1:])
            stdin_mode = stdin_mode or (text[0] == "-" and "s" in text[1:])
            j += 2 if ("o" in text[1:] or "O" in text[1:]) else 1
        elif text.startswith("--"):
            j += 2 if text in ("--rcfile", "--init-file") else 1
        else:
            break
    rest = args[j:]
    if command_mode:
        if rest:
            _runs_fetched(ctx.analysis, rest[0], f"{ctx.name} -c")
            ctx.analysis.text(rest[0].text, ctx.depth + 1)
        return
    if rest and rest[0].text != "-" and not stdin_mode:
        _runs_fetched(ctx.analysis, rest[0], f"{ctx.name} <(...)")
        return
    _stdin_script(ctx, literal=True)


def _interpreter(ctx: Ctx) -> None:
    inline = frozenset({"-c", "-e", "-m", "-E", "-r", "-p", "-n", "--eval", "--print", "-x"})
    if any(w.text in inline or w.text[:2] in ("-c", "-e", "-m") for w in ctx.args if w.text.startswith("-")):
        return
    plain = positionals(ctx.args, frozenset({"-W", "-X", "-I", "-M"}))
    if plain and plain[0].text != "-":
        _runs_fetched(ctx.analysis, plain[0], f"{ctx.name} <(...)")
        return
    _stdin_script(ctx, literal=False)


def _eval(ctx: Ctx) -> None:
    for word in ctx.args:
        _runs_fetched(ctx.analysis, word, "eval")
    ctx.analysis.text(" ".join(w.text for w in ctx.args), ctx.depth + 1)


def _source(ctx: Ctx) -> None:
    if ctx.args:
        _runs_fetched(ctx.analysis, ctx.args[0], f"{ctx.name} <(...)")


def _su(ctx: Ctx) -> None:
    args = ctx.args
    for j, word in enumerate(args):
        if word.text in ("-c", "--command") and j + 1 < len(args):
            _runs_fetched(ctx.analysis, args[j + 1], f"{ctx.name} -c")
            ctx.analysis.text(args[j + 1].text, ctx.depth + 1)
            return
        if word.text.startswith("--command="):
            ctx.analysis.text(word.text.split("=", 1)[1], ctx.depth + 1)
            return
        if word.text == "--" and ctx.name == "runuser":
            ctx.analysis.argv(args[j + 1 :], ctx.command, ctx.upstream, ctx.depth)
            return


def _ssh(ctx: Ctx) -> None:
    with_arg = frozenset({"-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O", "-o", "-p", "-Q", "-R",
                          "-S", "-W", "-w", "-B"})
    plain = positionals(ctx.args, with_arg)
    if len(plain) >= 2:  # the remote command: judged like a local one
        ctx.analysis.text(" ".join(w.text for w in plain[1:]), ctx.depth + 1)


_DROP = re.compile(r"\bdrop\s+(?:table|database|schema)\b", re.IGNORECASE)
_TRUNCATE = re.compile(r"\btruncate\s+(?:table\s+)?[\w\"`\[]", re.IGNORECASE)
_DELETE = re.compile(r"\bdelete\s+from\s+\S+", re.IGNORECASE)
_WHERE = re.compile(r"\bwhere\b", re.IGNORECASE)


def sql_findings(analysis: Analysis, text: str) -> None:
    for statement in text.split(";"):
        if _DROP.search(statement):
            analysis.warn("sql-drop", "drops a table or database (DROP TABLE)")
        if _TRUNCATE.search(statement):
            analysis.warn("sql-truncate", "empties a table (TRUNCATE)")
        delete = _DELETE.search(statement)
        if delete and not _WHERE.search(statement, delete.end()):
            analysis.warn("sql-delete-all", "deletes every row: DELETE without WHERE")


def _sql_client(ctx: Ctx) -> None:
    texts = [w.text for w in ctx.args] + ctx.command.stdin_texts
    if ctx.upstream and head_name(ctx.upstream[-1]) in ("echo", "printf", "cat"):
        feeder = ctx.upstream[-1]
        texts += [w.text for w in feeder.words[1:]] + feeder.stdin_texts
    for text in texts:
        sql_findings(ctx.analysis, text)


def _redis(ctx: Ctx) -> None:
    if any(w.text.lower() in ("flushall", "flushdb") for w in ctx.args):
        ctx.analysis.warn("redis-flush", "deletes every key (redis-cli FLUSHALL)")


EXEC_RULES: dict[str, Rule] = {
    **{name: _shell for name in SHELLS},
    **{name: _interpreter for name in INTERPRETERS},
    "eval": _eval,
    "source": _source,
    ".": _source,
    "su": _su,
    "runuser": _su,
    "ssh": _ssh,
    **{name: _sql_client for name in SQL_CLIENTS},
    "redis-cli": _redis,
}
