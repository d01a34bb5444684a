"""Per-program rules: what makes ``rm``, ``git``, ``dd``, ``chmod``, ``kill`` or ``systemctl`` dangerous.

Each rule gets one unwrapped simple command (:class:`Ctx`) and records findings with
``block`` (the hardline: never runs) or ``warn`` (needs approval), under a stable key.
Prefixes (``sudo``, ``env``, ``nohup``, ``xargs``, ...) return where their command starts.
Commands that run other code (shells, interpreters, SQL clients) are in ``_danger_exec``.

Keys are part of the approval contract (``session`` / ``always`` approve keys, and
``approved_patterns.txt`` stores them): renaming one forgets what users approved.
"""

from __future__ import annotations

import os
import re

from ._danger_scan import Ctx, Prefix, Rule, command_name, is_device, is_root, is_system, long_options, positionals, short_flags
from ._danger_exec import EXEC_RULES
from ._danger_shell import Command, Word

DELETERS = frozenset({"rm", "shred", "unlink", "rmdir"})
_DISK_TOOLS = frozenset({"mke2fs", "mkswap", "wipefs", "mkdosfs", "mkntfs", "blkdiscard"})
_RUNTIME_NAMES = ("hermes",)
_RUNTIME_SAMPLE = "/usr/bin/python3 /usr/local/bin/hermes run"
"""What the runtime's command line looks like, to test ``pkill -f`` patterns against."""


# -- prefixes -----------------------------------------------------------------------------------------


def _skip_options(words: list[Word], index: int, with_arg: frozenset[str]) -> int:
    j = index + 1
    while j < len(words):
        text = words[j].text
        if text == "--":
            return j + 1
        if not text.startswith("-") or text == "-":
            return j
        j += 2 if text in with_arg else 1
    return j


def _prefix(with_arg: frozenset[str] = frozenset(), positional: int = 0) -> Prefix:
    def skip(ctx: Ctx, words: list[Word], index: int) -> int:
        return _skip_options(words, index, with_arg) + positional

    return skip


def _sudo(ctx: Ctx, words: list[Word], index: int) -> int | None:
    j = _skip_options(words, index, frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-T", "-U", "--user", "--group",
                                                "--host", "--prompt", "--close-from", "--chdir", "--role", "--type", "--other-user"}))
    options = words[index + 1 : j]
    if "S" in short_flags(options) or "stdin" in long_options(options):
        ctx.analysis.warn("sudo-stdin", "sudo reads a password from stdin (sudo -S)")
    if "e" in short_flags(options) or "edit" in long_options(options):
        return None
    return j


def _env(ctx: Ctx, words: list[Word], index: int) -> int | None:
    j = index + 1
    while j < len(words):
        text = words[j].text
        rest = " ".join(w.text for w in words[j + 1 :])
        if text in ("-S", "--split-string"):
            ctx.analysis.text(rest, ctx.depth + 1)
            return None
        if text.startswith("--split-string=") or (text.startswith("-S") and not text.startswith("--")):
            split = text.split("=", 1)[1] if text.startswith("--") else text[2:]
            ctx.analysis.text(f"{split} {rest}", ctx.depth + 1)
            return None
        if text == "--":
            return j + 1
        if not text.startswith("-") or text == "-":
            return j
        j += 2 if text in ("-u", "--unset", "-C", "--chdir") else 1
    return j


def _watch(ctx: Ctx, words: list[Word], index: int) -> int | None:
    j = _skip_options(words, index, frozenset({"-n", "--interval", "-q", "--equexit"}))
    ctx.analysis.text(" ".join(w.text for w in words[j:]), ctx.depth + 1)
    return None


def _xargs(ctx: Ctx, words: list[Word], index: int) -> int | None:
    j = _skip_options(words, index, frozenset({"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter",
                                                "--eof", "--replace", "--max-lines", "--max-args", "--max-procs", "--max-chars",
                                                "--process-slot-var"}))
    if j < len(words) and command_name(words[j]) in DELETERS:
        ctx.analysis.warn("find-delete", "deletes every path piped in (xargs rm)")
    return j


def _command(ctx: Ctx, words: list[Word], index: int) -> int | None:
    options = words[index + 1 : _skip_options(words, index, frozenset())]
    if any(flag in short_flags(options) for flag in "vV"):
        return None  # `command -v x` asks where x is; it runs nothing
    return index + 1 + len(options)


PREFIXES: dict[str, Prefix] = {
    "sudo": _sudo,
    "doas": _prefix(frozenset({"-u", "-C"})),
    "env": _env,
    "nohup": _prefix(),
    "exec": _prefix(frozenset({"-a"})),
    "nice": _prefix(frozenset({"-n", "--adjustment"})),
    "ionice": _prefix(frozenset({"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"})),
    "time": _prefix(frozenset({"-f", "-o", "--format", "--output"})),
    "timeout": _prefix(frozenset({"-s", "-k", "--signal", "--kill-after"}), positional=1),
    "stdbuf": _prefix(frozenset({"-i", "-o", "-e"})),
    "chrt": _prefix(positional=1),
    "taskset": _prefix(positional=1),
    "setsid": _prefix(),
    "unbuffer": _prefix(),
    "builtin": _prefix(),
    "busybox": _prefix(),
    "command": _command,
    "xargs": _xargs,
    "watch": _watch,
}


# -- deleting and writing ------------------------------------------------------------------------------


def _rm(ctx: Ctx) -> None:
    recursive = no_preserve = False
    targets: list[Word] = []
    ended = False
    for word in ctx.args:
        text = word.text
        if not ended and text == "--":
            ended = True
        elif not ended and text.startswith("--") and len(text) > 2:
            option = text[2:].split("=", 1)[0]
            recursive = recursive or "recursive".startswith(option)
            no_preserve = no_preserve or (option.startswith("no") and "no-preserve-root".startswith(option))
        elif not ended and text.startswith("-") and len(text) > 1:
            recursive = recursive or "r" in text or "R" in text
        else:
            targets.append(word)
    analysis = ctx.analysis
    if not recursive:
        analysis.writes(targets, "rm")
        return
    if no_preserve:
        analysis.block("rm-root", "deletes recursively with root protection turned off (rm --no-preserve-root)")
    paths = [p for word in targets for p in analysis.resolve(word) or ()]
    if any(is_root(p) for p in paths):
        analysis.block("rm-root", "deletes the whole filesystem (rm -r /)")
    system = [p for p in paths if is_system(p)]
    detail = f" of the system path {system[0]}" if system else (" of the home directory" if analysis.home in paths else "")
    analysis.warn("rm-recursive", f"recursive delete (rm -r){detail}")


def _find(ctx: Ctx) -> None:
    args = ctx.args
    j = 0
    while j < len(args):
        text = args[j].text
        if text == "-delete":
            ctx.analysis.warn("find-delete", "deletes every match (find -delete)")
        elif text in ("-exec", "-execdir", "-ok", "-okdir"):
            k = j + 1
            while k < len(args) and args[k].text not in (";", "+"):
                k += 1
            sub = args[j + 1 : k]
            if sub:
                if command_name(sub[0]) in DELETERS:
                    ctx.analysis.warn("find-delete", "deletes every match (find -exec rm)")
                ctx.analysis.argv(sub, Command(words=sub), [], ctx.depth)
            j = k
        j += 1


def _git(ctx: Ctx) -> None:
    args = ctx.args
    j = 0
    with_arg = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env"}
    while j < len(args) and args[j].text.startswith("-"):
        j += 2 if args[j].text in with_arg else 1
    if j >= len(args):
        return
    sub, rest = args[j].text, args[j + 1 :]
    texts = [w.text for w in rest]
    flags = short_flags(rest)
    longs = long_options(rest)
    if sub == "reset" and "hard" in longs:
        ctx.analysis.warn("git-reset-hard", "discards uncommitted changes (git reset --hard)")
    elif sub == "push":
        refspec_force = any(t.startswith("+") and len(t) > 1 for t in texts)
        if "f" in flags or "force" in longs or "force-with-lease" in longs or "mirror" in longs or refspec_force:
            ctx.analysis.warn("git-force-push", "rewrites history on the remote (git push --force)")
    elif sub == "clean" and ("f" in flags or "force" in longs) and "n" not in flags and "dry-run" not in longs:
        ctx.analysis.warn("git-clean", "deletes untracked files (git clean -f)")


def _world_writable(mode: str) -> bool:
    if re.fullmatch(r"[0-7]{1,5}", mode):
        return bool(int(mode[-1]) & 2)
    for clause in mode.split(","):
        found = re.match(r"([ugoa]*)(.*)", clause)
        if not found or not set(found.group(1)) & set("oa"):
            continue
        for op, perms in re.findall(r"([-+=])([rwxXstugo]*)", found.group(2)):
            if op in "+=" and "w" in perms:
                return True
    return False


def _chmod(ctx: Ctx) -> None:
    recursive = False
    mode: str | None = None
    targets: list[Word] = []
    for word in ctx.args:
        text = word.text
        if mode is None and (text == "--recursive" or re.fullmatch(r"-[cfvR]+", text)):
            recursive = recursive or "R" in text or text == "--recursive"
        elif mode is None and text.startswith("--"):
            mode = "" if text.startswith("--reference") else None
        elif mode is None:
            mode = text
        else:
            targets.append(word)
    how = " recursively" if recursive else ""
    if mode and _world_writable(mode):
        ctx.analysis.warn("chmod-777", f"makes files writable by everyone{how} (chmod {mode})")
    if recursive and any(is_system(p) for w in targets for p in ctx.analysis.resolve(w) or ()):
        ctx.analysis.warn("chmod-recursive-system", "changes permissions recursively under a system path (chmod -R)")
    ctx.analysis.writes(targets, "chmod")


def _chown(ctx: Ctx) -> None:
    recursive = "R" in short_flags(ctx.args) or "recursive" in long_options(ctx.args)
    plain = positionals(ctx.args)
    targets = plain if any(o.startswith("reference") for o in long_options(ctx.args)) else plain[1:]
    if recursive and any(is_system(p) for w in targets for p in ctx.analysis.resolve(w) or ()):
        ctx.analysis.warn("chown-recursive-system", f"changes ownership recursively under a system path ({ctx.name} -R)")
    ctx.analysis.writes(targets, ctx.name)


def _writes_all(with_arg: frozenset[str] = frozenset()) -> Rule:
    def rule(ctx: Ctx) -> None:
        ctx.analysis.writes(positionals(ctx.args, with_arg), ctx.name)

    return rule


def _writes_last(ctx: Ctx) -> None:
    """cp / ln / rsync: the destination (``-t DIR`` or the last argument) is written."""
    for j, word in enumerate(ctx.args):
        if word.text in ("-t", "--target-directory") and j + 1 < len(ctx.args):
            ctx.analysis.writes([ctx.args[j + 1]], ctx.name)
        elif word.text.startswith("--target-directory="):
            ctx.analysis.writes([Word(word.text.split("=", 1)[1])], ctx.name)
    plain = positionals(ctx.args, frozenset({"-t", "-S", "--suffix", "-e", "--rsh"}))
    if len(plain) >= 2:
        ctx.analysis.writes([plain[-1]], ctx.name)


def _sed(ctx: Ctx) -> None:
    if any(re.match(r"-[A-Za-z]*i", w.text) and not w.text.startswith("--") for w in ctx.args) or "in-place" in long_options(ctx.args):
        ctx.analysis.writes(positionals(ctx.args, frozenset({"-e", "-f", "-l", "--expression", "--file"})), "sed -i")


def _shred(ctx: Ctx) -> None:
    targets = positionals(ctx.args, frozenset({"-n", "-s", "--iterations", "--size", "--random-source"}))
    ctx.analysis.writes(targets, "shred")
    ctx.analysis.warn("shred", "overwrites files so they cannot be recovered (shred)")


def _dd(ctx: Ctx) -> None:
    for word in ctx.args:
        if word.text.startswith("of="):
            ctx.analysis.writes([Word(word.text[3:], dynamic=word.dynamic)], "dd of=", disk_key="dd-disk")


def _disk_tool(ctx: Ctx) -> None:
    for word in positionals(ctx.args, frozenset({"-t", "-L", "-O", "-b", "-c", "-U", "-T", "-F", "-n", "-l", "-o", "-p"})):
        for path in ctx.analysis.resolve(word) or ():
            if is_device(path):
                ctx.analysis.block("mkfs-device", f"formats or wipes the disk device {path} ({ctx.name})")
    if ctx.name.startswith("mk"):
        ctx.analysis.warn("mkfs", f"creates a filesystem, erasing what was there ({ctx.name})")


# -- the machine and its processes ----------------------------------------------------------------------


def _shutdown(ctx: Ctx) -> None:
    ctx.analysis.block("shutdown", f"stops or restarts the machine ({ctx.name})")


def _init(ctx: Ctx) -> None:
    if any(w.text in ("0", "6") for w in ctx.args):
        ctx.analysis.block("shutdown", f"stops or restarts the machine ({ctx.name} {ctx.args[0].text})")


def _systemctl(ctx: Ctx) -> None:
    plain = positionals(ctx.args, frozenset({"-H", "-M", "-t", "-p", "-n", "-o", "-s", "--host", "--machine", "--type",
                                             "--property", "--lines", "--output", "--signal", "--kill-whom", "--root", "--state"}))
    sub = plain[0].text if plain else ""
    if sub in ("poweroff", "reboot", "halt", "kexec", "soft-reboot"):
        ctx.analysis.block("shutdown", f"stops or restarts the machine (systemctl {sub})")
    elif sub in ("stop", "disable", "mask", "kill", "isolate"):
        ctx.analysis.warn("systemctl-stop", f"stops or disables a system service (systemctl {sub})")


def _service(ctx: Ctx) -> None:
    plain = positionals(ctx.args)
    if len(plain) >= 2 and plain[1].text in ("stop", "disable"):
        ctx.analysis.warn("systemctl-stop", f"stops a system service (service {plain[0].text} {plain[1].text})")


def _finds_runtime(word: Word) -> bool:
    """A ``$(pgrep hermes)`` / ``$(pidof python)``-style argument."""
    for sub in word.subs:
        for words in (c.words for pipeline in sub for c in pipeline):
            if words and command_name(words[0]) in ("pgrep", "pidof") and any(_names_runtime(w.text, full=True) for w in words[1:]):
                return True
    return False


def _names_runtime(pattern: str, *, full: bool) -> bool:
    """Whether a pkill/killall pattern would match the runtime's own process."""
    if pattern.startswith("-"):
        return False
    lowered = pattern.lower()
    if any(name in lowered for name in _RUNTIME_NAMES) or (full and "python" in lowered):
        return True
    try:
        return any(re.search(pattern, subject) for subject in ("python", "python3", *((_RUNTIME_SAMPLE,) if full else ())))
    except re.error:
        return False


def _kill(ctx: Ctx) -> None:
    signal_given = ended = skip = False
    protected = {str(os.getpid()): "the runtime itself", "1": "PID 1 (init)"}
    for word in ctx.args:
        text = word.text
        if skip:
            skip = False
            continue
        if not ended and text == "--":
            ended = True
            continue
        if not ended and text in ("-s", "-n", "--signal"):
            skip = signal_given = True
            continue
        if not ended and text in ("-l", "-L", "--list", "--table"):
            return
        if not ended and not signal_given and re.fullmatch(r"-(?:[0-9]+|[A-Za-z][A-Za-z0-9+-]*)", text):
            signal_given = True
            continue
        if text == "-1":
            ctx.analysis.warn("kill-all", "signals every process you may signal (kill -1)")
        elif text in protected:
            ctx.analysis.warn("kill-runtime", f"signals {protected[text]} (kill {text})")
        elif re.search(r"\$\{?PPID\b", text) or _finds_runtime(word):
            ctx.analysis.warn("kill-runtime", f"signals the agent runtime itself (kill {text})")


def _pkill(ctx: Ctx) -> None:
    args = ctx.args
    full = "f" in short_flags(args) or "full" in long_options(args)
    with_arg = frozenset({"-u", "-U", "-g", "-G", "-P", "-s", "-t", "-F", "--signal", "--euid", "--uid", "--pgroup", "--group",
                          "--parent", "--session", "--terminal", "--pidfile", "--ns", "--nslist", "--older-than", "--younger-than",
                          "-o", "-y", "-n", "-Z", "--user", "--context"})
    patterns = positionals(args, with_arg)
    if ctx.name == "killall5" or (not patterns and any(w.text in ("-u", "-U", "--uid", "--euid", "--user") for w in args)):
        ctx.analysis.warn("kill-all", f"signals every process of a user ({ctx.name})")
    if any(_names_runtime(w.text, full=full) for w in patterns):
        ctx.analysis.warn("kill-runtime", f"may signal the agent runtime itself ({ctx.name} {' '.join(w.text for w in patterns)})")


def _crontab(ctx: Ctx) -> None:
    if "r" in short_flags(ctx.args) or "remove" in long_options(ctx.args):
        ctx.analysis.warn("crontab-remove", "deletes every job in the crontab (crontab -r)")


def _iptables(ctx: Ctx) -> None:
    if "F" in short_flags(ctx.args) or "flush" in long_options(ctx.args):
        ctx.analysis.warn("iptables-flush", f"removes every firewall rule ({ctx.name} -F)")


def _nft(ctx: Ctx) -> None:
    plain = positionals(ctx.args)
    if plain and plain[0].text == "flush":
        ctx.analysis.warn("iptables-flush", "removes firewall rules (nft flush)")


# -- where the command runs ------------------------------------------------------------------------------


def _cd(ctx: Ctx) -> None:
    plain = positionals(ctx.args)
    if not plain:
        ctx.analysis.cwd = ctx.analysis.home
        return
    paths = ctx.analysis.resolve(plain[0]) if plain[0].text != "-" else None
    ctx.analysis.cwd = paths[0] if paths and len(paths) == 1 else None


RULES: dict[str, Rule] = {
    "rm": _rm,
    "find": _find,
    "git": _git,
    "chmod": _chmod,
    "chown": _chown,
    "chgrp": _chown,
    "dd": _dd,
    "mkfs": _disk_tool,
    **{name: _disk_tool for name in _DISK_TOOLS},
    "shred": _shred,
    "tee": _writes_all(frozenset({"--output-error"})),
    "touch": _writes_all(frozenset({"-r", "-d", "-t", "--reference", "--date"})),
    "truncate": _writes_all(frozenset({"-s", "-r", "--size", "--reference"})),
    "mkdir": _writes_all(frozenset({"-m", "--mode"})),
    "rmdir": _writes_all(),
    "unlink": _writes_all(),
    "install": _writes_all(frozenset({"-m", "-o", "-g", "-t", "-S", "--mode", "--owner", "--group", "--suffix"})),
    "mv": _writes_all(frozenset({"-t", "-S", "--suffix"})),
    "cp": _writes_last,
    "ln": _writes_last,
    "rsync": _writes_last,
    "sed": _sed,
    "shutdown": _shutdown,
    "reboot": _shutdown,
    "halt": _shutdown,
    "poweroff": _shutdown,
    "init": _init,
    "telinit": _init,
    "systemctl": _systemctl,
    "service": _service,
    "kill": _kill,
    "pkill": _pkill,
    "killall": _pkill,
    "killall5": _pkill,
    "crontab": _crontab,
    "iptables": _iptables,
    "ip6tables": _iptables,
    "iptables-legacy": _iptables,
    "iptables-nft": _iptables,
    "nft": _nft,
    "cd": _cd,
    "pushd": _cd,
    **EXEC_RULES,
}
