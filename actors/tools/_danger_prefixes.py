"""Prefixes: commands that run another command (``sudo``, ``env``, ``nohup``, ``xargs``, ``docker exec``, ...).

Each returns the index where the command it runs starts (which is then judged as if
written alone), or None when it has judged everything itself. ``sudo`` also has findings
of its own: a password read from stdin (``-S``) or an askpass program (``-A``).
"""

from __future__ import annotations

from ._danger_cloud import container_deletes
from ._danger_kill import runtime_container
from ._danger_scan import Ctx, Prefix, abbreviates, command_name, long_options, short_flags
from ._danger_shell import Word

DELETERS = frozenset({"rm", "shred", "unlink", "rmdir"})


def skip_options(words: list[Word], index: int, with_arg: frozenset[str]) -> int:
    """The index of the first word after ``words[index]``'s options (``--`` ends them)."""
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
        return skip_options(words, index, with_arg) + positional

    return skip


_SUDO_WITH_ARG = frozenset(
    {
        "-u",
        "-g",
        "-h",
        "-p",
        "-C",
        "-D",
        "-r",
        "-t",
        "-T",
        "-U",
        "--user",
        "--group",
        "--host",
        "--prompt",
        "--close-from",
        "--chdir",
        "--role",
        "--type",
        "--other-user",
    }
)


def _sudo(ctx: Ctx, words: list[Word], index: int) -> int | None:
    j = skip_options(words, index, _SUDO_WITH_ARG)
    options = words[index + 1 : j]
    flags, longs = short_flags(options), long_options(options)
    if "S" in flags or abbreviates(longs, "stdin", 2):
        ctx.analysis.warn("sudo-stdin", "sudo reads a password from stdin (sudo -S)")
    if "A" in flags or abbreviates(longs, "askpass", 2):
        ctx.analysis.warn("sudo-askpass", "sudo gets a password from an askpass program (sudo -A)")
    if "e" in flags or "edit" in longs:
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
    j = skip_options(words, index, frozenset({"-n", "--interval", "-q", "--equexit"}))
    ctx.analysis.text(" ".join(w.text for w in words[j:]), ctx.depth + 1)
    return None


_XARGS_WITH_ARG = frozenset(
    {
        "-a",
        "-d",
        "-E",
        "-I",
        "-L",
        "-n",
        "-P",
        "-s",
        "--arg-file",
        "--delimiter",
        "--eof",
        "--replace",
        "--max-lines",
        "--max-args",
        "--max-procs",
        "--max-chars",
        "--process-slot-var",
    }
)


def _xargs(ctx: Ctx, words: list[Word], index: int) -> int | None:
    """``xargs CMD``: CMD runs with the words piped in; ``echo / | xargs rm -rf`` is judged as ``rm -rf /``."""
    j = skip_options(words, index, _XARGS_WITH_ARG)
    if j >= len(words):
        return j
    name = command_name(words[j])
    if name in DELETERS:
        ctx.analysis.warn("find-delete", "deletes every path piped in (xargs rm)")
    if name == "kill":
        ctx.analysis.warn("kill-by-name", "kills whatever process ids are piped in (xargs kill)")
    feeder = ctx.upstream[-1] if ctx.upstream else None
    if feeder is not None and feeder.words and command_name(feeder.words[0]) in ("echo", "printf"):
        texts = [w.text.replace("\\n", " ").replace("\\t", " ") for w in feeder.words[1:] if not w.text.startswith("-")]
        piped = [Word(part) for text in texts for part in text.split()]  # xargs splits on blanks and newlines
        ctx.analysis.argv(words[j:] + piped, ctx.command, ctx.upstream, ctx.depth)
        return None
    return j


def _command(ctx: Ctx, words: list[Word], index: int) -> int | None:
    options = words[index + 1 : skip_options(words, index, frozenset())]
    if any(flag in short_flags(options) for flag in "vV"):
        return None  # `command -v x` asks where x is; it runs nothing
    return index + 1 + len(options)


_EXEC_WITH_ARG = frozenset(
    {"-e", "--env", "-u", "--user", "-w", "--workdir", "--env-file", "--detach-keys", "--index", "-c", "--container", "-n", "--namespace"}
)


def _container(ctx: Ctx, words: list[Word], index: int) -> int | None:
    """``docker exec CONTAINER CMD`` / ``docker compose exec SERVICE CMD`` / ``kubectl exec POD -- CMD``: CMD is judged."""
    j = index + 1
    while j < len(words) and words[j].text.startswith("-"):  # docker's own options (-H host, --context x)
        j += 2 if words[j].text in ("-H", "--host", "--context", "-c", "--config", "-f", "--file", "-p", "--project-name") else 1
    if j < len(words) and words[j].text == "compose":
        j += 1
        while j < len(words) and words[j].text.startswith("-"):
            j += 2 if words[j].text in ("-f", "--file", "-p", "--project-name", "--env-file", "--profile") else 1
    if j >= len(words) or words[j].text != "exec":
        if j < len(words) and words[j].text in ("run", "create") and ctx.name in ("docker", "podman", "nerdctl"):
            _host_access(ctx, words[j + 1 :])
        runtime_container(ctx, words[j:])
        container_deletes(ctx, words[j:])
        return None
    j = skip_options(words, j, _EXEC_WITH_ARG)
    if ctx.name == "kubectl":
        ends = [k for k in range(j, len(words)) if words[k].text == "--"]
        return ends[0] + 1 if ends else None
    return j + 1


_HOST_SOURCES = ("/", "/etc", "/root", "/boot", "/usr", "/var", "/dev", "/proc", "/sys", "/var/run/docker.sock", "/run/docker.sock")


def _host_access(ctx: Ctx, words: list[Word]) -> None:
    """``docker run`` options (up to the image) that hand the container the host: privileged,
    the host's PID namespace, all or admin capabilities, or a bind mount of ``/``, a system
    tree, the home directory or the container runtime's socket."""
    found: list[str] = []
    j = 0
    while j < len(words) and words[j].text.startswith("-"):
        text = words[j].text
        option, _, glued = text.partition("=")
        value = glued or (words[j + 1].text if j + 1 < len(words) else "")
        takes = not glued and option in (
            "-v",
            "--volume",
            "--mount",
            "--pid",
            "--cap-add",
            "--userns",
            "-e",
            "--env",
            "--name",
            "-p",
            "--publish",
            "-w",
            "--workdir",
            "-u",
            "--user",
            "--network",
            "--net",
            "--entrypoint",
            "-l",
            "--label",
        )
        if option.startswith("-v") and len(option) > 2 and not option.startswith("--"):
            option, value, takes = "-v", option[2:], False
        if option == "--privileged":
            found.append("a privileged container (all of the host's devices and capabilities)")
        elif option in ("--pid", "--userns") and value == "host":
            found.append(f"a container in the host's {option[2:]} namespace")
        elif option == "--cap-add" and value.upper() in ("ALL", "SYS_ADMIN", "CAP_SYS_ADMIN"):
            found.append(f"a container with {value} capabilities")
        elif option in ("-v", "--volume", "--mount"):
            source = (
                value.split(":", 1)[0] if option != "--mount" else next((f.split("=", 1)[1] for f in value.split(",") if f.startswith(("source=", "src="))), "")
            )
            source = ctx.analysis.home if source in ("~", "$HOME", "${HOME}") else source.rstrip("/") or "/"
            if source in _HOST_SOURCES or source == ctx.analysis.home:
                found.append(f"a container with the host's {source} mounted")
        j += 2 if takes else 1
    for what in found:
        ctx.analysis.warn("container-host", f"runs {what} ({ctx.name} run)")


PREFIXES: dict[str, Prefix] = {
    "sudo": _sudo,
    "doas": _prefix(frozenset({"-u", "-C"})),
    "pkexec": _prefix(frozenset({"--user"})),
    "run0": _prefix(
        frozenset({"-u", "--user", "-g", "--group", "-D", "--chdir", "--setenv", "--unit", "--description", "--slice", "--nice", "-p", "--property"})
    ),
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
    "strace": _prefix(frozenset({"-e", "-o", "-p", "-s", "-u", "-E", "-a", "-b", "-I", "-O", "-S", "-P", "-X"})),
    "ltrace": _prefix(frozenset({"-e", "-o", "-p", "-s", "-u", "-a", "-n", "-l"})),
    "flock": _prefix(frozenset({"-w", "--timeout", "-E", "--conflict-exit-code"}), positional=1),
    "command": _command,
    "xargs": _xargs,
    "watch": _watch,
    "docker": _container,
    "podman": _container,
    "kubectl": _container,
}
