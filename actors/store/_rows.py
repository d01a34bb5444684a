"""Rows of ``messages``, ``sessions`` and ``turns`` to and from the typed records.

``tool_calls`` is stored as JSON in the OpenAI shape
``[{"id": ..., "type": "function", "function": {"name": ..., "arguments": "..."}}]``,
which is what Hermes stores and what the chat completions API takes back.
"""

from __future__ import annotations

from typing import Any

import msgspec

from protocols._store import SessionRecord, StoredMessage, TurnRecord
from protocols._transcript import ChatMessage, Role, ToolCall


class _Function(msgspec.Struct, kw_only=True):
    name: str = ""
    arguments: Any = ""
    """A JSON object as text (OpenAI); tolerated as an object when another writer stored one."""


class _OpenAIToolCall(msgspec.Struct, kw_only=True):
    id: str = ""
    type: str = "function"
    function: _Function = msgspec.field(default_factory=_Function)


_encode = msgspec.json.Encoder().encode
_decode_calls = msgspec.json.Decoder(list[_OpenAIToolCall]).decode
_decode_object = msgspec.json.Decoder(dict[str, Any]).decode

MESSAGE_COLUMNS = "session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, token_count, finish_reason, reasoning, images, reasoning_details"
INSERT_MESSAGE = f"INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
SELECT_MESSAGE = f"SELECT id, {MESSAGE_COLUMNS} FROM messages"
LIVE_START = "(SELECT coalesce(max(first_message_id), 0) FROM segments WHERE session_id = ?)"
"""The id of the newest segment's first message (0: never compressed); takes the session id."""
SEGMENT_COLUMNS = "session_id, segment, first_message_id, reason, started_at, summary, tokens_before, tokens_after, summarised"
SEGMENT_FIELDS = tuple(SEGMENT_COLUMNS.split(", "))

MessageRow = tuple[str, str, str | None, str | None, str | None, str | None, float, int | None, str | None, str | None, str | None, str | None]
_decode_images = msgspec.json.Decoder(tuple[str, ...]).decode


def encode_tool_calls(calls: tuple[ToolCall, ...]) -> str | None:
    """The ``tool_calls`` column for ``calls`` (None when there are none)."""
    if not calls:
        return None
    shaped = [_OpenAIToolCall(id=c.id, function=_Function(name=c.name, arguments=c.arguments)) for c in calls]
    return _encode(shaped).decode()


def decode_tool_calls(text: str | None) -> tuple[ToolCall, ...]:
    """The calls stored in a ``tool_calls`` column.

    Raises:
        msgspec.DecodeError, msgspec.ValidationError: the column is not OpenAI-shaped JSON.
    """
    if not text:
        return ()
    calls = []
    for call in _decode_calls(text):
        arguments = call.function.arguments
        if not isinstance(arguments, str):
            arguments = _encode(arguments).decode()
        calls.append(ToolCall(id=call.id, name=call.function.name, arguments=arguments))
    return tuple(calls)


def message_row(session_id: str, message: ChatMessage, timestamp: float, token_count: int | None) -> MessageRow:
    """The ``messages`` row for one transcript entry (in ``MESSAGE_COLUMNS`` order)."""
    return (
        session_id,
        message.role,
        message.content,
        message.tool_call_id,
        encode_tool_calls(message.tool_calls),
        message.name,
        timestamp,
        token_count,
        message.finish_reason,
        message.reasoning,
        _encode(message.images).decode() if message.images else None,
        message.reasoning_details,
    )


def stored_message(row: tuple[Any, ...]) -> StoredMessage:
    """Rebuild a :class:`StoredMessage` from ``SELECT_MESSAGE``'s row."""
    (id_, session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, token_count, finish, reasoning, images, details) = row
    role_: Role = role
    message = ChatMessage(
        role=role_,
        content=content,
        tool_calls=decode_tool_calls(tool_calls),
        tool_call_id=tool_call_id,
        name=tool_name,
        reasoning=reasoning,
        reasoning_details=details,
        finish_reason=finish,
        images=_decode_images(images) if images else (),
    )
    return StoredMessage(id=int(id_), session_id=session_id, timestamp=float(timestamp), message=message, token_count=token_count)


SESSION_COLUMNS = (
    "id, source, user_id, model, model_config, system_prompt, parent_session_id, started_at, ended_at, end_reason, "
    "message_count, tool_call_count, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, "
    "reasoning_tokens, title"
)


TURN_COLUMNS = "session_id, turn_id, status, reason, started_at, ended_at"


def turn_record(row: tuple[Any, ...]) -> TurnRecord:
    """Rebuild a :class:`TurnRecord` from a row of ``TURN_COLUMNS``."""
    session_id, turn_id, status, reason, started_at, ended_at = row
    return TurnRecord(
        session_id=session_id,
        turn_id=turn_id,
        status=status,
        reason=reason or "",
        started_at=None if started_at is None else float(started_at),
        ended_at=None if ended_at is None else float(ended_at),
    )


def encode_model_config(config: dict[str, Any] | None) -> str | None:
    return None if config is None else _encode(config).decode()


def session_record(row: tuple[Any, ...]) -> SessionRecord:
    """Rebuild a :class:`SessionRecord` from a row of ``SESSION_COLUMNS``."""
    names = SESSION_COLUMNS.split(", ")
    values = dict(zip(names, row, strict=True))
    config = values.pop("model_config")
    for counter in names[10:17]:
        values[counter] = int(values[counter] or 0)
    values["started_at"] = float(values["started_at"] or 0.0)
    return SessionRecord(model_config=_decode_config(config), **values)


def _decode_config(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        return _decode_object(text)
    except msgspec.DecodeError:
        # Not a JSON object (written by another tool): keep it visible rather than drop it.
        return {"raw": text}
