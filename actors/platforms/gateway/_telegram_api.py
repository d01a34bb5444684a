"""The Telegram Bot API as this gateway uses it: ``getMe``, ``getUpdates`` (long polling with
offsets), ``sendMessage``, ``editMessageText``, ``sendPhoto`` / ``sendDocument`` (multipart),
``getFile`` and the file download. Parsing is pure; calls are coroutines for the reactor.

Every answer is ``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code": N,
"description": "...", "parameters": {"retry_after": S}}``; a failure becomes
:class:`CallFailed` (status 0 for a transport error).
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from protocols import ChatType, PlatformFile, PlatformMessage

from ._retry import CallFailed


def parse_answer(status: int, body: bytes) -> Any:
    """``result`` of a Bot API answer, or :class:`CallFailed`."""
    try:
        data = json.loads(body)
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


async def upload(
    client: httpx.AsyncClient, base_url: str, token: str, method: str, fields: dict[str, Any], field: str, name: str, data: bytes, *, timeout: float
) -> Any:
    """``sendPhoto`` / ``sendDocument``: ``multipart/form-data`` with the file as ``field``."""
    url = f"{base_url.rstrip('/')}/bot{token}/{method}"
    form = {k: v if isinstance(v, str) else json.dumps(v) for k, v in fields.items()}
    try:
        response = await client.post(url, data=form, files={field: (name, data)}, timeout=timeout)
    except httpx.HTTPError as exc:
        raise CallFailed(0, f"{method}: {type(exc).__name__}: {exc}".replace(token, "<token>")) from None
    return parse_answer(response.status_code, response.content)


async def download(client: httpx.AsyncClient, base_url: str, token: str, file_id: str, *, limit: int, timeout: float) -> tuple[str, bytes]:
    """``getFile``, then the file from ``<base>/file/bot<token>/<file_path>``: ``(file_path, bytes)``;
    a file over ``limit`` bytes is refused (before and while it downloads)."""
    found = await call(client, base_url, token, "getFile", {"file_id": file_id}, timeout=timeout)
    path = str((found or {}).get("file_path") or "")
    if not path:
        raise CallFailed(400, "getFile gave no file_path (the file may be too big for a bot to download)")
    if int((found or {}).get("file_size") or 0) > limit:
        raise CallFailed(413, f"the file is over {limit // (1024 * 1024)} MB")
    url = f"{base_url.rstrip('/')}/file/bot{token}/{path}"
    try:
        async with client.stream("GET", url, timeout=timeout) as response:
            if response.status_code != 200:
                raise CallFailed(response.status_code, f"the file download answered HTTP {response.status_code}")
            data = bytearray()
            async for block in response.aiter_bytes():
                data += block
                if len(data) > limit:
                    raise CallFailed(413, f"the file is over {limit // (1024 * 1024)} MB")
    except httpx.HTTPError as exc:
        raise CallFailed(0, f"file download: {type(exc).__name__}: {exc}".replace(token, "<token>")) from None
    return path, bytes(data)


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
    text = message.get("text") or message.get("caption") or ""
    chat = message.get("chat") or {}
    sender = message.get("from") or {}
    files = _files(message)
    if not isinstance(text, str) or (not text and not files) or "id" not in chat or "message_id" not in message:
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
        files=files,
    )


def _files(message: dict[str, Any]) -> tuple[PlatformFile, ...]:
    """A photo (the largest of its sizes) and a document, as the message announces them."""
    files: list[PlatformFile] = []
    sizes = [p for p in message.get("photo") or () if isinstance(p, dict) and p.get("file_id")]
    if sizes:
        largest = max(sizes, key=lambda p: (int(p.get("width", 0)) * int(p.get("height", 0)), int(p.get("file_size", 0))))
        files.append(PlatformFile(kind="image", file_id=str(largest["file_id"]), size=int(largest.get("file_size") or 0), mime="image/jpeg"))
    document = message.get("document")
    if isinstance(document, dict) and document.get("file_id"):
        files.append(
            PlatformFile(
                kind="file",
                file_id=str(document["file_id"]),
                name=str(document.get("file_name") or ""),
                size=int(document.get("file_size") or 0),
                mime=str(document.get("mime_type") or ""),
            )
        )
    return tuple(files)


def unparsable(failure: CallFailed) -> bool:
    """Telegram refused the formatting (``400 Bad Request: can't parse entities: ...``)."""
    return failure.status == 400 and "can't parse entities" in failure.description.lower()


def not_modified(failure: CallFailed) -> bool:
    """An edit to the text the message already has (``400 Bad Request: message is not modified``): done."""
    return failure.status == 400 and "message is not modified" in failure.description.lower()


def _chat_id(message: PlatformMessage) -> int | str:
    return int(message.chat_id) if message.chat_id.lstrip("-").isdigit() else message.chat_id


def edit_payload(message: PlatformMessage, message_id: str, text: str, *, parse_mode: str = "") -> dict[str, Any]:
    payload: dict[str, Any] = {"chat_id": _chat_id(message), "message_id": int(message_id), "text": text}
    if parse_mode:
        payload["parse_mode"] = parse_mode
    return payload


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
