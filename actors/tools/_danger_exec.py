"""Rules for commands that run other code: shells, interpreters, ``eval``, ``source``, ``su``, ``ssh``, downloads.

A shell's script (``bash -c '...'``, a heredoc, text piped in by ``echo``) is read and
judged like the outer command, one level deeper. What cannot be read is itself the
finding: a downloaded or base64-decoded script (``pipe-to-shell``), a string built at run
time or a shell inside a shell (``dynamic-shell``), code for an interpreter fed on stdin
(``heredoc-script``). Inline code (``python -c``, ``perl -e``) is read for what it hands a shell
(``os.system``, ``subprocess.run``, backticks) and for tree deletes (``shutil.rmtree``,
``fs.rmSync``), judged as the commands they amount to. Downloads are remembered, so that ``curl -o x.sh ... && sh x.sh``
is seen as running what was fetched.
"""

from __future__ import annotations

import posixpath
import re

from ._danger_network import code_opens_shell
from ._danger_paths import sensitive_file
from ._danger_scan import Analysis, Ctx, Rule, abbreviates, head_name, long_options, mentions, positionals
from ._danger_shell import Command, Word

DOWNLOADERS = frozenset({"curl", "wget", "fetch", "http", "https", "xh", "aria2c", "lwp-request", "iwr", "irm"})
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish", "yash", "rbash", "csh", "tcsh", "oksh"})
INTERPRETERS = frozenset({"python", "perl", "ruby", "node", "nodejs", "php", "lua", "bun", "deno"})
"""``python`` stands for every ``python3.x`` / ``pypy`` too (see ``Analysis.argv``)."""
_INLINE = {
    "python": ("-c",),
    "perl": ("-e", "-E"),
    "ruby": ("-e",),
    "node": ("-e", "-p", "--eval", "--print"),
    "nodejs": ("-e", "-p", "--eval", "--print"),
    "php": ("-r",),
    "lua": ("-e",),
    "bun": ("-e", "-p", "--eval", "--print"),
    "deno": ("eval",),
}
"""Per interpreter: the options whose value is the program itself."""
_STDIN_FILES = frozenset({"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "-"})
_PATH_LITERAL = re.compile(r"""['"]((?:~|/|\$HOME|\$\{HOME\}|\.env)[^'"]*)['"]""")
_WRITE_HINT = re.compile(
    r"""\b(?:write\w*|append\w*|dump|unlink|remove|rmtree|rename|replace|truncate|copy\w*|move|symlink|rmSync|rm)\b"""
    r"""|['"](?:w|a|x|wb|ab|w\+|a\+|r\+)['"]|>>?"""
)


def _decodes(command: Command) -> bool:
    name = head_name(command)
    texts = [w.text for w in command.words]
    if name in ("base64", "base32", "basenc"):
        return any(t in ("-d", "--decode", "-D") for t in texts)
    if name == "xxd":
        return any(t.startswith("-r") for t in texts)
    return name == "openssl" and "-d" in texts


def runs_fetched(analysis: Analysis, word: Word, how: str) -> bool:
    """``word`` is a script the shell runs: judge downloads and decodings inside it (True if found)."""
    for sub in word.subs:
        if mentions(sub, DOWNLOADERS):
            analysis.warn("pipe-to-shell", f"runs a downloaded script ({how})")
            return True
        if any(_decodes(c) for pipeline in sub for c in pipeline):
            analysis.warn("pipe-to-shell", f"runs decoded, unreadable text as a script ({how})")
            return True
    return False


def _runs_string(ctx: Ctx, word: Word, how: str) -> None:
    """A shell runs ``word`` as its script (``bash -c WORD``, ``eval WORD``)."""
    if runs_fetched(ctx.analysis, word, how):
        return
    if word.dynamic or word.subs:
        ctx.analysis.warn("dynamic-shell", f"runs a command string only known when it runs ({how} {word.raw or word.text})")
    ctx.analysis.in_shell_string += 1
    try:
        ctx.analysis.text(word.text, ctx.depth + 1)
    finally:
        ctx.analysis.in_shell_string -= 1


def _fed_inline(ctx: Ctx) -> bool:
    """Whether stdin carries code written into the command: a heredoc, a here-string, ``echo ... |``."""
    if ctx.command.stdin_texts:
        return True
    feeder = ctx.upstream[-1] if ctx.upstream else None
    name = head_name(feeder) if feeder is not None else ""
    return feeder is not None and (name in ("echo", "printf") or (name == "cat" and bool(feeder.stdin_texts)))


def _stdin_script(ctx: Ctx, *, literal: bool) -> None:
    """This command runs its stdin as a program: judge what feeds it."""
    kind = ctx.name
    if ctx.upstream.any_named(DOWNLOADERS):
        ctx.analysis.warn("pipe-to-shell", f"runs a downloaded script (curl | {kind})")
        return
    if ctx.upstream.any_of(_decodes):
        ctx.analysis.warn("pipe-to-shell", f"runs decoded, unreadable text as a script (base64 -d | {kind})")
        return
    fed = [r.target for r in ctx.command.redirects if r.op == "<<<"] + [Word("", ctx.command.subs)]
    if any(runs_fetched(ctx.analysis, word, f"{kind} <<<") for word in fed):
        return
    heredoc = bool(ctx.command.stdin_texts) or any(head_name(c) == "cat" and c.stdin_texts for c in ctx.upstream[-1:])
    if heredoc or (not literal and _fed_inline(ctx)):
        ctx.analysis.warn("heredoc-script", f"runs a script fed on stdin ({kind} <<EOF); read it before approving")
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
        if ctx.analysis.in_shell_string:
            ctx.analysis.warn("dynamic-shell", f"nests a shell inside a shell ({ctx.name} -c inside another); hard to read")
        if rest:
            _runs_string(ctx, rest[0], f"{ctx.name} -c")
        return
    if rest and rest[0].text != "-" and not stdin_mode:
        if not runs_fetched(ctx.analysis, rest[0], f"{ctx.name} <(...)"):
            ctx.analysis.runs_file(rest[0], ctx.name)
        return
    _stdin_script(ctx, literal=True)


def _code_writes(ctx: Ctx, code: str) -> None:
    """Inline interpreter code that names a protected file and writes something: judged as a write to it."""
    if not _WRITE_HINT.search(code):
        return
    for found in _PATH_LITERAL.finditer(code):
        for path in ctx.analysis.resolve(Word(found.group(1), dynamic="$" in found.group(1))) or ():
            hit = sensitive_file(path, ctx.analysis.home, ctx.analysis.hermes_home)
            if hit is not None:
                ctx.analysis.warn(hit[0], f"{hit[1]} (code run by {ctx.name} writes {ctx.analysis.show(path)})")


_SHELL_CALL = re.compile(
    r"""\b(?:system|popen|popen[234]|getoutput|getstatusoutput|check_output|check_call|call|run|Popen|spawn\w*|exec\w*|shell_exec|passthru|proc_open)"""
    r"""\s*\(\s*(?:[rbuf]{0,2})(['"])(.+?)(?<!\\)\1"""
)
"""A call that hands a string to a shell (``os.system('...')``, ``execSync("...")``, ``system "..."`` in Perl needs parentheses here)."""
_LIST_CALL = re.compile(r"""\b(?:check_output|check_call|call|run|Popen|spawn\w*|exec\w*)\s*\(\s*\[([^\]]*)\]""")
"""A call that runs an argv list (``subprocess.run(["rm", "-rf", "/"])``)."""
_BACKTICKS = re.compile(r"""`([^`]+)`|\bqx\s*[({\[/](.+?)[)}\]/]|%x[({\[](.+?)[)}\]]""")
"""Perl, Ruby and PHP run backticks (and ``qx``, ``%x``) as shell commands."""
_TREE_DELETE = re.compile(
    r"""\b(?:rmtree|rm_rf|rm_r|remove_dir_all|rmSync|rmdirSync|remove_entry(?:_secure)?|removedirs|rmdir)\s*\(\s*"""
    r"""(?:(?:os\.path\.)?expanduser\(\s*|(?:pathlib\.)?Path\(\s*)?(?:[rbuf]{0,2})(['"])([^'"]+)\1"""
)
"""A tree delete of a literal path, also through ``os.path.expanduser('~/x')`` or ``Path('/x')``."""
_HOME_TREE_DELETE = re.compile(r"""\b(?:rmtree|rm_rf|rm_r|remove_dir_all|rmSync)\s*\(\s*(?:(?:pathlib\.)?Path\.home\(\)|(?:[\w'"().]*\.)?homedir\(\))\s*[,)]""")
"""``shutil.rmtree(Path.home())``, ``fs.rmSync(os.homedir(), ...)``: the home directory."""
_STRING = re.compile(r"""(['"])(.*?)(?<!\\)\1""")


def _code_runs(ctx: Ctx, code: str) -> None:
    """Inline code's shell strings judged as the commands they are; its tree deletes as ``rm -r`` of their path."""
    from ._danger_rules import recursive_delete  # the rules table imports this module

    shell = [found.group(2) for found in _SHELL_CALL.finditer(code)]
    shell += [" ".join(m.group(2) for m in _STRING.finditer(found.group(1))) for found in _LIST_CALL.finditer(code)]
    if ctx.name in ("perl", "ruby", "php"):
        shell += [next(g for g in found.groups() if g) for found in _BACKTICKS.finditer(code)]
    for text in shell:
        ctx.analysis.text(text, ctx.depth + 1)
    deleted = [Word(found.group(2), dynamic="$" in found.group(2)) for found in _TREE_DELETE.finditer(code)]
    deleted += [Word("~") for _ in _HOME_TREE_DELETE.finditer(code)]
    if deleted:
        recursive_delete(ctx.analysis, deleted, f"{ctx.name} code deleting")


def _inline_code(ctx: Ctx) -> tuple[str, Word | None, int] | None:
    """(option, code, index after it) when the code is on the command line (``python -c``, ``perl -e``).

    ``python -m`` gives no code; None means the program comes from a file or stdin.
    """
    args = ctx.args
    options = _INLINE.get(ctx.name, _INLINE["python"])
    for j, word in enumerate(args):
        text = word.text
        following = args[j + 1] if j + 1 < len(args) else None
        if text == "-m" and ctx.name == "python":
            return text, None, j + 2
        if text in options or (ctx.name in ("perl", "ruby") and re.fullmatch(r"-[A-Za-z]*[eE]", text)):  # perl -pie 'code'
            return text, following, j + 2
        glued = next((o for o in options if len(o) == 2 and text.startswith(o) and len(text) > 2), None)
        if glued is not None and not text.startswith("--"):
            return text, Word(text[2:], word.subs, word.dynamic), j + 1
    return None


def _interpreter(ctx: Ctx) -> None:
    args = ctx.args
    inline = _inline_code(ctx)
    if inline is not None:
        option, code, after = inline
        if code is not None:
            runs_fetched(ctx.analysis, code, f"{ctx.name} {option}")
            _code_writes(ctx, code.text)
            _code_runs(ctx, code.text)
            code_opens_shell(ctx.analysis, ctx.name, code.text)
            if ctx.name in ("perl", "ruby") and any(re.match(r"-[A-Za-z]*i", w.text) for w in args[:after] if not w.text.startswith("--")):
                ctx.analysis.writes(positionals(args[after:]), f"{ctx.name} -i")
        return
    plain = positionals(args, frozenset({"-W", "-X", "-I", "-M"}))
    if plain and plain[0].text != "-":
        if not runs_fetched(ctx.analysis, plain[0], f"{ctx.name} <(...)"):
            ctx.analysis.runs_file(plain[0], ctx.name)
        return
    _stdin_script(ctx, literal=False)


AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})
_AWK_STRING = r'"((?:[^"\\]|\\.)*)"'
_AWK_SHELL = re.compile(rf"\bsystem\s*\(\s*{_AWK_STRING}\s*\)|{_AWK_STRING}\s*\|\s*getline|\|&?\s*{_AWK_STRING}")
"""awk hands a string to ``sh -c`` in ``system("...")``, ``"cmd" | getline`` and ``print | "cmd"``."""
_AWK_WITH_ARG = frozenset({"-F", "-v", "-f", "--field-separator", "--assign", "--file", "-i", "--include", "-l", "--load", "-E", "--exec"})


def _awk(ctx: Ctx) -> None:
    """The program (the first operand, unless ``-f`` gives a file): its shell strings judged as commands."""
    if any(w.text in ("-f", "--file", "-E", "--exec") or w.text.startswith(("--file=", "--exec=")) for w in ctx.args):
        return
    plain = positionals(ctx.args, _AWK_WITH_ARG)
    if not plain:
        return
    program = plain[0]
    if program.dynamic:
        ctx.analysis.warn("dynamic-shell", f'runs a program built at run time ({ctx.name} "$...")')
        return
    for found in _AWK_SHELL.finditer(program.text):
        text = next(g for g in found.groups() if g is not None)
        ctx.analysis.text(text.replace('\\"', '"'), ctx.depth + 1)


def _eval(ctx: Ctx) -> None:
    if any(w.dynamic or w.subs for w in ctx.args):
        joined = Word(" ".join(w.text for w in ctx.args), [s for w in ctx.args for s in w.subs], True, raw=" ".join(w.raw for w in ctx.args))
        _runs_string(ctx, joined, "eval")
        return
    ctx.analysis.text(" ".join(w.text for w in ctx.args), ctx.depth + 1)


def _source(ctx: Ctx) -> None:
    if not ctx.args:
        return
    target = ctx.args[0]
    how = f"{ctx.name} {target.text}"
    if runs_fetched(ctx.analysis, target, how):
        return
    if target.text in _STDIN_FILES:
        feeds = [r.target for r in ctx.command.redirects if r.op == "<<<"]
        if ctx.upstream.any_named(DOWNLOADERS) or any(runs_fetched(ctx.analysis, w, how) for w in feeds):
            ctx.analysis.warn("pipe-to-shell", f"runs a downloaded script ({how})")
        else:
            ctx.analysis.warn("dynamic-shell", f"runs whatever arrives on stdin as shell code ({how})")
    elif target.subs:
        ctx.analysis.warn("dynamic-shell", f"runs the output of a command as shell code ({ctx.name} <(...))")
    else:
        ctx.analysis.runs_file(target, ctx.name)


def _su(ctx: Ctx) -> None:
    args = ctx.args
    for j, word in enumerate(args):
        text = word.text
        script: Word | None = None
        if text == "-c" or (text.startswith("--") and len(text) > 3 and "command".startswith(text[2:])):
            script = args[j + 1] if j + 1 < len(args) else Word("")
        elif text.startswith("--command="):
            script = Word(text.split("=", 1)[1], dynamic=word.dynamic, subs=word.subs)
        elif text.startswith("-c") and len(text) > 2:
            script = Word(text[2:], dynamic=word.dynamic, subs=word.subs)
        elif text == "--" and ctx.name == "runuser":
            ctx.analysis.argv(args[j + 1 :], ctx.command, ctx.upstream, ctx.depth)
            return
        if script is not None:
            ctx.analysis.warn("su-command", f"runs a command as another user ({ctx.name} -c)")
            _runs_string(ctx, script, f"{ctx.name} -c")
            return


def _alias(ctx: Ctx) -> None:
    """``alias x='rm -rf /'``: the value runs wherever the name is used (with ``expand_aliases``), so it is judged now."""
    for word in ctx.args:
        name, equals, value = word.text.partition("=")
        if equals and name and not name.startswith("-"):
            ctx.analysis.text(value, ctx.depth + 1)


def _ssh(ctx: Ctx) -> None:
    with_arg = frozenset({"-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O", "-o", "-p", "-Q", "-R", "-S", "-W", "-w", "-B"})
    plain = positionals(ctx.args, with_arg)
    if len(plain) >= 2:  # the remote command: judged like a local one
        ctx.analysis.text(" ".join(w.text for w in plain[1:]), ctx.depth + 1)


def _script(ctx: Ctx) -> None:
    """``script -c CMD``: the util-linux recorder runs CMD through a shell."""
    for j, word in enumerate(ctx.args):
        if word.text in ("-c", "--command") and j + 1 < len(ctx.args):
            _runs_string(ctx, ctx.args[j + 1], "script -c")


def _url_name(args: list[Word]) -> list[Word]:
    urls = [w for w in args if "://" in w.text]
    return [Word(posixpath.basename(w.text.split("?", 1)[0].rstrip("/")) or "index.html") for w in urls]


def _curl(ctx: Ctx) -> None:
    """``curl -o FILE`` / ``-O``: remember what was downloaded, in case it is run next."""
    args = ctx.args
    for j, word in enumerate(args):
        text = word.text
        following = args[j + 1] if j + 1 < len(args) else None
        if text.startswith("--output="):
            ctx.analysis.created_file(Word(text.split("=", 1)[1]), "downloaded")
        elif (text == "--output" or re.fullmatch(r"-[A-Za-z]*o", text)) and following is not None and following.text != "-":
            ctx.analysis.created_file(following, "downloaded")
        elif text == "--remote-name" or re.fullmatch(r"-[A-Za-z]*O[A-Za-z]*", text):
            for name in _url_name(args):
                ctx.analysis.created_file(name, "downloaded")


def _wget(ctx: Ctx) -> None:
    args = ctx.args
    for j, word in enumerate(args):
        text = word.text
        if text.startswith("--output-document="):
            ctx.analysis.created_file(Word(text.split("=", 1)[1]), "downloaded")
            return
        if text == "--output-document" or re.fullmatch(r"-[A-Za-z]*O", text):
            if j + 1 < len(args) and args[j + 1].text != "-":
                ctx.analysis.created_file(args[j + 1], "downloaded")
            return
        if re.fullmatch(r"-[A-Za-z]*O.+", text):
            return  # -O- or -Ofile glued: stdout or a named file
    if not abbreviates(long_options(args), "directory-prefix", 3):
        for name in _url_name(args):
            ctx.analysis.created_file(name, "downloaded")


EXEC_RULES: dict[str, Rule] = {
    **{name: _shell for name in SHELLS},
    **{name: _interpreter for name in INTERPRETERS},
    "eval": _eval,
    "source": _source,
    ".": _source,
    "su": _su,
    "runuser": _su,
    "ssh": _ssh,
    "alias": _alias,
    "script": _script,
    **{name: _awk for name in AWKS},
    "curl": _curl,
    "wget": _wget,
}
