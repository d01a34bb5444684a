"""What a slash command typed in a chat means, pure (the table is ``actors/platforms/_slash_commands.py``).

:func:`decide_command` turns a parsed command into one of: a notice to send back (``/help``,
an unknown command, a command refused while a turn runs), a question for the chat's session
(``/undo``, ``/retry``, ``/model``, ``/usage``: the adapter asks, then :func:`answer_text`
words the answer), a new session (``/new``, ``/reset``), or a command the adapter already
handles itself (``/stop``, ``/approve``, ``/deny``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from actors.platforms._slash_commands import Parsed, did_you_mean, help_lines, lookup
from protocols import ApprovalRequested, ContextCompressed, ModelSwitched, SessionRecord, TurnCancelled, TurnCompleted, TurnFailed, TurnRejected, TurnUndone


@dataclasses.dataclass(frozen=True)
class Notice:
    text: str


@dataclasses.dataclass(frozen=True)
class AskSession:
    what: Literal["undo", "retry", "model", "usage", "compress"]
    argument: str = ""


@dataclasses.dataclass(frozen=True)
class NewSession:
    pass


@dataclasses.dataclass(frozen=True)
class Builtin:
    name: Literal["stop", "approve", "deny"]


CommandDecision = Notice | AskSession | NewSession | Builtin

BUSY = "A turn is running in this chat; /stop it first, then /{name}."


def decide_command(parsed: Parsed, *, running: bool) -> CommandDecision:
    """What ``parsed`` does in a chat whose session runs a turn (``running``) or not."""
    command = lookup(parsed.name, "gateway")
    if command is None:
        elsewhere = lookup(parsed.name, "tui")
        if elsewhere is not None:
            return Notice(f"/{elsewhere.name} works in hermes chat, not in chats; /help lists what works here.")
        return Notice(did_you_mean(parsed.name, "gateway"))
    name = command.name
    if name in ("stop", "approve", "deny"):
        return Builtin(name)  # type: ignore[arg-type]
    if name == "help":
        return Notice("\n".join(["Commands:", *help_lines("gateway")]))
    if name == "new":
        return Notice(BUSY.format(name=parsed.name)) if running else NewSession()
    if name == "usage":
        return AskSession("usage")
    if name == "model":
        if parsed.argument and running:
            return Notice(BUSY.format(name="model"))
        return AskSession("model", parsed.argument)
    if name in ("undo", "retry"):
        return Notice(BUSY.format(name=name)) if running else AskSession(name)  # type: ignore[arg-type]
    if name == "compress":
        return Notice(BUSY.format(name=name)) if running else AskSession("compress", parsed.argument)
    return Notice(f"/{name} is not available in chats; /help lists what is.")  # a gateway command without a case here


def answer_text(what: str, argument: str, answer: Any, session_id: str) -> str:
    """The reply to a question the adapter asked the session (or the store) for a command."""
    if isinstance(answer, str):  # the question failed: why
        return f"/{what} failed: {answer}"
    match what:
        case "undo" | "retry" if isinstance(answer, TurnUndone):
            if answer.error:
                return f"Nothing to {what}: {answer.error}"
            return f"Took back the last exchange ({answer.removed} messages)."
        case "model" if isinstance(answer, ModelSwitched):
            if answer.error:
                return f"The model was not switched: {answer.error}"
            return f"This chat's session calls {answer.model} from its next turn on."
        case "model":
            record = answer if isinstance(answer, SessionRecord) else None
            model = record.model if record is not None and record.model else "the server's default"
            return f"Model: {model}. /model <name> switches this chat's session."
        case "usage":
            return usage_text(answer if isinstance(answer, SessionRecord) else None, session_id)
        case "compress" if isinstance(answer, tuple):
            return compress_text(*answer)
    return f"/{what}: no answer"


def usage_text(record: SessionRecord | None, session_id: str) -> str:
    if record is None:
        return f"Session {session_id}: no turns yet."
    cached = f" ({record.cache_read_tokens} from the prompt cache)" if record.cache_read_tokens else ""
    return (
        f"Session {session_id}: {record.message_count} messages, "
        f"{record.input_tokens} tokens in{cached}, {record.output_tokens} out, {record.tool_call_count} tool calls."
    )


def compress_text(compressed: ContextCompressed | None, end: Any) -> str:
    """The reply to ``/compress``: what the compression's turn did."""
    match end:
        case TurnCompleted() if compressed is not None:
            return (
                f"Compressed the conversation: {compressed.summarised} messages summarised "
                f"(about {compressed.tokens_before} tokens before, {compressed.tokens_after} after)."
            )
        case TurnCompleted(text=text):
            return text or "Nothing was compressed."  # the session says why
        case TurnFailed(error=error):
            return f"The compression failed: {error}; the conversation is unchanged."
        case TurnCancelled(reason=reason) | TurnRejected(reason=reason):
            return f"The compression did not run: {reason}."
    return "The compression did not end in time; it goes on in the session."


def approval_text(request: ApprovalRequested) -> str:
    """What a chat is shown when its turn waits for an approval: the command and why."""
    return f"Approval needed: {request.command}\n({'; '.join(request.reasons)})"
