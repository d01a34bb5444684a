"""The slash commands, one table for every surface: the chat app (``tui``) and the messaging
gateway (``gateway``). Pure: names, aliases, usage, help, where each works, and parsing.

Each surface decides what a command does; this module only says which commands exist there and
what a typed line means (``/reset`` is ``/new``; ``/stop@my_bot`` in a Telegram group is
``/stop``; ``//x`` is the text ``/x``).
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Literal

Surface = Literal["tui", "gateway"]
BOTH: frozenset[Surface] = frozenset({"tui", "gateway"})
TUI: frozenset[Surface] = frozenset({"tui"})
GATEWAY: frozenset[Surface] = frozenset({"gateway"})


@dataclasses.dataclass(frozen=True, slots=True)
class Command:
    name: str
    """Without the slash."""
    usage: str
    help: str
    aliases: tuple[str, ...] = ()
    surfaces: frozenset[Surface] = BOTH


COMMANDS: tuple[Command, ...] = (
    Command("new", "/new", "start a new session", aliases=("reset",)),
    Command("resume", "/resume <id|title>", "continue an earlier session (its transcript is shown)", surfaces=TUI),
    Command("sessions", "/sessions [words]", "search the sessions and pick one to resume", surfaces=TUI),
    Command("model", "/model [name]", "show the model, or switch this session to another"),
    Command("tools", "/tools", "list the tools the agent may call", surfaces=TUI),
    Command("cron", "/cron", "the scheduled jobs of the server (hermes serve)", surfaces=TUI),
    Command("stop", "/stop", "cancel the running turn (also Esc or Ctrl+C)"),
    Command("retry", "/retry", "send your last message again"),
    Command("undo", "/undo", "take back the last exchange (your message returns to the prompt)"),
    Command("compress", "/compress [topic]", "summarise the conversation's middle now, keeping the topic in detail"),
    Command("usage", "/usage", "tokens used by the last turn and by the session"),
    Command("approve", "/approve", "run the command the agent waits to run", surfaces=GATEWAY),
    Command("deny", "/deny", "refuse the command the agent waits to run", surfaces=GATEWAY),
    Command("tree", "/tree", "the live supervision tree", surfaces=TUI),
    Command("reload", "/reload", "read config.yaml again and apply what may change while running", surfaces=TUI),
    Command("help", "/help", "this list, and the keys"),
    Command("quit", "/quit", "leave (also Ctrl+C twice, or Ctrl+Q)", aliases=("exit", "q"), surfaces=TUI),
)

GATEWAY_HELP = {
    "stop": "cancel the running turn and drop what waits",
    "undo": "take back the last exchange",
    "help": "this list",
    "new": "start a new session for this chat (the old one is kept in the store)",
}
"""Help lines that differ in a chat app (no keys, no prompt to edit)."""


def on(surface: Surface) -> tuple[Command, ...]:
    """The commands of ``surface``, in the table's order."""
    return tuple(c for c in COMMANDS if surface in c.surfaces)


def names(surface: Surface) -> tuple[str, ...]:
    return tuple(c.name for c in on(surface))


def lookup(name: str, surface: Surface) -> Command | None:
    """The command ``name`` (or an alias of it) means on ``surface``, or None."""
    wanted = name.lower()
    for command in on(surface):
        if wanted == command.name or wanted in command.aliases:
            return command
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Parsed:
    name: str
    """As typed, lower case, without the slash (and without a ``@bot`` suffix)."""
    argument: str


def parse(text: str) -> Parsed | None:
    """``/name argument`` as a command; None for a message (``//x`` sends ``/x`` as text)."""
    stripped = text.strip()
    if not stripped.startswith("/") or stripped.startswith("//") or stripped == "/":
        return None
    head, _, argument = stripped[1:].partition(" ")
    if "\n" in head:
        head, _, rest = head.partition("\n")
        argument = f"{rest} {argument}".strip()
    name = head.split("@", 1)[0]  # /stop@my_bot in a group
    return Parsed(name=name.lower(), argument=argument.strip())


def did_you_mean(name: str, surface: Surface) -> str:
    """The answer to an unknown command, with the closest known one when there is one."""
    close = difflib.get_close_matches(name, names(surface), n=1, cutoff=0.5)
    hint = f" Did you mean /{close[0]}?" if close else ""
    return f"unknown command /{name}.{hint} /help lists the commands."


def help_lines(surface: Surface) -> list[str]:
    """One line per command: usage (with aliases), then what it does."""
    commands = on(surface)
    overrides = GATEWAY_HELP if surface == "gateway" else {}

    def usage(c: Command) -> str:
        aliases = "".join(f", /{a}" for a in c.aliases if surface == "gateway")
        return f"{c.usage}{aliases}"

    width = max(len(usage(c)) for c in commands)
    return [f"{usage(c):<{width}}  {overrides.get(c.name, c.help)}" for c in commands]
