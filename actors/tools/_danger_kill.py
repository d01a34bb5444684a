"""Rules for signalling processes and for stopping, restarting or replacing the agent runtime itself.

- ``kill -1`` (any signal, any spelling) and ``pkill``/``killall`` of every process of the
  current user are the hardline ``kill-all``: they take the runtime, the user's shells and
  editors down with them.
- Killing by name or search (``kill $(pgrep x)``, ``pkill -9 x``, ``killall -r re``) needs
  approval: the match is decided when it runs, often wider than meant (``kill-by-name``).
- Anything aimed at the runtime (``pkill -f hermes``, ``systemctl --user restart hermes``,
  ``hermes update``, ``pip install -U hermes-agent``) needs approval (``kill-runtime``,
  ``runtime-stop``): the agent must not pull the floor from under its own session.
"""

from __future__ import annotations

import os
import re

import regex

from ._danger_scan import Ctx, command_name, long_options, positionals, short_flags
from ._danger_shell import Word, walk_commands

_RUNTIME_NAMES = ("hermes",)
_RUNTIME_SAMPLE = "/usr/bin/python3 /usr/local/bin/hermes run"
"""What the runtime's command line looks like, to test ``pkill -f`` patterns against."""
_PATTERN_BUDGET_S = 0.1
"""Seconds a ``pkill`` pattern may take against one subject (the ``regex`` module's timeout)."""
_KILL_SIGNALS = frozenset({"9", "KILL", "SIGKILL"})
_PID_FINDERS = frozenset({"pgrep", "pidof", "lsof", "fuser", "ps"})
_REGEX_CHARS = re.compile(r"[*+?\[\](){}|^$\\]")
_SELF_USERS = re.compile(r"\$\{?(?:USER|LOGNAME|UID|EUID)\}?|\$\(\s*(?:whoami|id\s+-u[n]?|id\s+-un)\s*\)|`\s*(?:whoami|id\s+-un?)\s*`")
_STOPPING_VERBS = frozenset(
    {
        "stop",
        "restart",
        "try-restart",
        "reload-or-restart",
        "try-reload-or-restart",
        "condrestart",
        "kill",
        "disable",
        "mask",
        "isolate",
        "reload",
        "force-reload",
        "unload",
        "bootout",
        "kickstart",
        "remove",
        "rm",
    }
)


def names_runtime(pattern: str, *, full: bool) -> bool:
    """Whether a pkill/killall pattern would match the runtime's own process."""
    if pattern.startswith("-"):
        return False
    lowered = pattern.lower()
    if any(name in lowered for name in _RUNTIME_NAMES) or (full and "python" in lowered):
        return True
    subjects = ("python", "python3", *((_RUNTIME_SAMPLE,) if full else ()))
    try:
        return any(regex.search(pattern, subject, timeout=_PATTERN_BUDGET_S) for subject in subjects)
    except (regex.error, ValueError):
        return False
    except TimeoutError:  # a pattern that backtracks for ever (``re`` held the GIL for hours): say it may
        return True


def _matches_everything(pattern: str) -> bool:
    try:
        return all(re.search(pattern, sample) for sample in ("a", "Z", "0", "-", "/"))
    except re.error:
        return False


def _is_self(ctx: Ctx, user: str) -> bool:
    return user in (ctx.analysis.user, str(os.getuid())) or _SELF_USERS.fullmatch(user.strip()) is not None


def _finds_pids(ctx: Ctx, word: Word) -> tuple[bool, bool]:
    """(found by a search, aimed at the runtime) for a ``$(pgrep x)`` / ``$(cat pidfile)``-style argument."""
    search = runtime = False
    for sub in word.subs:
        for command in walk_commands(sub):
            if not command.words:
                continue
            name = command_name(command.words[0])
            if name in _PID_FINDERS:
                search = True
                runtime = runtime or (name in ("pgrep", "pidof") and any(names_runtime(w.text, full=True) for w in command.words[1:]))
            elif name == "cat":
                hermes = ctx.analysis.hermes_home
                paths = [p for w in command.words[1:] for p in ctx.analysis.resolve(w) or ()]
                runtime = runtime or any(p.startswith(hermes + "/") for p in paths)
    return search, runtime


def _kill(ctx: Ctx) -> None:
    signal: str | None = None
    targets: list[Word] = []
    ended = skip = False
    for j, word in enumerate(ctx.args):
        text = word.text
        if skip:
            skip = False
        elif ended:
            targets.append(word)
        elif text == "--":
            ended = True
        elif text in ("-s", "-n", "--signal"):
            skip = True
            signal = ctx.args[j + 1].text if j + 1 < len(ctx.args) else ""
        elif text.startswith("--signal="):
            signal = text.split("=", 1)[1]
        elif text in ("-l", "-L", "--list", "--table"):
            return
        elif signal is None and re.fullmatch(r"-(?:[0-9]+|[A-Za-z][A-Za-z0-9+-]*)", text):
            signal = text[1:]
        else:
            targets.append(word)
    if not targets and signal == "1":
        targets = [Word("-1")]  # `kill -1`: read the way it is feared, as every process
    protected = {str(os.getpid()): "the runtime itself", "1": "PID 1 (init)"}
    for word in targets:
        text = word.text
        search, runtime = _finds_pids(ctx, word)
        if re.fullmatch(r"-0*1", text):
            ctx.analysis.block("kill-all", f"signals every process you may signal, the agent's own included (kill {text})")
        elif text in protected:
            ctx.analysis.warn("kill-runtime", f"signals {protected[text]} (kill {text})")
        elif runtime or re.search(r"\$\{?PPID\b", text):
            ctx.analysis.warn("kill-runtime", f"signals the agent runtime itself (kill {text})")
        if search:
            ctx.analysis.warn("kill-by-name", f"kills whatever a search finds when it runs, not known process ids (kill {text})")


_PKILL_WITH_ARG = frozenset(
    {
        "-u",
        "-U",
        "-g",
        "-G",
        "-P",
        "-s",
        "-t",
        "-F",
        "--signal",
        "--euid",
        "--uid",
        "--pgroup",
        "--group",
        "--parent",
        "--session",
        "--terminal",
        "--pidfile",
        "--ns",
        "--nslist",
        "--older-than",
        "--younger-than",
        "-o",
        "-y",
        "-n",
        "-Z",
        "--user",
        "--context",
    }
)
_KILLALL_WITH_ARG = frozenset({"-s", "--signal", "-u", "--user", "-o", "--older-than", "-y", "--younger-than", "-n", "--ns", "-Z", "--context"})


def _signals(ctx: Ctx) -> set[str]:
    """The signals a pkill/killall command names, upper case without ``SIG`` (none: the default TERM)."""
    args = ctx.args
    found: set[str] = set()
    for j, word in enumerate(args):
        text = word.text
        if text == "--signal" or (text == "-s" and ctx.name == "killall"):
            found.add(args[j + 1].text if j + 1 < len(args) else "")
        elif text.startswith("--signal="):
            found.add(text.split("=", 1)[1])
        elif ctx.name == "killall" and text.startswith("-s") and len(text) > 2:
            found.add(text[2:])
        elif re.fullmatch(r"-(?:[0-9]+|SIG[A-Za-z0-9+-]+|[A-Z][A-Z0-9+-]+)", text):
            found.add(text[1:])
    upper = {s.upper() for s in found}
    return {s[3:] if s.startswith("SIG") else s for s in upper}


def _pkill(ctx: Ctx) -> None:
    args = ctx.args
    full = "f" in short_flags(args) or "full" in long_options(args)
    patterns = positionals(args, _KILLALL_WITH_ARG if ctx.name == "killall" else _PKILL_WITH_ARG)
    users = [args[j + 1].text for j, w in enumerate(args[:-1]) if w.text in ("-u", "-U", "--uid", "--euid", "--user")]
    users += [w.text.split("=", 1)[1] for w in args if w.text.startswith(("--user=", "--uid=", "--euid="))]
    shown = f"{ctx.name} {' '.join(w.text for w in args)}".strip()
    if ctx.name == "killall5":
        ctx.analysis.block("kill-all", "signals every process on the machine but its own session (killall5)")
        return
    if not patterns and users:
        if any(_is_self(ctx, user) for user in users):
            ctx.analysis.block("kill-all", f"signals every process of the current user, the agent's own included ({shown})")
        else:
            ctx.analysis.warn("kill-user", f"signals every process of a user ({shown})")
    if any(_matches_everything(w.text) for w in patterns):
        ctx.analysis.block("kill-all", f"the pattern matches every process of the user ({shown})")
    if any(names_runtime(w.text, full=full) for w in patterns):
        ctx.analysis.warn("kill-runtime", f"may signal the agent runtime itself ({shown})")
    by_regex = ctx.name == "killall" and ("r" in short_flags(args) or "regexp" in long_options(args))
    if _signals(ctx) & _KILL_SIGNALS:
        ctx.analysis.warn("kill-by-name", f"kills by name with SIGKILL, which no process can catch to save its work ({shown})")
    elif by_regex or (ctx.name == "pkill" and any(_REGEX_CHARS.search(w.text) for w in patterns)):
        ctx.analysis.warn("kill-by-name", f"kills every process a pattern matches, often more than meant ({shown})")


def _fuser(ctx: Ctx) -> None:
    if "k" in short_flags(ctx.args) or "kill" in long_options(ctx.args):
        ctx.analysis.warn("kill-by-name", f"kills every process using a file or port (fuser -k {' '.join(w.text for w in ctx.args)})")


# -- stopping or replacing the runtime -------------------------------------------------------------


def _runtime_stop(ctx: Ctx, what: str) -> None:
    ctx.analysis.warn("runtime-stop", f"stops, restarts or replaces the agent runtime itself ({what})")


def _names_unit(words: list[Word]) -> bool:
    return any(name in w.text.lower() for w in words for name in _RUNTIME_NAMES)


def systemd_runtime(ctx: Ctx, verb: str, units: list[Word]) -> bool:
    """``systemctl restart hermes`` / ``service hermes stop``: True when it was about the runtime."""
    if verb in _STOPPING_VERBS and _names_unit(units):
        _runtime_stop(ctx, f"{ctx.name} {verb} {' '.join(w.text for w in units)}")
        return True
    return False


def _hermes(ctx: Ctx) -> None:
    plain = [w.text for w in positionals(ctx.args)]
    sub, second = (plain + ["", ""])[:2]
    if sub in ("update", "uninstall", "stop", "restart", "upgrade") or (sub == "gateway" and second in _STOPPING_VERBS | {"uninstall"}):
        _runtime_stop(ctx, " ".join(["hermes", *plain[:2]]))
    elif sub == "config" and second in ("set", "edit", "reset", "unset", "migrate"):
        ctx.analysis.warn("write-hermes-home", f"changes the agent's own configuration (hermes config {second})")


def _package_manager(ctx: Ctx) -> None:
    plain = [w.text for w in positionals(ctx.args, frozenset({"-r", "--requirement", "-c", "--constraint", "-e", "--editable"}))]
    verbs = {"install", "uninstall", "remove", "upgrade", "reinstall", "add"}
    if any(p in verbs for p in plain) and any(p.lower().startswith(_RUNTIME_NAMES) for p in plain if p not in verbs and p != "pip"):
        _runtime_stop(ctx, f"{ctx.name} {' '.join(plain)}")


def _launchctl(ctx: Ctx) -> None:
    plain = positionals(ctx.args)
    if plain and plain[0].text in _STOPPING_VERBS and _names_unit(plain[1:]):
        _runtime_stop(ctx, f"launchctl {plain[0].text}")


def runtime_container(ctx: Ctx, words: list[Word]) -> None:
    """``docker restart hermes`` (the words after ``docker``, not an ``exec``)."""
    if words and words[0].text in _STOPPING_VERBS | {"stop", "kill", "rm", "pause"} and _names_unit(positionals(words[1:])):
        _runtime_stop(ctx, f"{ctx.name} {words[0].text}")


KILL_RULES = {
    "kill": _kill,
    "pkill": _pkill,
    "killall": _pkill,
    "killall5": _pkill,
    "fuser": _fuser,
    "hermes": _hermes,
    "pip": _package_manager,
    "pip3": _package_manager,
    "pipx": _package_manager,
    "uv": _package_manager,
    "launchctl": _launchctl,
}
