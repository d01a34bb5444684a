"""Scheduled jobs' answers sent through the gateway's adapters (issue 18).

A running adapter registers a sender in the gateway's shared ``senders`` table (the
scheduler's ``Senders.platforms``) when it starts, and takes it out when it stops, so a job
whose target names a platform with no running adapter is told so. A sender makes one attempt
(the scheduler retries and records): a failure that will not get better (a 4xx other than
429: an unknown chat, a refused token) is a ``DeliveryFailed`` that is not retried.

- ``webhook:<route>``: the answer is POSTed as JSON, signed with the route's secret, to the
  route's ``deliver_url``, its allowed ``MEDIA:`` files base64 in ``attachments``;
- ``telegram:<chat_id>[:<thread_id>]``: ``sendMessage`` piece by piece (4,096 UTF-16 units),
  then each ``MEDIA:`` file with ``sendDocument``.

Senders run in the scheduler's reactor wait and read only their adapter's fixed settings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from actors.scheduler._delivery import DeliveryFailed

from ._chat_files import Attachment, read_attachment
from ._chunks import chunk_text, utf16_units
from ._retry import CallFailed, retry_delay
from ._telegram_api import call, parse_answer
from ._webhook import Route
from ._webhook_auth import sign
from ._webhook_files import attachments

Send = Callable[[str, str, str, tuple[str, ...]], Awaitable[None]]
TIMEOUT = 30.0


def _failed(where: str, failure: CallFailed) -> DeliveryFailed:
    return DeliveryFailed(f"{where}: {failure}", retry=retry_delay(failure, 1) is not None)


def webhook_sender(routes: dict[str, Route], *, workspace: Path, home: Path) -> Send:
    """``MEDIA:`` files as in a chat answer's POST (``_webhook_files``): allowed ones attached, the others' notes in the text."""

    async def send(chat_id: str, thread_id: str, text: str, media: tuple[str, ...]) -> None:
        route = routes.get(chat_id)
        if route is None:
            raise DeliveryFailed(f"the webhook adapter has no route {chat_id!r} (routes: {', '.join(sorted(routes)) or 'none'})", retry=False)
        if not route.deliver_url:
            raise DeliveryFailed(f"webhook route {chat_id!r} has no deliver_url to POST the answer to", retry=False)
        delivery = "cron-" + hashlib.sha256(f"{chat_id}\0{thread_id}\0{text}".encode()).hexdigest()[:16]
        notes, files = await attachments(media, workspace=workspace, home=home)
        fields = {"route": route.name, "delivery_id": delivery, "source": "cron", "text": "\n\n".join(p for p in (text, *notes) if p)}
        body = json.dumps(fields | ({"attachments": files} if files else {})).encode()
        headers = {"content-type": "application/json", "x-webhook-signature": sign(route.secret, body), "x-webhook-id": delivery}
        try:
            async with httpx.AsyncClient() as client:
                response = await client.post(route.deliver_url, content=body, headers=headers, timeout=TIMEOUT)
        except httpx.HTTPError as exc:
            raise _failed(f"webhook route {chat_id!r}", CallFailed(0, f"{type(exc).__name__}: {exc}")) from None
        if response.status_code >= 300:
            raise _failed(f"webhook route {chat_id!r}", CallFailed(response.status_code, response.text[:200] or response.reason_phrase))

    return send


def _chat(chat_id: str) -> int | str:
    return int(chat_id) if chat_id.lstrip("-").isdigit() else chat_id


def telegram_sender(token: str, base_url: str, *, workspace: Path, home: Path) -> Send:
    """``MEDIA:`` files as a chat answer's are: only from the workspace or ``HERMES_HOME/cache``
    (a job's answer is model output: it must not mail out ``.env`` or ``/etc/passwd``); a refused
    or unreadable file is sent as its note."""

    async def send(chat_id: str, thread_id: str, text: str, media: tuple[str, ...]) -> None:
        target: dict[str, Any] = {"chat_id": _chat(chat_id)}
        if thread_id:
            target["message_thread_id"] = int(thread_id) if thread_id.isdigit() else thread_id
        async with httpx.AsyncClient() as client:
            try:
                for piece in chunk_text(text, 4096, utf16_units) if text else []:
                    await call(client, base_url, token, "sendMessage", {**target, "text": piece}, timeout=TIMEOUT)
                for path in media:
                    item = await read_attachment(path, workspace=workspace, home=home)
                    if isinstance(item, str):
                        await call(client, base_url, token, "sendMessage", {**target, "text": item}, timeout=TIMEOUT)
                    else:
                        await _document(client, base_url, token, target, item)
            except CallFailed as failure:
                raise _failed(f"telegram chat {chat_id}", failure) from None

    return send


async def _document(client: httpx.AsyncClient, base_url: str, token: str, target: dict[str, Any], item: Attachment) -> None:
    url = f"{base_url.rstrip('/')}/bot{token}/sendDocument"
    try:
        response = await client.post(url, data={k: str(v) for k, v in target.items()}, files={"document": (item.name, item.data)}, timeout=TIMEOUT)
    except httpx.HTTPError as exc:
        raise CallFailed(0, f"sendDocument: {type(exc).__name__}: {exc}".replace(token, "<token>")) from None
    parse_answer(response.status_code, response.content)
