"""The Telegram Bot API as this gateway uses it: ``getMe``, ``getUpdates`` (long polling with
offsets), ``sendMessage``. Parsing is pure; calls are coroutines for the reactor.

Every answer is ``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code": N,
"description": "...", "parameters": {"retry_after": S}}``; a failure becomes
:class:`CallFailed` (status 0 for a transport error).
"""

from __future__ import annotations

from typing import Any

import httpx

from protocols import ChatType, PlatformMessage

from ._retry import CallFailed


def parse_answer(status: int, body: bytes) -> Any:
    """``result`` of a Bot API answer, or :class:`CallFailed`."""
    try:
        data = httpx.Response(status, content=body).json()
    except ValueError:
        raise CallFailed(status or 502, f"not a Bot API answer: {body[:200]!r}") from None
    if isinstance(data, dict) and data.get("ok") is True:
        return data.get("result")
    if not isinstance(data, dict):
        raise CallFailed(status or 502, "not a Bot API answer")
    parameters = data.get("parameters") or {}
    retry_after = parameters.get("retry_after") if isinstance(parameters, dict) else None
    code = int(data.get("error_code") or status or 502)
    after = float(retry_after) if isinstance(retry_after, int | float) else None
    raise CallFailed(code, str(data.get("description") or "no description"), after)


async def call(client: httpx.AsyncClient, base_url: str, token: str, method: str, payload: dict[str, Any], *, timeout: float) -> Any:
    url = f"{base_url.rstrip('/')}/bot{token}/{method}"
    try:
        response = await client.post(url, json=payload, timeout=timeout)
    except httpx.HTTPError as exc:
        raise CallFailed(0, f"{method}: {type(exc).__name__}: {exc}".replace(token, "<token>")) from None
    return parse_answer(response.status_code, response.content)


CALLBACK_PREFIX = "cb"
"""A button press becomes a message whose id is ``cb<callback query id>`` (answered with
``answerCallbackQuery``) and whose text is the button's ``callback_data``."""


def approval_buttons(request_id: str) -> dict[str, Any]:
    """An inline keyboard (``reply_markup``) answering one approval; ``callback_data`` is at most
    64 bytes, so it names the request by the end of its id."""
    tail = request_id[-40:]
    return {"inline_keyboard": [[{"text": "Approve", "callback_data": f"/approve #{tail}"}, {"text": "Deny", "callback_data": f"/deny #{tail}"}]]}


def _callback(query: dict[str, Any]) -> PlatformMessage | None:
    message = query.get("message") or {}
    chat = message.get("chat") or {}
    sender = query.get("from") or {}
    data = query.get("data")
    if not isinstance(data, str) or "id" not in chat or "id" not in query:
        return None
    kind = chat.get("type", "private")
    chat_type: ChatType = "dm" if kind == "private" else ("channel" if kind == "channel" else "group")
    thread = message.get("message_thread_id") if message.get("is_topic_message") else None
    return PlatformMessage(
        platform="telegram",
        chat_type=chat_type,
        chat_id=str(chat["id"]),
        thread_id=str(thread) if thread is not None else "",
        user_id=str(sender.get("id", "")),
        user_name=str(sender.get("first_name") or sender.get("username") or ""),
        message_id=f"{CALLBACK_PREFIX}{query['id']}",
        text=data,
        reply_to_bot=True,  # a press on the bot's own message
    )


def to_message(update: dict[str, Any], bot_username: str, bot_id: str) -> PlatformMessage | None:
    """An update as a :class:`PlatformMessage`; None for what the gateway does not take (edits,
    channel posts, stickers, ...)."""
    if isinstance(update.get("callback_query"), dict):
        return _callback(update["callback_query"])
    message = update.get("message")
    if not isinstance(message, dict):
        return None
    text = message.get("text") or message.get("caption")
    chat = message.get("chat") or {}
    sender = message.get("from") or {}
    if not isinstance(text, str) or "id" not in chat or "message_id" not in message:
        return None
    kind = chat.get("type", "private")
    chat_type: ChatType = "dm" if kind == "private" else ("channel" if kind == "channel" else "group")
    mention = f"@{bot_username}".lower() if bot_username else ""
    mentioned = bool(mention) and mention in text.lower()
    replied = message.get("reply_to_message") or {}
    reply_to_bot = str((replied.get("from") or {}).get("id", "")) == bot_id and bool(bot_id)
    if mentioned:
        text = text.replace(f"@{bot_username}", "").strip() or text
    thread = message.get("message_thread_id") if message.get("is_topic_message") else None
    name = " ".join(str(sender.get(k)) for k in ("first_name", "last_name") if sender.get(k)) or str(sender.get("username") or "")
    return PlatformMessage(
        platform="telegram",
        chat_type=chat_type,
        chat_id=str(chat["id"]),
        thread_id=str(thread) if thread is not None else "",
        user_id=str(sender.get("id", "")),
        user_name=name,
        message_id=str(message["message_id"]),
        text=text,
        mentioned=mentioned,
        reply_to_bot=reply_to_bot,
    )


def unparsable(failure: CallFailed) -> bool:
    """Telegram refused the formatting (``400 Bad Request: can't parse entities: ...``)."""
    return failure.status == 400 and "can't parse entities" in failure.description.lower()


def send_payload(message: PlatformMessage, text: str, *, first: bool, parse_mode: str = "", markup: dict[str, Any] | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"chat_id": int(message.chat_id) if message.chat_id.lstrip("-").isdigit() else message.chat_id, "text": text}
    if parse_mode:
        payload["parse_mode"] = parse_mode
    if markup is not None:
        payload["reply_markup"] = markup
    if message.thread_id:
        payload["message_thread_id"] = int(message.thread_id)
    if first and message.chat_type != "dm":
        payload["reply_parameters"] = {"message_id": int(message.message_id), "allow_sending_without_reply": True}
    return payload
