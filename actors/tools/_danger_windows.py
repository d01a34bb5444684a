"""Rules for other shells' destructive commands a model may emit: ``cmd /c``, PowerShell, ``del /s``, ``rd /s``, ``format C:``.

The terminal runs bash, so most of these fail here; a model that writes them meant them,
and the same model may be pointed at a machine where they work (``ssh winhost ...``,
WSL interop). ``cmd /c TEXT`` is judged as TEXT read by the bash reader (close enough for
command names and ``/s`` switches); PowerShell text is searched for its destructive cmdlets.
"""

from __future__ import annotations

import re

from ._danger_scan import Ctx, Rule

_DRIVE = re.compile(r"[A-Za-z]:\\?")
_PS_DELETERS = frozenset({"remove-item", "rm", "ri", "del", "erase", "rd", "rmdir"})
_PS_FORMAT = re.compile(r"\b(?:format-volume|clear-disk|initialize-disk|remove-partition)\b", re.IGNORECASE)
_PS_SHUTDOWN = re.compile(r"\b(?:stop-computer|restart-computer)\b", re.IGNORECASE)
_PS_RUN = re.compile(r"\b(?:iex|invoke-expression)\b", re.IGNORECASE)
_PS_FETCH = re.compile(r"\b(?:iwr|irm|invoke-webrequest|invoke-restmethod|downloadstring|downloadfile|net\.webclient|curl|wget)\b", re.IGNORECASE)
_PS_WITH_ARG = frozenset(
    {
        "-executionpolicy",
        "-ep",
        "-ex",
        "-windowstyle",
        "-w",
        "-inputformat",
        "-outputformat",
        "-version",
        "-configurationname",
        "-workingdirectory",
        "-wd",
        "-settingsfile",
    }
)


def _switch(args: list[str], letter: str) -> bool:
    return any(a.lower() == f"/{letter}" for a in args)


def _del(ctx: Ctx) -> None:
    texts = [w.text for w in ctx.args]
    if _switch(texts, "s"):
        ctx.analysis.warn("windows-delete", f"deletes files in every subdirectory ({ctx.name} /s)")


def rd(ctx: Ctx) -> bool:
    """``rd /s`` / ``rmdir /s``: True when it was the Windows recursive form."""
    if _switch([w.text for w in ctx.args], "s"):
        ctx.analysis.warn("windows-delete", f"deletes a directory tree ({ctx.name} /s)")
        return True
    return False


def _rd(ctx: Ctx) -> None:
    rd(ctx)


def _format(ctx: Ctx) -> None:
    if any(_DRIVE.fullmatch(w.text) for w in ctx.args):
        ctx.analysis.warn("windows-format", f"formats a drive, erasing it (format {ctx.args[0].text})")


def _cmd(ctx: Ctx) -> None:
    for j, word in enumerate(ctx.args):
        if word.text.lower() in ("/c", "/k", "/r"):
            ctx.analysis.text(" ".join(w.text for w in ctx.args[j + 1 :]), ctx.depth + 1)
            return


def powershell_text(ctx: Ctx, text: str) -> None:
    for statement in re.split(r"[;|\n]|&&|\|\|", text):
        words = statement.split()
        if not words:
            continue
        name = words[0].strip("('\"&").lower()
        switches = [w.lower() for w in words[1:] if w.startswith("-")]
        if name in _PS_DELETERS and any(len(s) > 2 and "-recurse".startswith(s) for s in switches):
            ctx.analysis.warn("windows-delete", f"deletes a directory tree ({words[0]} -Recurse)")
    if _PS_FORMAT.search(text):
        ctx.analysis.warn("windows-format", "formats or wipes a disk (Format-Volume / Clear-Disk)")
    if _PS_SHUTDOWN.search(text):
        ctx.analysis.block("shutdown", "stops or restarts the machine (Stop-Computer / Restart-Computer)")
    if _PS_RUN.search(text) and _PS_FETCH.search(text):
        ctx.analysis.warn("pipe-to-shell", "runs a downloaded script (iex (iwr ...))")


def _powershell(ctx: Ctx) -> None:
    args = ctx.args
    j = 0
    while j < len(args):
        option = args[j].text.lower()
        if (option.startswith("-e") and "-encodedcommand".startswith(option)) or option == "-ec":
            ctx.analysis.warn("dynamic-shell", "runs base64-encoded PowerShell that cannot be read (-EncodedCommand)")
            return
        if len(option) > 1 and "-command".startswith(option):
            break
        if len(option) > 1 and "-file".startswith(option):
            return
        if not option.startswith("-"):
            j -= 1
            break
        j += 2 if option in _PS_WITH_ARG else 1
    powershell_text(ctx, " ".join(w.text for w in args[j + 1 :]))


def _cmdlet(ctx: Ctx) -> None:
    """A PowerShell cmdlet typed at the shell (``Remove-Item -Recurse -Force x``)."""
    powershell_text(ctx, " ".join([ctx.head.text] + [w.text for w in ctx.args]))


WINDOWS_RULES: dict[str, Rule] = {
    "cmd": _cmd,
    "cmd.exe": _cmd,
    "del": _del,
    "erase": _del,
    "rd": _rd,
    "format": _format,
    "powershell": _powershell,
    "powershell.exe": _powershell,
    "pwsh": _powershell,
    "pwsh.exe": _powershell,
    "remove-item": _cmdlet,
    "format-volume": _cmdlet,
    "clear-disk": _cmdlet,
    "stop-computer": _cmdlet,
    "restart-computer": _cmdlet,
    "iex": _cmdlet,
    "invoke-expression": _cmdlet,
}
