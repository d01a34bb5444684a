"""Rules for what a command sends over the network: a shell handed to a peer, secrets uploaded.

Two findings, both needing approval:

- ``reverse-shell``: a shell (or any program) wired to a network connection, the usual end
  of a prompt injection: ``nc -e /bin/sh``, ``ncat --exec``, ``socat ... exec:``, a shell
  whose descriptors are redirected to ``/dev/tcp/...``, a shell piped to or from ``nc``, or
  inline interpreter code that connects a socket and hands it a shell or ``dup2``.
- ``send-secrets``: a credential file (SSH and GPG keys, cloud and tool credentials, ``.env``
  files, anything under the agent's own home) sent off the machine: ``curl -d @file``,
  ``-F x=@file``, ``-T file``, ``wget --post-file``, ``scp``/``rsync`` to a remote host, or
  piped or redirected into a network client.

What counts as a secret is what ``_danger_paths.sensitive_file`` protects from changes, less
shell start-up files (not secret), plus ``/etc/shadow``, any directory holding the agent's
home (``~``, ``/``), and the environment (``env``, ``printenv``, ``/proc/self/environ``).
"""

from __future__ import annotations

import re

from ._danger_paths import sensitive_file
from ._danger_scan import Analysis, Ctx, Rule, command_name, head_name, positionals
from ._danger_shell import Command, Word

NETCATS = frozenset({"nc", "ncat", "netcat", "nc.traditional", "nc.openbsd", "telnet"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish", "yash", "rbash", "csh", "tcsh"})
_READERS = frozenset(
    {"cat", "tac", "head", "tail", "base64", "base32", "xxd", "od", "gzip", "bzip2", "xz", "zstd", "tar", "zip", "gpg", "openssl", "less", "more"}
)
"""Programs whose output is (a form of) the files they are given."""
_ENV_DUMPERS = frozenset({"env", "printenv", "set", "declare", "typeset"})
"""Without operands these print every variable (``env``, ``printenv``; ``set`` also functions)."""
_EXEC_OPTIONS = frozenset({"-e", "-c", "--exec", "--sh-exec", "--lua-exec"})
_ENVIRON = re.compile(r"^/proc/(?:self|\d+|\*)/environ$")
_SOCAT_RUNS = re.compile(r"^(?:exec|system)[:,]", re.IGNORECASE)
_SOCAT_FILE = re.compile(r"^(?:file|open|gopen|create)?:?(/[^,]+)", re.IGNORECASE)
_CODE_SOCKET = re.compile(
    r"socket\s*\.\s*socket|\buse\s+Socket\b|\bsocket\s*\(\s*\w+\s*,\s*(?:PF|AF)_INET|socket\.create_connection|TCPSocket|fsockopen|net\.(?:connect|createConnection)|IO::Socket|new\s+Socket"
)
_CODE_SHELL = re.compile(r"dup2|pty\.spawn|/bin/(?:ba|z|da)?sh\b|\bcmd\.exe\b|spawn\s*\(\s*['\"](?:/bin/)?(?:ba)?sh")
_CURL_DATA = frozenset({"-d", "--data", "--data-binary", "--data-ascii", "--data-urlencode", "--json"})
_CURL_FORM = frozenset({"-F", "--form"})
_CURL_UPLOAD = frozenset({"-T", "--upload-file"})
_SCP_WITH_ARG = frozenset({"-c", "-F", "-i", "-J", "-l", "-o", "-P", "-S", "-D", "-X"})
_RSYNC_WITH_ARG = frozenset({"-e", "--rsh", "-f", "--filter", "--exclude", "--include", "--files-from", "-T", "--temp-dir", "--port", "--password-file"})


def _secret(analysis: Analysis, word: Word) -> str | None:
    """The path ``word`` names as a person reads it, when it is a secret; else None."""
    paths = analysis.resolve(word)
    for path in paths if paths is not None else ():
        if path in ("/etc/shadow", "/etc/gshadow") or _ENVIRON.match(path):
            return path
        if path in ("/", analysis.home) or analysis.hermes_home.startswith(path + "/"):
            return analysis.show(path) + " (it holds the agent's keys)"
        hit = sensitive_file(path, analysis.home, analysis.hermes_home)
        if hit is not None and hit[0] != "write-startup":
            return analysis.show(path)
    return None


def _redirected_secrets(analysis: Analysis, command: Command) -> list[str]:
    """Secret files on ``command``'s ``<`` input."""
    return [s for r in command.redirects if r.op == "<" for s in [_secret(analysis, r.target)] if s]


def _read_secrets(analysis: Analysis, command: Command) -> list[str]:
    """Secrets ``command`` puts on its output: a reader's files, its ``<`` input, or the environment."""
    found = _redirected_secrets(analysis, command)
    name = head_name(command) or (command_name(command.words[0]) if command.words else "")  # a bare ``env`` is its own head
    if name in _READERS:
        found += [s for w in positionals(command.words[1:]) for s in [_secret(analysis, w)] if s]
    if (name in _ENV_DUMPERS and not positionals(command.words[1:])) or (name == "export" and "-p" in [w.text for w in command.words]):
        found.append("the environment (its tokens and keys)")
    return found


def _piped_secrets(ctx: Ctx) -> list[str]:
    """Secrets reaching this command's stdin: from a ``<`` redirect or an earlier reader in the pipeline."""
    return _redirected_secrets(ctx.analysis, ctx.command) + ctx.upstream.gathered("secrets", lambda earlier: _read_secrets(ctx.analysis, earlier))


def _sends(ctx: Ctx, secrets: list[str]) -> None:
    if secrets:
        ctx.analysis.warn("send-secrets", f"sends {secrets[0]}, a secret, over the network ({ctx.name})")


def _option_values(args: list[Word], names: frozenset[str]) -> list[str]:
    """The values of ``names`` (``-d VALUE``, ``--data=VALUE``, ``-dVALUE``)."""
    out = []
    for j, word in enumerate(args):
        text = word.text
        if text in names and j + 1 < len(args):
            out.append(args[j + 1].text)
        elif text.startswith("--") and text.split("=", 1)[0] in names and "=" in text:
            out.append(text.split("=", 1)[1])
        elif not text.startswith("--") and len(text) > 2 and text[:2] in names:
            out.append(text[2:])
    return out


def _file_of(value: str, form: bool) -> str | None:
    """The file a curl value sends: ``@file`` (data), ``name@file`` (urlencode), ``name=@file`` / ``name=<file`` (form)."""
    if form:
        _, _, rest = value.partition("=")
        return rest[1:].split(";", 1)[0] if rest[:1] in ("@", "<") else None
    at = value.find("@")
    return value[at + 1 :] if at >= 0 and "=" not in value[:at] else None


def _curl(ctx: Ctx) -> None:
    files = [f for v in _option_values(ctx.args, _CURL_DATA) for f in [_file_of(v, False)] if f]
    files += [f for v in _option_values(ctx.args, _CURL_FORM) for f in [_file_of(v, True)] if f]
    files += _option_values(ctx.args, _CURL_UPLOAD)
    secrets = [s for f in files if f not in ("-", ".") for s in [_secret(ctx.analysis, Word(f))] if s]
    if any(f in ("-", ".") for f in files):
        secrets += _piped_secrets(ctx)
    _sends(ctx, secrets)


def _wget(ctx: Ctx) -> None:
    files = _option_values(ctx.args, frozenset({"--post-file", "--body-file"}))
    _sends(ctx, [s for f in files for s in [_secret(ctx.analysis, Word(f))] if s])


def _netcat(ctx: Ctx) -> None:
    if any(w.text in _EXEC_OPTIONS or w.text.startswith(("--exec=", "--sh-exec=")) for w in ctx.args):
        ctx.analysis.warn("reverse-shell", f"gives whoever is at the other end a program to drive ({ctx.name} -e)")
        return
    if ctx.upstream.any_named(_SHELLS):
        ctx.analysis.warn("reverse-shell", f"pipes a shell's output to a network peer ({ctx.name})")
    _sends(ctx, _piped_secrets(ctx))


def _socat(ctx: Ctx) -> None:
    texts = [w.text for w in ctx.args if not w.text.startswith("-")]
    if any(_SOCAT_RUNS.match(t) for t in texts):
        ctx.analysis.warn("reverse-shell", "connects a program's input and output to an address (socat exec:)")
    secrets = [s for t in texts for m in [_SOCAT_FILE.match(t)] if m for s in [_secret(ctx.analysis, Word(m.group(1)))] if s]
    _sends(ctx, secrets)


def _remote_copy(with_arg: frozenset[str]) -> Rule:
    """``scp``/``rsync``/``sftp``: a secret among the sources of a copy to ``host:path``."""

    def rule(ctx: Ctx) -> None:
        plain = positionals(ctx.args, with_arg)
        if len(plain) < 2 or not _remote(plain[-1].text):
            return
        _sends(ctx, [s for w in plain[:-1] if not _remote(w.text) for s in [_secret(ctx.analysis, w)] if s])

    return rule


def _remote(text: str) -> bool:
    head = text.split("/", 1)[0]
    return (":" in head and not text.startswith(("/", "./", "~"))) or text.startswith(("scp://", "rsync://", "sftp://"))


def shell_into(ctx: Ctx) -> None:
    """A shell fed by a network client (``nc host 1 | sh``) runs what the peer sends."""
    if ctx.upstream.any_named(NETCATS):
        ctx.analysis.warn("reverse-shell", f"runs what a network peer sends ({ctx.name} fed by a network client)")


def socket_redirects(analysis: Analysis, command: Command, targets: list[Word]) -> None:
    """``command`` has redirects to ``/dev/tcp``/``/dev/udp`` (``targets``): judge what it connects."""
    name = head_name(command)
    if name in _SHELLS or name == "exec" or (command.words and command.words[0].text == "exec"):
        analysis.warn("reverse-shell", f"connects a shell to a network address ({targets[0].text})")
        return
    secrets = _read_secrets(analysis, command)
    if secrets:
        analysis.warn("send-secrets", f"sends {secrets[0]}, a secret, over the network ({targets[0].text})")


def code_opens_shell(analysis: Analysis, name: str, code: str) -> None:
    """Inline interpreter code that opens a socket and hands it a shell (the classic one-liners)."""
    if _CODE_SOCKET.search(code) and _CODE_SHELL.search(code):
        analysis.warn("reverse-shell", f"code run by {name} connects a socket to a shell")


NETWORK_RULES: dict[str, Rule] = {
    **{name: _netcat for name in NETCATS},
    "socat": _socat,
    "scp": _remote_copy(_SCP_WITH_ARG),
    "sftp": _remote_copy(_SCP_WITH_ARG),
}
"""Rules of their own; ``curl``, ``wget`` and ``rsync`` add :data:`SENDERS` to their existing rule."""
SENDERS: dict[str, Rule] = {"curl": _curl, "wget": _wget, "rsync": _remote_copy(_RSYNC_WITH_ARG)}
