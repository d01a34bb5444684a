"""Slash commands: the table, parsing, completion, and "did you mean".

Pure functions over text; the app decides what each command does.
"""

from __future__ import annotations

import os

from actors.platforms._slash_commands import Command, Parsed, lookup, on, parse
from actors.platforms._slash_commands import did_you_mean as _did_you_mean
from actors.platforms._slash_commands import help_lines as _help_lines

COMMANDS: tuple[Command, ...] = on("tui")
"""The chat app's commands: the shared table's (``actors/platforms/_slash_commands.py``)."""
NAMES: tuple[str, ...] = tuple(c.name for c in COMMANDS)

KEYS_HELP = (
    "Enter sends; Ctrl+J (or a line ending in \\) starts a new line; Up/Down walk the history; "
    "Tab completes a command; Esc or Ctrl+C cancels the running turn; Ctrl+C twice at an idle prompt quits."
)


def matching(prefix: str) -> list[Command]:
    """Commands whose name starts with what was typed after the slash (before any argument)."""
    if not prefix.startswith("/") or " " in prefix or "\n" in prefix:
        return []
    typed = prefix[1:].lower()
    return [c for c in COMMANDS if c.name.startswith(typed)]


def complete(text: str) -> str | None:
    """What Tab turns ``text`` into: the command when one matches, else the matches' common prefix."""
    found = matching(text)
    if not found:
        return None
    if len(found) == 1:
        return f"/{found[0].name} "
    common = os.path.commonprefix([c.name for c in found])
    return f"/{common}" if len(common) > len(text) - 1 else None


def did_you_mean(name: str) -> str:
    """The message for an unknown command, with the closest known one when there is one."""
    return _did_you_mean(name, "tui")


def canonical(name: str) -> str:
    """The command an alias stands for (``reset`` -> ``new``, ``q`` -> ``quit``), else ``name``."""
    command = lookup(name, "tui")
    return command.name if command is not None else name


def help_text() -> str:
    return "\n".join([*_help_lines("tui"), "", KEYS_HELP])


__all__ = ["COMMANDS", "KEYS_HELP", "NAMES", "Command", "Parsed", "canonical", "complete", "did_you_mean", "help_text", "matching", "parse"]
