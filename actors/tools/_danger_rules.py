"""Per-program rules: deleting and writing files, disks, the machine and its services; and the table of every rule.

Each rule gets one unwrapped simple command (:class:`Ctx`) and records findings with
``block`` (the hardline: never runs) or ``warn`` (needs approval), under a stable key.
The rules for git (``_danger_git``), signals and the runtime (``_danger_kill``), code
runners (``_danger_exec``), databases (``_danger_sql``) and other shells
(``_danger_windows``) live beside this module; prefixes (``sudo``, ``xargs``, ...) in
``_danger_prefixes``.

Keys are part of the approval contract (``session`` / ``always`` approve keys, and
``approved_patterns.txt`` stores them): renaming one forgets what users approved.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

from ._danger_cloud import CLOUD_RULES
from ._danger_exec import EXEC_RULES, SHELLS
from ._danger_git import git
from ._danger_kill import KILL_RULES, systemd_runtime
from ._danger_network import NETWORK_RULES, SENDERS, shell_into
from ._danger_paths import hardline_target, is_device, is_raw_disk, is_system
from ._danger_prefixes import DELETERS, PREFIXES
from ._danger_scan import ASSIGNMENT, NO_UPSTREAM, Analysis, Ctx, Rule, command_name, long_options, positionals, short_flags
from ._danger_shell import Word
from ._danger_sql import SQL_RULES, is_sql_truncate, sql_findings
from ._danger_windows import WINDOWS_RULES, rd

__all__ = ["PREFIXES", "RULES"]

_DISK_TOOLS = frozenset({"mke2fs", "mkswap", "wipefs", "mkdosfs", "mkntfs", "blkdiscard"})
_PARTITIONERS = frozenset({"fdisk", "sfdisk", "cfdisk", "gdisk", "sgdisk", "parted"})
_FIND_NEUTRAL = frozenset(
    {
        "-depth",
        "-d",
        "-xdev",
        "-mount",
        "-maxdepth",
        "-mindepth",
        "-follow",
        "-noleaf",
        "-daystart",
        "-ignore_readdir_race",
        "-noignore_readdir_race",
        "-warn",
        "-nowarn",
        "-print",
        "-print0",
        "-delete",
    }
)
"""find expressions that do not narrow what is matched: with only these, everything under the start is hit."""


# -- deleting and writing ------------------------------------------------------------------------------


def _emptied(analysis: Analysis, targets: list[Word], reason: str, how: str) -> None:
    """``targets`` lose what they hold (moved away, synced with deletion): the hardline for ``/``, system trees and home."""
    for word in targets:
        for path in analysis.resolve(word) or ():
            found = hardline_target(path, analysis.home)
            if found is not None:
                analysis.block(found[0], f"{reason.format(what=found[1])} ({how} {analysis.show(path)})")


def recursive_delete(analysis: Analysis, targets: list[Word], how: str) -> None:
    """``targets`` are deleted with everything under them: the hardline for ``/``, system trees and home."""
    paths = [p for word in targets for p in analysis.resolve(word) or ()]
    for path in paths:
        found = hardline_target(path, analysis.home)
        if found is not None:
            key, what = found
            reason = "deletes the whole filesystem" if key == "rm-root" else f"deletes {what} and everything in it"
            analysis.block(key, f"{reason} ({how} {analysis.show(path)})")
    system = [p for p in paths if is_system(p)]
    detail = f" of the system path {system[0]}" if system else ""
    analysis.warn("rm-recursive", f"recursive delete ({how}){detail}")
    analysis.writes(targets, how)


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
    if no_preserve:
        ctx.analysis.block("rm-root", "deletes recursively with root protection turned off (rm --no-preserve-root)")
    if recursive:
        recursive_delete(ctx.analysis, targets, "rm -r")
    else:
        ctx.analysis.writes(targets, "rm")


def _find(ctx: Ctx) -> None:
    args = ctx.args
    j = 0
    while (j < len(args) and args[j].text in ("-P", "-L", "-H", "-D")) or (j < len(args) and args[j].text.startswith("-O")):
        j += 2 if args[j].text == "-D" else 1
    starts: list[Word] = []
    while j < len(args) and not args[j].text.startswith("-") and args[j].text not in ("(", "!", ")"):
        starts.append(args[j])
        j += 1
    starts = starts or [Word(".")]
    actions: list[list[Word]] = []
    narrowed = delete = False
    while j < len(args):
        text = args[j].text
        if text in ("-exec", "-execdir", "-ok", "-okdir"):
            k = j + 1
            while k < len(args) and args[k].text not in (";", "+"):
                k += 1
            actions.append(args[j + 1 : k])
            j = k
        elif text == "-delete":
            delete = True
        elif text in ("-maxdepth", "-mindepth"):
            j += 1
        elif text not in _FIND_NEUTRAL and (text.startswith("-") or text in ("(", "!", ")")):
            narrowed = True
        j += 1
    if delete:
        ctx.analysis.warn("find-delete", "deletes every match (find -delete)")
        if not narrowed:
            recursive_delete(ctx.analysis, starts, "find -delete")
    for sub in actions:
        if not sub:
            continue
        deleter = command_name(sub[0]) in DELETERS
        if deleter:
            ctx.analysis.warn("find-delete", "deletes every match (find -exec rm)")
        if narrowed or not any(w.text == "{}" for w in sub):
            ctx.analysis.argv(sub, ctx.command, NO_UPSTREAM, ctx.depth)
        elif deleter:
            recursive_delete(ctx.analysis, starts, "find -exec rm")
        else:
            for start in starts:  # nothing narrows the match: `{}` is the start itself, among others
                ctx.analysis.argv([start if w.text == "{}" else w for w in sub], ctx.command, NO_UPSTREAM, ctx.depth)


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


def _executable(mode: str) -> bool:
    if re.fullmatch(r"[0-7]{1,5}", mode):
        return any(int(d) & 1 for d in mode[-3:])
    return re.search(r"[+=][rwXst]*x", mode) is not None


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
    ctx.analysis.writes(targets, "chmod", content=False)
    if mode and _executable(mode):
        for word in targets:
            ctx.analysis.created_file(word)


def _chown(ctx: Ctx) -> None:
    recursive = "R" in short_flags(ctx.args) or "recursive" in long_options(ctx.args)
    plain = positionals(ctx.args)
    targets = plain if any(o.startswith("reference") for o in long_options(ctx.args)) else plain[1:]
    if recursive and any(is_system(p) for w in targets for p in ctx.analysis.resolve(w) or ()):
        ctx.analysis.warn("chown-recursive-system", f"changes ownership recursively under a system path ({ctx.name} -R)")
    ctx.analysis.writes(targets, ctx.name, content=False)


def _writes_all(with_arg: frozenset[str] = frozenset(), *, content: bool = True) -> Rule:
    def rule(ctx: Ctx) -> None:
        targets = positionals(ctx.args, with_arg)
        ctx.analysis.writes(targets, ctx.name, content=content)
        if content:
            for word in targets:
                ctx.analysis.created_file(word)

    return rule


_TEE = _writes_all(frozenset({"--output-error"}))
_INSTALL = _writes_all(frozenset({"-m", "-o", "-g", "-t", "-S", "--mode", "--owner", "--group", "--suffix"}))


def _into(destination: Word, sources: list[Word]) -> list[Word]:
    """What a copy to ``destination`` writes: the destination, or (a directory) each source's name inside it."""
    base = destination.text.rstrip("/") or "/"
    inside = [Word(f"{base}/{s.text.rstrip('/').rsplit('/', 1)[-1]}", dynamic=destination.dynamic) for s in sources]
    return [destination, *inside]


def _copies(ctx: Ctx) -> None:
    """cp / ln / rsync / mv / install: the destination (``-t DIR`` or the last argument) is written; mv also removes its sources."""
    with_arg = frozenset({"-t", "-S", "--suffix", "-e", "--rsh", "-m", "-o", "-g", "--mode", "--owner", "--group"})
    plain = positionals(ctx.args, with_arg)
    written: list[Word] = []
    for j, word in enumerate(ctx.args):
        if word.text in ("-t", "--target-directory") and j + 1 < len(ctx.args):
            written += _into(ctx.args[j + 1], plain)
        elif word.text.startswith("--target-directory="):
            written += _into(Word(word.text.split("=", 1)[1]), plain)
    if not written and len(plain) >= 2:
        written = _into(plain[-1], plain[:-1])
        if ctx.name == "mv":
            written += plain[:-1]
            _emptied(ctx.analysis, plain[:-1], "moves {what} away", "mv")
    if ctx.name == "rsync" and len(plain) >= 2 and any(o.startswith("del") for o in long_options(ctx.args)):
        _emptied(ctx.analysis, plain[-1:], "deletes what {what} holds that the source lacks", "rsync --delete")
    ctx.analysis.writes(written, ctx.name)
    for word in written[:1]:
        ctx.analysis.created_file(word)


def _sed(ctx: Ctx) -> None:
    if any(re.match(r"-[A-Za-z]*i", w.text) and not w.text.startswith("--") for w in ctx.args) or "in-place" in long_options(ctx.args):
        ctx.analysis.writes(positionals(ctx.args, frozenset({"-e", "-f", "-l", "--expression", "--file"})), "sed -i")


def _yq(ctx: Ctx) -> None:
    if "i" in short_flags(ctx.args) or "inplace" in long_options(ctx.args):
        ctx.analysis.writes(positionals(ctx.args, frozenset({"-o", "-p", "--output-format", "--input-format"}))[1:], "yq -i")


def _truncate(ctx: Ctx) -> None:
    if is_sql_truncate(ctx):
        sql_findings(ctx.analysis, " ".join([ctx.head.text] + [w.text for w in ctx.args]))
    else:
        ctx.analysis.writes(positionals(ctx.args, frozenset({"-s", "-r", "--size", "--reference"})), "truncate")


def _rmdir(ctx: Ctx) -> None:
    if not rd(ctx):
        ctx.analysis.writes(positionals(ctx.args), "rmdir")


def _assignments(ctx: Ctx) -> None:
    """``export X=1`` / ``declare`` / ``local``: the values are known to what follows."""
    ctx.analysis.assign([w for w in ctx.args if ASSIGNMENT.match(w.text)])


# -- disks ------------------------------------------------------------------------------------------------


def _shred(ctx: Ctx) -> None:
    targets = positionals(ctx.args, frozenset({"-n", "-s", "--iterations", "--size", "--random-source"}))
    ctx.analysis.writes(targets, "shred")
    ctx.analysis.warn("shred", "overwrites files so they cannot be recovered (shred)")


def _dd(ctx: Ctx) -> None:
    for word in ctx.args:
        if word.text.startswith("of="):
            target = Word(word.text[3:], dynamic=word.dynamic)
            ctx.analysis.writes([target], "dd of=", disk_key="dd-disk")
            ctx.analysis.created_file(target)
        elif word.text.startswith("if=") and is_raw_disk(word.text[3:]):
            ctx.analysis.warn("raw-disk-read", f"reads a whole disk device, every file and secret on it (dd {word.text})")


def _disk_tool(ctx: Ctx) -> None:
    for word in positionals(ctx.args, frozenset({"-t", "-L", "-O", "-b", "-c", "-U", "-T", "-F", "-n", "-l", "-o", "-p"})):
        for path in ctx.analysis.resolve(word) or ():
            if is_device(path):
                ctx.analysis.block("mkfs-device", f"formats or wipes the disk device {path} ({ctx.name})")
    if ctx.name.startswith("mk"):
        ctx.analysis.warn("mkfs", f"creates a filesystem, erasing what was there ({ctx.name})")
    else:
        ctx.analysis.warn("disk-wipe", f"erases filesystem signatures or blocks ({ctx.name})")


def _partitioner(ctx: Ctx) -> None:
    flags, longs = short_flags(ctx.args), long_options(ctx.args)
    plain = [w.text for w in positionals(ctx.args)]
    if set(flags) & set("lpd") or {"list", "print", "dump", "help", "version"} & set(longs) or plain[1:] in (["print"], ["p"]):
        return
    ctx.analysis.warn("disk-partition", f"changes a disk's partition table ({ctx.name} {' '.join(plain)})")


# -- the machine and its services -------------------------------------------------------------------------


def _shutdown(ctx: Ctx) -> None:
    ctx.analysis.block("shutdown", f"stops or restarts the machine ({ctx.name})")


def _init(ctx: Ctx) -> None:
    if any(w.text in ("0", "6") for w in ctx.args):
        ctx.analysis.block("shutdown", f"stops or restarts the machine ({ctx.name} {ctx.args[0].text})")


def _systemctl(ctx: Ctx) -> None:
    plain = positionals(
        ctx.args,
        frozenset(
            {
                "-H",
                "-M",
                "-t",
                "-p",
                "-n",
                "-o",
                "-s",
                "--host",
                "--machine",
                "--type",
                "--property",
                "--lines",
                "--output",
                "--signal",
                "--kill-whom",
                "--root",
                "--state",
            }
        ),
    )
    sub = plain[0].text if plain else ""
    if sub in ("poweroff", "reboot", "halt", "kexec", "soft-reboot"):
        ctx.analysis.block("shutdown", f"stops or restarts the machine (systemctl {sub})")
    elif systemd_runtime(ctx, sub, plain[1:]):
        return
    elif sub in ("stop", "disable", "mask", "kill", "isolate"):
        ctx.analysis.warn("systemctl-stop", f"stops or disables a system service (systemctl {sub})")


def _service(ctx: Ctx) -> None:
    plain = positionals(ctx.args)
    if len(plain) >= 2 and not systemd_runtime(ctx, plain[1].text, plain[:1]) and plain[1].text in ("stop", "disable"):
        ctx.analysis.warn("systemctl-stop", f"stops a system service (service {plain[0].text} {plain[1].text})")


def _crontab(ctx: Ctx) -> None:
    flags = short_flags(ctx.args)
    if "r" in flags or "remove" in long_options(ctx.args):
        ctx.analysis.warn("crontab-remove", "deletes every job in the crontab (crontab -r)")
        return
    if "l" in flags or "e" in flags:
        return  # list, or the editor (a person at the keyboard)
    if positionals(ctx.args, frozenset({"-u"})):  # crontab FILE, crontab - (stdin)
        ctx.analysis.warn("crontab-install", "replaces the crontab: its commands run on a schedule, unattended, from now on")
        for text in _fed_texts(ctx):
            for line in text.splitlines():
                fields = line.split(None, 5)
                if len(fields) == 6 and not line.lstrip().startswith("#"):
                    ctx.analysis.text(fields[5], ctx.depth + 1)


def _tar(ctx: Ctx) -> None:
    """``tar -x ... -C DIR`` (or ``--directory``): the archive's files land in DIR."""
    texts = [w.text for w in ctx.args]
    first = texts[0] if texts else ""
    extracting = (
        "--extract" in texts
        or "--get" in texts
        or (first[:1] != "-" and "x" in first)
        or any(t.startswith("-") and not t.startswith("--") and "x" in t for t in texts)
    )
    if not extracting:
        return
    for j, text in enumerate(texts):
        if text in ("-C", "--directory") and j + 1 < len(ctx.args):
            _extracts_into(ctx, ctx.args[j + 1], "tar -x -C")
        elif text.startswith("--directory="):
            _extracts_into(ctx, Word(text.split("=", 1)[1]), "tar -x --directory")


def _unzip(ctx: Ctx) -> None:
    for j, word in enumerate(ctx.args):
        if word.text == "-d" and j + 1 < len(ctx.args):
            _extracts_into(ctx, ctx.args[j + 1], "unzip -d")


def _extracts_into(ctx: Ctx, target: Word, verb: str) -> None:
    """An archive's files land under ``target``: a write there, and anywhere at all when it is ``/``."""
    if any(path == "/" for path in ctx.analysis.resolve(target) or ()):
        ctx.analysis.warn("write-system", f"extracts an archive over the whole filesystem ({verb} /)")
    ctx.analysis.writes([target], verb)


_SECURITY_OFF: dict[str, Callable[[list[str]], bool]] = {
    "setenforce": lambda words: words[:1] in (["0"], ["permissive"], ["Permissive"]),
    "ufw": lambda words: words[:1] in (["disable"], ["reset"]),
    "sysctl": lambda words: any(w == "-w" or w == "--write" or ("=" in w and not w.startswith("-")) for w in words),
    "passwd": lambda words: any(w in ("-d", "--delete", "-u", "--unlock") for w in words),
    "useradd": lambda words: any(w in ("-o", "--non-unique") for w in words) or any(a in ("-u", "--uid") and b == "0" for a, b in itertools.pairwise(words)),
    "usermod": lambda words: any(w in ("-o", "--non-unique") for w in words) or any(a in ("-u", "--uid") and b == "0" for a, b in itertools.pairwise(words)),
    "chattr": lambda words: True,
    "mount": lambda words: any("remount" in w for w in words),
}
"""Commands that lower the machine's defences (SELinux, the firewall, ASLR, passwords, a second root)."""


def _security(ctx: Ctx) -> None:
    words = [w.text for w in ctx.args]
    if _SECURITY_OFF[ctx.name](words):
        ctx.analysis.warn("system-security", f"changes the machine's security settings ({ctx.name} {' '.join(words[:3])})")


def _fed_texts(ctx: Ctx) -> list[str]:
    """What reaches the command's stdin when it can be read: a heredoc or here-string, or ``echo``/``printf`` before it."""
    texts = list(ctx.command.stdin_texts)
    feeder = ctx.upstream[-1].words if ctx.upstream else []
    if feeder and command_name(feeder[0]) in ("echo", "printf"):
        texts.append(" ".join(w.text for w in feeder[1:]))
    return texts


def _at(ctx: Ctx) -> None:
    """``at TIME`` / ``batch``: the commands on stdin run later, unattended: judged now, and flagged."""
    ctx.analysis.warn("scheduled-command", f"schedules commands to run later, unattended ({ctx.name})")
    for text in _fed_texts(ctx):
        ctx.analysis.text(text, ctx.depth + 1)


def _iptables(ctx: Ctx) -> None:
    if "F" in short_flags(ctx.args) or "flush" in long_options(ctx.args):
        ctx.analysis.warn("iptables-flush", f"removes every firewall rule ({ctx.name} -F)")


def _nft(ctx: Ctx) -> None:
    plain = positionals(ctx.args)
    if plain and plain[0].text == "flush":
        ctx.analysis.warn("iptables-flush", "removes firewall rules (nft flush)")


def _cd(ctx: Ctx) -> None:
    plain = positionals(ctx.args)
    if not plain:
        ctx.analysis.cwd = ctx.analysis.home
        return
    paths = ctx.analysis.resolve(plain[0]) if plain[0].text != "-" else None
    ctx.analysis.cwd = paths[0] if paths and len(paths) == 1 else None


def _both(first: Rule, second: Rule) -> Rule:
    def rule(ctx: Ctx) -> None:
        first(ctx)
        second(ctx)

    return rule


RULES: dict[str, Rule] = {
    "rm": _rm,
    "find": _find,
    "git": git,
    "chmod": _chmod,
    "chown": _chown,
    "chgrp": _chown,
    "dd": _dd,
    "mkfs": _disk_tool,
    **{name: _disk_tool for name in _DISK_TOOLS},
    **{name: _partitioner for name in _PARTITIONERS},
    "shred": _shred,
    "tee": _TEE,
    "sponge": _TEE,
    "touch": _writes_all(frozenset({"-r", "-d", "-t", "--reference", "--date"}), content=False),
    "truncate": _truncate,
    "mkdir": _writes_all(frozenset({"-m", "--mode"}), content=False),
    "rmdir": _rmdir,
    "unlink": _writes_all(),
    "install": _INSTALL,
    "mv": _copies,
    "cp": _copies,
    "ln": _copies,
    "rsync": _copies,
    "sed": _sed,
    "yq": _yq,
    "export": _assignments,
    "declare": _assignments,
    "typeset": _assignments,
    "local": _assignments,
    "readonly": _assignments,
    "shutdown": _shutdown,
    "reboot": _shutdown,
    "halt": _shutdown,
    "poweroff": _shutdown,
    "init": _init,
    "telinit": _init,
    "systemctl": _systemctl,
    "service": _service,
    "crontab": _crontab,
    "at": _at,
    "tar": _tar,
    "bsdtar": _tar,
    "unzip": _unzip,
    **{name: _security for name in _SECURITY_OFF},
    "batch": _at,
    "iptables": _iptables,
    "ip6tables": _iptables,
    "iptables-legacy": _iptables,
    "iptables-nft": _iptables,
    "nft": _nft,
    "cd": _cd,
    "pushd": _cd,
    **KILL_RULES,
    **EXEC_RULES,
    **SQL_RULES,
    **WINDOWS_RULES,
    **NETWORK_RULES,
    **CLOUD_RULES,
}
for _name, _extra in [*SENDERS.items(), *((shell, shell_into) for shell in SHELLS)]:
    RULES[_name] = _both(RULES[_name], _extra)
