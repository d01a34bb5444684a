"""Slash commands: the table, parsing, completion, and "did you mean".

Pure functions over text; the app decides what each command does.
"""

from __future__ import annotations

import dataclasses
import difflib
import os


@dataclasses.dataclass(frozen=True, slots=True)
class Command:
    name: str
    """Without the slash."""
    usage: str
    help: str


COMMANDS: tuple[Command, ...] = (
    Command("new", "/new", "start a new session"),
    Command("resume", "/resume <id|title>", "continue an earlier session (its transcript is shown)"),
    Command("sessions", "/sessions [words]", "search the sessions and pick one to resume"),
    Command("model", "/model [name]", "show the model, or switch this session to another"),
    Command("tools", "/tools", "list the tools the agent may call"),
    Command("cron", "/cron", "the scheduled jobs of the server (hermes serve)"),
    Command("stop", "/stop", "cancel the running turn (also Esc or Ctrl+C)"),
    Command("retry", "/retry", "send your last message again"),
    Command("undo", "/undo", "take back the last exchange (your message returns to the prompt)"),
    Command("compress", "/compress [topic]", "summarise the conversation's middle now, keeping the topic in detail"),
    Command("usage", "/usage", "tokens used by the last turn and by the session"),
    Command("tree", "/tree", "the live supervision tree"),
    Command("reload", "/reload", "read config.yaml again and apply what may change while running"),
    Command("help", "/help", "this list, and the keys"),
    Command("quit", "/quit", "leave (also Ctrl+C twice, or Ctrl+Q)"),
)
NAMES: tuple[str, ...] = tuple(c.name for c in COMMANDS)

KEYS_HELP = (
    "Enter sends; Ctrl+J (or a line ending in \\) starts a new line; Up/Down walk the history; "
    "Tab completes a command; Esc or Ctrl+C cancels the running turn; Ctrl+C twice at an idle prompt quits."
)


@dataclasses.dataclass(frozen=True, slots=True)
class Parsed:
    name: str
    argument: str


def parse(text: str) -> Parsed | None:
    """``/name argument`` as a command; None for a message (``//x`` sends ``/x`` as text)."""
    stripped = text.strip()
    if not stripped.startswith("/") or stripped.startswith("//") or stripped == "/":
        return None
    name, _, argument = stripped[1:].partition(" ")
    return Parsed(name=name.lower(), argument=argument.strip())


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
    close = difflib.get_close_matches(name, NAMES, n=1, cutoff=0.5)
    hint = f" Did you mean /{close[0]}?" if close else ""
    return f"unknown command /{name}.{hint} /help lists the commands."


def help_text() -> str:
    width = max(len(c.usage) for c in COMMANDS)
    lines = [f"{c.usage:<{width}}  {c.help}" for c in COMMANDS]
    return "\n".join([*lines, "", KEYS_HELP])
