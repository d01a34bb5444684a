"""The Matrix client-server API as this gateway uses it (``/_matrix/client/v3``): ``whoami``,
``/sync`` (long poll), ``join``, ``send`` (``m.room.message``, ``m.reaction``). Parsing and
building are pure; calls are coroutines for the reactor.

A failure is ``{"errcode": "M_...", "error": "..."}`` with an HTTP status; a 429
``M_LIMIT_EXCEEDED`` says ``retry_after_ms`` (or a ``Retry-After`` header). Each becomes
:class:`CallFailed` (status 0 for a transport error).

Rooms are chats: a room of two (joined + invited, from the sync ``summary`` when it has one;
Synapse leaves it out of some incremental syncs, so a room of unknown size is counted first)
is a ``dm``, a larger one a ``group``; an
``m.thread`` relation names the thread (its root event). A reaction on one of the bot's
approval prompts becomes the text ``/approve #<request>`` or ``/deny #<request>``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import quote

import httpx

from protocols import PlatformFile, PlatformMessage

from ._matrix_html import to_matrix_html
from ._retry import CallFailed

CLIENT = "/_matrix/client/v3"
SYNC_FILTER = json.dumps(
    {
        "presence": {"types": []},
        "account_data": {"types": []},
        "room": {"state": {"lazy_load_members": True}, "timeline": {"limit": 50}, "ephemeral": {"types": []}, "account_data": {"types": []}},
    },
    separators=(",", ":"),
)
"""Lazy-loaded members: Synapse then sends rooms' member counts (``summary``), mostly."""
MAX_EVENT_BYTES = 60_000
"""Matrix refuses events over 65,536 bytes; past this the HTML is left out (the body goes plain)."""
FILE_TYPES = frozenset({"m.image", "m.file", "m.audio", "m.video"})
APPROVE_KEYS = frozenset({"✅", "✔", "👍"})
DENY_KEYS = frozenset({"❌", "✖", "👎", "🚫"})


def parse_answer(status: int, body: bytes, headers: Mapping[str, str] | None = None) -> Any:
    """The JSON of a 2xx answer, or :class:`CallFailed`."""
    try:
        data = json.loads(body) if body else {}
    except ValueError:
        data = None
    if 200 <= status < 300 and isinstance(data, dict):
        return data
    if not isinstance(data, dict):
        raise CallFailed(status or 502, f"not a Matrix answer: {body[:200]!r}")
    errcode = str(data.get("errcode") or f"HTTP {status}")
    retry = data.get("retry_after_ms")
    after = float(retry) / 1000 if isinstance(retry, int | float) else None
    header = (headers or {}).get("retry-after", "")
    if after is None and header.isdigit():
        after = float(header)
    raise CallFailed(status or 502, f"{errcode}: {data.get('error') or 'no description'}", after)


async def call(
    client: httpx.AsyncClient, homeserver: str, token: str, method: str, path: str, *, body: Any = None, params: dict[str, str] | None = None, timeout: float
) -> Any:
    url = f"{homeserver.rstrip('/')}{CLIENT}{path}"
    try:
        response = await client.request(method, url, json=body, params=params, headers={"authorization": f"Bearer {token}"}, timeout=timeout)
    except httpx.HTTPError as exc:
        raise CallFailed(0, f"{method} {path.split('?')[0]}: {type(exc).__name__}: {exc}".replace(token, "<token>")) from None
    return parse_answer(response.status_code, response.content, response.headers)


def room_path(room_id: str, *rest: str) -> str:
    return "/rooms/" + "/".join(quote(part, safe="") for part in (room_id, *rest))


def txn_id(message: PlatformMessage, index: int, text: str) -> str:
    """The transaction id of one piece of a reply, derived from the message it answers and the
    piece: sent again (a retry, a restarted adapter's outbox), it is the same id, and the
    homeserver answers with the event it already has instead of posting a second one."""
    digest = hashlib.sha256(f"{message.chat_id}\0{message.message_id}\0{index}\0{text}".encode()).hexdigest()
    return f"hermes-{digest[:40]}"


def stream_txn(message: PlatformMessage, turn_id: str, text: str = "") -> str:
    """A streamed event's transaction id: the first message's from the turn alone (a restart
    that streams again before its id was saved posts the same event), an edit's from its text."""
    return txn_id(message, 0, f"stream\0{turn_id}\0{text}")


def edit_content(message: PlatformMessage, event_id: str, piece: str, *, html: bool) -> dict[str, Any]:
    """An ``m.replace`` edit of ``event_id`` to ``piece``: ``m.new_content`` is the message
    (with its HTML when ``html``), the outer body the ``* ``-prefixed fallback for clients
    without edits. Past the event size the HTML goes, then the fallback shrinks."""
    new: dict[str, Any] = {"msgtype": "m.text", "body": piece}
    if html:
        new = {k: v for k, v in message_content(message, piece, first=False).items() if k not in ("m.relates_to", "m.mentions")}
    content: dict[str, Any] = {"msgtype": "m.text", "body": f"* {piece}", "m.new_content": new, "m.relates_to": {"rel_type": "m.replace", "event_id": event_id}}
    if "formatted_body" in new:
        content["format"] = new["format"]
        content["formatted_body"] = f"* {new['formatted_body']}"
    for cut in ("formatted", "new_formatted", "fallback"):
        if len(json.dumps(content).encode()) < MAX_EVENT_BYTES:
            break
        if cut == "formatted":
            content.pop("format", None), content.pop("formatted_body", None)
        elif cut == "new_formatted":
            new.pop("format", None), new.pop("formatted_body", None)
        else:
            content["body"] = "* (edited)"
    return content


def message_content(message: PlatformMessage, piece: str, *, first: bool) -> dict[str, Any]:
    """An ``m.room.message`` answering ``message``: the Markdown as body, its HTML as
    ``formatted_body``; in the message's thread, or a reply to it in a group."""
    content: dict[str, Any] = {"msgtype": "m.text", "body": piece}
    formatted = to_matrix_html(piece)
    if len(json.dumps(content).encode()) + len(json.dumps(formatted).encode()) < MAX_EVENT_BYTES:
        content["format"] = "org.matrix.custom.html"
        content["formatted_body"] = formatted
    if message.thread_id:
        content["m.relates_to"] = {
            "rel_type": "m.thread",
            "event_id": message.thread_id,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": message.message_id},
        }
    elif first and message.chat_type != "dm":
        content["m.relates_to"] = {"m.in_reply_to": {"event_id": message.message_id}}
    if first and message.chat_type != "dm":
        content["m.mentions"] = {"user_ids": [message.user_id]}
    return content


@dataclasses.dataclass(frozen=True)
class Invite:
    room_id: str
    inviter: str
    direct: bool


def should_join(invite: Invite, allowed: frozenset[str], allow_all: bool) -> bool:
    """Join a room an allowed user invites the bot to, and any direct chat (its unknown user
    then gets a pairing code there and nothing else); not a group an unknown user opens."""
    return invite.direct or allow_all or invite.inviter in allowed


@dataclasses.dataclass(frozen=True)
class Prompt:
    """An approval prompt the bot sent: a reaction on it answers ``request`` (the request id's tail)."""

    request: str
    thread_id: str = ""


@dataclasses.dataclass(frozen=True)
class SyncBatch:
    next_batch: str
    messages: tuple[PlatformMessage, ...] = ()
    invites: tuple[Invite, ...] = ()
    members: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """Room id -> joined + invited members, where this sync said."""
    uncounted: tuple[str, ...] = ()
    """Rooms with messages whose member count is unknown or changed (a member event) and that
    this sync did not count: count them (``joined_members``) and parse again, else a DM could
    be taken for a group."""


def _mentioned(content: dict[str, Any], bot: str) -> bool:
    mentions = content.get("m.mentions")
    if isinstance(mentions, dict) and bot in (mentions.get("user_ids") or ()):
        return True
    body = str(content.get("body") or "")
    return bot in body or f"matrix.to/#/{bot}" in str(content.get("formatted_body") or "")


def _replied_to_bot(content: dict[str, Any], relation: dict[str, Any], bot: str) -> bool:
    if not isinstance(relation.get("m.in_reply_to"), dict) or relation.get("is_falling_back"):
        return False
    mentions = content.get("m.mentions")
    fallback = str(content.get("body") or "").startswith(f"> <{bot}>")
    return fallback or (isinstance(mentions, dict) and bot in (mentions.get("user_ids") or ()))


def _to_message(room_id: str, chat_type: Any, event: dict[str, Any], bot: str, prompts: Mapping[str, Prompt]) -> PlatformMessage | None:
    content = event.get("content")
    sender = event.get("sender")
    event_id = event.get("event_id")
    if not isinstance(content, dict) or not isinstance(sender, str) or not isinstance(event_id, str) or sender == bot:
        return None
    relation = content.get("m.relates_to") if isinstance(content.get("m.relates_to"), dict) else {}
    assert isinstance(relation, dict)
    common = {
        "platform": "matrix",
        "chat_type": chat_type,
        "chat_id": room_id,
        "user_id": sender,
        "user_name": sender[1:].split(":", 1)[0],
        "message_id": event_id,
    }
    if event.get("type") == "m.reaction":
        prompt = prompts.get(str(relation.get("event_id") or ""))
        key = str(relation.get("key") or "").replace("\ufe0f", "")
        if prompt is None or relation.get("rel_type") != "m.annotation" or key not in APPROVE_KEYS | DENY_KEYS:
            return None
        verb = "/approve" if key in APPROVE_KEYS else "/deny"
        return PlatformMessage(**common, thread_id=prompt.thread_id, text=f"{verb} #{prompt.request}", reply_to_bot=True)
    body = content.get("body")
    if event.get("type") == "m.room.message" and content.get("msgtype") in FILE_TYPES and isinstance(content.get("url"), str):
        return _file_message(common, content, relation, bot)
    if event.get("type") != "m.room.message" or content.get("msgtype") not in ("m.text", "m.emote") or not isinstance(body, str):
        return None  # edits (m.replace) carry m.new_content and are not new messages either
    if relation.get("rel_type") == "m.replace":
        return None
    thread = str(relation.get("event_id") or "") if relation.get("rel_type") == "m.thread" else ""
    mentioned = _mentioned(content, bot)
    text = body.replace(bot, "").strip() if mentioned and body.replace(bot, "").strip() else body
    return PlatformMessage(**common, thread_id=thread, text=text, mentioned=mentioned, reply_to_bot=_replied_to_bot(content, relation, bot))


def inbound_name(content: dict[str, Any]) -> tuple[str, str]:
    """An ``m.image`` / ``m.file`` event's ``(file name, caption)``: with a ``filename`` the body
    is a caption, without one the body is the name (Matrix 1.10)."""
    body = str(content.get("body") or "")
    filename = content.get("filename")
    if isinstance(filename, str) and filename:
        return filename, body if body != filename else ""
    return body, ""


def _file_message(common: dict[str, Any], content: dict[str, Any], relation: dict[str, Any], bot: str) -> PlatformMessage | None:
    """An unencrypted ``m.image`` / ``m.file`` (``m.audio``, ``m.video`` as files): its ``mxc://``
    URL as the file's handle, the caption (if any) as text."""
    if relation.get("rel_type") == "m.replace":
        return None
    info = content.get("info") if isinstance(content.get("info"), dict) else {}
    assert isinstance(info, dict)
    name, caption = inbound_name(content)
    size = info.get("size")
    kind: Literal["image", "file"] = "image" if content.get("msgtype") == "m.image" else "file"
    file = PlatformFile(kind=kind, file_id=str(content["url"]), name=name, size=size if isinstance(size, int) else 0, mime=str(info.get("mimetype") or ""))
    thread = str(relation.get("event_id") or "") if relation.get("rel_type") == "m.thread" else ""
    mentioned = _mentioned(content, bot)
    return PlatformMessage(**common, thread_id=thread, text=caption, mentioned=mentioned, reply_to_bot=_replied_to_bot(content, relation, bot), files=(file,))


def parse_sync(data: dict[str, Any], *, bot: str, members: Mapping[str, int], prompts: Mapping[str, Prompt], history: bool, counted: bool = False) -> SyncBatch:
    """One ``/sync`` answer as the gateway's messages. ``history``: the first sync of a fresh
    adapter, whose timelines are the rooms' past (skipped, only invites count); ``counted``:
    ``members`` was just counted for this answer (nothing is ``uncounted``)."""
    rooms = data.get("rooms") if isinstance(data.get("rooms"), dict) else {}
    assert isinstance(rooms, dict)
    counts: dict[str, int] = {}
    messages: list[PlatformMessage] = []
    uncounted: list[str] = []
    for room_id, room in (rooms.get("join") or {}).items():
        summary = room.get("summary") or {}
        if "m.joined_member_count" in summary:
            counts[room_id] = int(summary.get("m.joined_member_count") or 0) + int(summary.get("m.invited_member_count") or 0)
        known = counts.get(room_id, members.get(room_id, 0))
        chat_type = "dm" if 0 < known <= 2 else "group"
        if history:
            continue
        timeline = [e for e in (room.get("timeline") or {}).get("events") or () if isinstance(e, dict)]
        changed = any(e.get("type") == "m.room.member" for e in (*timeline, *((room.get("state") or {}).get("events") or ())) if isinstance(e, dict))
        if not counted and room_id not in counts and (changed or room_id not in members) and any(e.get("type") == "m.room.message" for e in timeline):
            uncounted.append(room_id)
        for event in (room.get("timeline") or {}).get("events") or ():
            message = _to_message(room_id, chat_type, event, bot, prompts) if isinstance(event, dict) else None
            if message is not None:
                messages.append(message)
    invites = []
    for room_id, room in (rooms.get("invite") or {}).items():
        for event in (room.get("invite_state") or {}).get("events") or ():
            if event.get("type") == "m.room.member" and event.get("state_key") == bot and (event.get("content") or {}).get("membership") == "invite":
                invites.append(Invite(room_id=room_id, inviter=str(event.get("sender") or ""), direct=bool((event.get("content") or {}).get("is_direct"))))
    if uncounted:
        return SyncBatch(next_batch="", uncounted=tuple(uncounted), members=counts)
    return SyncBatch(next_batch=str(data.get("next_batch") or ""), messages=tuple(messages), invites=tuple(invites), members=counts)
