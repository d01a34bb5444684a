"""Rules for git: what loses work (uncommitted changes, untracked files, unmerged branches, the remote's history).

git accepts any unambiguous prefix of a long option (``--har`` is ``--hard``, ``--forc`` is
``--force``), so long options are matched as prefixes; short options may be bundled
(``-fu``, ``-xdf``).
"""

from __future__ import annotations

from ._danger_scan import Ctx, abbreviates, long_options, short_flags
from ._danger_shell import Word

_GLOBAL_WITH_ARG = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env"})
_EVERYTHING = frozenset({".", ":/", ":", "*", "./", ":/*"})
"""Pathspecs that name the whole working tree."""


def _pathspecs(args: list[Word]) -> tuple[list[str], bool]:
    """(pathspecs, whether they came after ``--``): a ``checkout``/``restore`` argument list's paths."""
    texts = [w.text for w in args]
    if "--" in texts:
        return texts[texts.index("--") + 1 :], True
    return [t for t in texts if not t.startswith("-")], False


def _reset(ctx: Ctx, rest: list[Word]) -> None:
    if abbreviates(long_options(rest), "hard"):
        ctx.analysis.warn("git-reset-hard", "discards uncommitted changes (git reset --hard)")


def _push(ctx: Ctx, rest: list[Word]) -> None:
    longs = [o for o in long_options(rest) if not o.startswith("no-") and o != "force-if-includes"]  # alone, it forces nothing
    refspec_force = any(w.text.startswith("+") and len(w.text) > 1 for w in rest)
    forced = "f" in short_flags(rest) or abbreviates(longs, "force", 2) or any(o.startswith("force") for o in longs)
    if forced or abbreviates(longs, "mirror", 2) or refspec_force:
        ctx.analysis.warn("git-force-push", "rewrites history on the remote (git push --force)")


def _clean(ctx: Ctx, rest: list[Word]) -> None:
    flags, longs = short_flags(rest), long_options(rest)
    if ("f" in flags or abbreviates(longs, "force", 2)) and "n" not in flags and not abbreviates(longs, "dry-run", 2):
        ctx.analysis.warn("git-clean", "deletes untracked files (git clean -f)")


def _branch(ctx: Ctx, rest: list[Word]) -> None:
    flags, longs = short_flags(rest), long_options(rest)
    delete = "d" in flags or abbreviates(longs, "delete", 3)
    forced = "f" in flags or abbreviates(longs, "force", 2)
    if "D" in flags or (delete and forced):
        ctx.analysis.warn("git-branch-delete", "deletes a branch even if its commits are merged nowhere (git branch -D)")


def _checkout(ctx: Ctx, rest: list[Word]) -> None:
    paths, after_dashes = _pathspecs(rest)
    if (after_dashes and paths) or any(p in _EVERYTHING for p in paths):
        ctx.analysis.warn("git-discard", f"overwrites uncommitted changes in the working tree (git checkout {' '.join(paths)})")


def _restore(ctx: Ctx, rest: list[Word]) -> None:
    flags, longs = short_flags(rest), long_options(rest)
    staged = "S" in flags or abbreviates(longs, "staged", 3)
    worktree = "W" in flags or abbreviates(longs, "worktree", 2)
    paths, _ = _pathspecs(rest)
    if paths and (worktree or not staged):
        ctx.analysis.warn("git-discard", f"overwrites uncommitted changes in the working tree (git restore {' '.join(paths)})")


_RUNS_COMMAND = frozenset(
    {"core.sshcommand", "core.pager", "core.editor", "core.fsmonitor", "core.askpass", "sequence.editor", "diff.external", "gpg.program", "credential.helper"}
)
"""Settings whose value git runs as a shell command (``alias.*`` too, when it starts with ``!``)."""


def _config_runs(ctx: Ctx, key: str, value: str) -> None:
    """``git -c KEY=VALUE`` / ``git config KEY VALUE``: a value git will run is judged as the command it is."""
    key = key.lower()
    if key in _RUNS_COMMAND or key.startswith("filter.") or (key.startswith("alias.") and value.startswith("!")):
        ctx.analysis.warn("git-runs-command", f"makes git run a command of its own choosing ({key})")
        ctx.analysis.text(value.removeprefix("!"), ctx.depth + 1)
    elif key == "core.hookspath":
        ctx.analysis.warn("git-runs-command", "points git's hooks at another directory: its scripts run at each commit (core.hooksPath)")


def _config(ctx: Ctx, rest: list[Word]) -> None:
    plain = [w.text for w in rest if not w.text.startswith("-")]
    if len(plain) >= 2:
        _config_runs(ctx, plain[0], plain[1])


_SUBCOMMANDS = {"config": _config, "reset": _reset, "push": _push, "clean": _clean, "branch": _branch, "checkout": _checkout, "restore": _restore}


def git(ctx: Ctx) -> None:
    args = ctx.args
    j = 0
    while j < len(args) and args[j].text.startswith("-"):
        if args[j].text == "-c" and j + 1 < len(args) and "=" in args[j + 1].text:
            _config_runs(ctx, *args[j + 1].text.split("=", 1))
        j += 2 if args[j].text in _GLOBAL_WITH_ARG else 1
    if j < len(args) and args[j].text in _SUBCOMMANDS:
        _SUBCOMMANDS[args[j].text](ctx, args[j + 1 :])
