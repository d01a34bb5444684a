"""The Matrix adapter (``/platforms/matrix``): ``/sync`` long polling and ``m.room.message``.

Each ``/sync`` is one reactor wait, and at most one runs. Its messages are deduped and the
seen log saved *before* the next sync starts; that next sync first writes the ``since`` token
it continues from to ``HERMES_HOME/gateway/matrix.since`` (an atomic write), so a token is
never on disk before the events it passed are. A fresh adapter (no token) skips the rooms'
history: its first sync only counts members and takes invites.

Invites from allowed users, and direct-message invites from anyone (so an unknown user gets a
pairing code), are joined. Replies are Markdown bodies with Matrix HTML (``formatted_body``),
cut at ``chunk_limit`` UTF-8 bytes, each piece sent with a transaction id derived from the
message it answers and the piece (:func:`txn_id`): the homeserver keeps a device's
transaction ids (Synapse: 24 hours), so a piece sent again (a retry after a lost answer, a restarted adapter's
outbox after a crash between the send and ``mark_sent``) is the same event, not a second one.
An approval prompt carries ✅ and ❌ reactions; the user's reaction on it (or ``/approve``,
``/deny``) answers it. 429 ``M_LIMIT_EXCEEDED`` waits ``retry_after_ms``, 5xx back off.

With ``streaming: true`` a turn's answer is shown while it comes (``_matrix_stream.py``: one
message, then ``m.replace`` edits) and the final reply's first piece is that message's last
edit, with its HTML. An answer's ``MEDIA:`` files are uploaded to the media repository and
follow the text as ``m.image`` / ``m.file`` (``_matrix_media.py``); a message's image and file
are downloaded for the turn (``_chat_files.py``, shared with Telegram).
"""

from __future__ import annotations

import hashlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import trio

from actors._atomic import write_atomic
from protocols import AdapterTimer, ApprovalRequested, PlatformMessage, WaitFinished

from ._adapter import DELIVERY_DEADLINE, GatewayAdapter
from ._chat_commands import approval_text
from ._chat_files import Attachment, prepare_turn, read_attachment
from ._dedup import SeenLog
from ._edit_stream import FinalExtras, final_pieces
from ._matrix_api import SYNC_FILTER, Invite, Prompt, call, edit_content, message_content, parse_sync, room_path, should_join, txn_id
from ._matrix_media import download, image_suffixed, media_content, upload
from ._matrix_stream import MatrixStream
from ._retry import CallFailed, retry_delay
from ._state_file import Outgoing
from ._waits import Prepare, Stream

log = logging.getLogger(__name__)

_SSL: ssl.SSLContext | None = None
UNAUTHORIZED_RETRY = 60.0
MATRIX_LIMIT = 16_000
MEDIA_TIMEOUT = 120.0
T = TypeVar("T")


def utf8_bytes(text: str) -> int:
    return len(text.encode())


class MatrixAdapter(GatewayAdapter):
    platform = "matrix"
    limit = MATRIX_LIMIT
    measure = staticmethod(utf8_bytes)

    def __init__(
        self,
        *,
        homeserver: str,
        token: str,
        user_id: str,
        sync_timeout: float,
        chunk_limit: int = MATRIX_LIMIT,
        **common: Any,
    ) -> None:
        super().__init__(**common)
        self.homeserver = homeserver
        self.token = token
        self.user_id = user_id
        self.sync_timeout = sync_timeout
        self.limit = chunk_limit
        self.since_path: Path = self.home / "gateway" / "matrix.since"
        self.since = ""
        self.next_since = ""
        self.failures = 0
        self.syncing = False
        """Invariant: at most one ``/sync`` in flight (its token is saved only after the last batch)."""
        self.members: dict[str, int] = {}
        self.prompts: dict[str, Prompt] = {}
        """Approval prompt event id -> the request a reaction on it answers."""

    def scheduled_sender(self) -> Any:
        return matrix_sender(self.homeserver, self.token, workspace=self.workspace, home=self.home)

    # -- calls ----------------------------------------------------------------------------

    async def _client(self) -> httpx.AsyncClient:
        global _SSL
        verify: Any = True
        if self.homeserver.startswith("https:"):
            if _SSL is None:  # building one costs ~70 ms (the CA bundle): once, off the reactor
                _SSL = await trio.to_thread.run_sync(httpx.create_ssl_context)
            verify = _SSL
        return httpx.AsyncClient(verify=verify)  # one a call: nothing left open when a wait is cancelled

    async def _call(self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None, timeout: float = 30.0) -> Any:
        async with await self._client() as client:
            return await call(client, self.homeserver, self.token, method, path, body=body, params=params, timeout=timeout)

    async def _upload(self, name: str, data: bytes) -> str:
        async with await self._client() as client:
            return await upload(client, self.homeserver, self.token, name, data, timeout=MEDIA_TIMEOUT)

    async def _download(self, mxc: str, limit: int) -> bytes:
        async with await self._client() as client:
            return await download(client, self.homeserver, self.token, mxc, limit=limit, timeout=MEDIA_TIMEOUT)

    # -- streaming and files ----------------------------------------------------------------

    def streamer(self, message: PlatformMessage, turn_id: str) -> Stream | None:
        if not self.stream_settings.enabled:
            return None
        known = self.streams.get(turn_id, "")
        saved = None
        if not known:  # a new stream: its first edit waits until the message's id is on disk
            saved = self.stream_saved[turn_id] = trio.Event()
        return MatrixStream(self._call, message, turn_id, self.stream_settings, self.address.tell, known, limit=self.limit, measure=self.measure, saved=saved)

    def preparer(self, message: PlatformMessage) -> Prepare | None:
        if not message.files:
            return None
        names = {f.file_id: image_suffixed(f.name, f.mime) if f.kind == "image" else f.name for f in message.files}

        async def fetch(mxc: str, limit: int) -> tuple[str, bytes]:
            return names.get(mxc, ""), await self._download(mxc, limit)

        async def prepare(start: Any) -> Any:
            return await prepare_turn(fetch, message, start, workspace=self.workspace, vision=self.vision)

        return prepare

    def final_call(self, owed: Outgoing, streamed: str) -> tuple[list[str], Any]:
        """The final reply: its first piece edits the streamed message (if any), its ``MEDIA:`` files follow the text."""
        planned = final_pieces(owed.text, streamed, self.limit, self.measure)
        return planned if planned is not None else super().final_call(owed, streamed)

    async def _whoami(self) -> tuple[str, str]:
        """The token's user, and the ``since`` token saved by an earlier run ("" for none)."""
        me = await self._call("GET", "/account/whoami")
        try:
            since = await trio.to_thread.run_sync(self.since_path.read_text)
        except FileNotFoundError:
            since = ""
        return str(me.get("user_id") or ""), since.strip()

    async def _sync(self, since: str, timeout: float) -> Any:
        if since:
            await trio.to_thread.run_sync(write_atomic, self.since_path, since.encode())
        params = {"timeout": str(int(timeout * 1000)), "filter": SYNC_FILTER}
        if since:
            params["since"] = since
        return await self._call("GET", "/sync", params=params, timeout=timeout + 30.0)

    # -- lifecycle and messages -----------------------------------------------------------

    def begin(self) -> None:
        self.start_wait(self._whoami, tag="me", timeout=60.0)

    def other(self, message: Any) -> Any:
        match message:
            case WaitFinished(tag="me", status="ok", value=(user_id, since)):
                if self.user_id and user_id != self.user_id:
                    log.warning("gateway matrix: MATRIX_USER_ID is %s but the access token belongs to %s; using %s", self.user_id, user_id, user_id)
                self.user_id, self.since, self.failures = user_id, since, 0
                self.set_state("running", user_id)
                self.sync()
            case WaitFinished(tag="me", value=failure):
                self.failed(failure, "me")
            case WaitFinished(tag="sync", status="ok", value=data):
                self.syncing = False
                self.failures = 0
                if self.state != "running":
                    self.set_state("running", self.user_id)
                self.synced(data)
            case WaitFinished(tag="sync", value=CallFailed(status=400, description=why)) if "M_UNKNOWN_POS" in why or "Invalid stream token" in why:
                self.syncing = False  # the homeserver forgot our position (a reset database): start from now
                log.warning("gateway matrix: the homeserver does not know the saved sync position (%s); syncing from now on", why)
                self.since = ""
                self.sync()
            case WaitFinished(tag="sync", value=failure):
                self.syncing = False
                self.failed(failure, "sync")
            case WaitFinished(tag="counted", status="ok", value=(data, counts)):
                self.syncing = False
                self.members.update(counts)
                self.synced(data, counted=True)
            case WaitFinished(tag="counted", value=failure):
                self.syncing = False
                self.failed(failure, "sync")  # the same sync again, later
            case WaitFinished(tag="prompted", status="ok", value=(event_id, prompt, room_id)):
                self.prompts[event_id] = prompt  # before the user can have seen it: their reaction finds it
                self.start_wait(self._offer, room_id, event_id, tag="reacted", timeout=120.0)
            case WaitFinished(tag="prompted", error=error):
                log.warning("gateway matrix: an approval prompt was not sent: %s", error)
            case WaitFinished(tag="joined" | "reacted", status=status, error=error):
                if status != "ok":
                    log.warning("gateway matrix: %s", error)
            case AdapterTimer(what=what):
                if what == "me":
                    self.begin()
                else:
                    self.sync()
            case _:
                return super().other(message)
        return None

    def sync(self) -> None:
        if self.syncing:
            return
        self.syncing = True
        timeout = self.sync_timeout if self.since else 0.0  # the first sync only finds where "now" is
        self.start_wait(self._sync, self.since, timeout, tag="sync", timeout=timeout + 60.0)

    def synced(self, data: Any, *, counted: bool = False) -> None:
        data = data if isinstance(data, dict) else {}
        batch = parse_sync(data, bot=self.user_id, members=self.members, prompts=self.prompts, history=not self.since, counted=counted)
        self.members.update(batch.members)
        if batch.uncounted:  # a room whose size is not known: DM or group is decided after a count
            self.syncing = True
            self.start_wait(self._count, data, batch.uncounted, tag="counted", timeout=120.0)
            return
        for invite in batch.invites:
            self.invited(invite)
        self.next_since = batch.next_batch or self.since
        self.accept(list(batch.messages))  # persisted() follows once the batch's ids are on disk

    def persisted(self, log_: SeenLog) -> None:
        self.since = self.next_since or self.since
        self.sync()

    def invited(self, invite: Invite) -> None:
        if should_join(invite, self.policy.allowed, self.policy.allow_all):
            self.start_wait(self._join, invite, tag="joined", timeout=120.0)
        else:
            log.info("gateway matrix: not joining %s: %s is not an allowed user", invite.room_id, invite.inviter)

    async def _count(self, data: Any, rooms: tuple[str, ...]) -> tuple[Any, dict[str, int]]:
        counts = {}
        for room_id in rooms:
            answer, _ = await self._retrying("GET", room_path(room_id, "joined_members"), None)
            counts[room_id] = len(answer.get("joined") or {})
        return data, counts

    async def _join(self, invite: Invite) -> None:
        await self._retrying("POST", f"/join/{invite.room_id.replace('#', '%23')}", {})

    def failed(self, failure: Any, what: str) -> None:
        self.failures += 1
        if isinstance(failure, CallFailed) and (failure.status == 401 or (failure.status == 403 and what == "me")):
            self.set_state("unauthorized", f"the homeserver refused the access token ({failure}); check MATRIX_ACCESS_TOKEN")
            delay = UNAUTHORIZED_RETRY
        else:
            problem = failure if isinstance(failure, CallFailed) else CallFailed(0, str(failure))
            delay = retry_delay(problem, self.failures) or UNAUTHORIZED_RETRY
            self.set_state("backoff", f"{problem}; retrying in {delay:.1f} s")
        self.send_after(delay, AdapterTimer(what=what))

    # -- outbound -------------------------------------------------------------------------

    async def _retrying(self, method: str, path: str, body: Any) -> tuple[Any, int]:
        """One call retried by :func:`retry_delay` (429 ``retry_after_ms``, 5xx, transport); ``(answer, retries)``."""
        return await _retried(lambda: self._call(method, path, body))

    async def _send(self, message: PlatformMessage, piece: str, index: int) -> tuple[str, int]:
        content = message_content(message, piece, first=index == 0)
        answer, retries = await self._retrying("PUT", room_path(message.chat_id, "send", "m.room.message", txn_id(message, index, piece)), content)
        return str(answer.get("event_id") or ""), retries

    async def deliver(self, message: PlatformMessage, pieces: list[str], markup: Any = None) -> int:
        """Each piece as a message; a final reply's extras (``markup``): its first piece edits
        the streamed message, its ``MEDIA:`` files follow, uploaded, or a note why not."""
        extras = markup if isinstance(markup, FinalExtras) else FinalExtras()
        retries = 0
        for i, piece in enumerate(pieces):
            if i == 0 and extras.edit:
                retries += await self._edit(message, extras.edit, piece)
            else:
                retries += (await self._send(message, piece, i))[1]
        for n, path in enumerate(extras.media):
            item = await read_attachment(path, workspace=self.workspace, home=self.home)
            if isinstance(item, Attachment):
                retries += await self._send_file(message, item, path)
            else:
                retries += (await self._send(message, item, len(pieces) + n))[1]
        return retries

    async def _edit(self, message: PlatformMessage, event_id: str, piece: str) -> int:
        """The streamed message's last edit, with HTML; a refused edit (the message is gone)
        sends the piece as a message instead."""
        path = room_path(message.chat_id, "send", "m.room.message", txn_id(message, 0, f"edit\0{event_id}\0{piece}"))
        try:
            return (await self._retrying("PUT", path, edit_content(message, event_id, piece, html=True)))[1]
        except CallFailed as failure:
            log.info("gateway matrix: the streamed message could not be edited (%s); the answer goes as a message", failure)
            return (await self._send(message, piece, 0))[1]

    async def _send_file(self, message: PlatformMessage, item: Attachment, path: str) -> int:
        """The file into the media repository, then its event (the txn id from the path: sent again, one event)."""
        mxc, uploaded = await _retried(lambda: self._upload(item.name, item.data))
        content = media_content(message, item.kind, item.name, mxc, len(item.data))
        _, sent = await self._retrying("PUT", room_path(message.chat_id, "send", "m.room.message", txn_id(message, 0, f"media\0{path}")), content)
        return uploaded + sent

    def ask_approval(self, message: PlatformMessage, request: ApprovalRequested) -> None:
        text = f"{approval_text(request)}\nReact ✅ to approve or ❌ to deny (or reply /approve, /deny)."
        prompt = Prompt(request=request.request_id[-40:], thread_id=message.thread_id)
        self.start_wait(self._prompt, message, text, prompt, tag="prompted", timeout=DELIVERY_DEADLINE)

    async def _prompt(self, message: PlatformMessage, text: str, prompt: Prompt) -> tuple[str, Prompt, str]:
        return (await self._send(message, text, 0))[0], prompt, message.chat_id

    async def _offer(self, room_id: str, event_id: str) -> None:
        """The two answers as the bot's own reactions on the prompt, one tap away."""
        for key in ("✅", "❌"):
            relation = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
            path = room_path(room_id, "send", "m.reaction", "hermes-" + hashlib.sha256(f"{event_id}{key}".encode()).hexdigest()[:40])
            await self._retrying("PUT", path, relation)


async def _retried(make: Callable[[], Awaitable[T]]) -> tuple[T, int]:
    """``make()`` retried by :func:`retry_delay`, each attempt shielded (a stop mid-call must not
    leave the reply's fate unknown); ``(answer, retries)``."""
    attempt = 0
    while True:
        attempt += 1
        try:
            with trio.CancelScope(shield=True):
                return await make(), attempt - 1
        except CallFailed as failure:
            delay = retry_delay(failure, attempt)
            if delay is None:
                raise
            await trio.sleep(delay)


def split_target(chat_id: str, thread_id: str) -> tuple[str, str]:
    """The room and thread of a scheduled job's ``matrix:<room id>[:<thread root>]`` target: room
    ids hold a ``:`` themselves (``!abc:example.org``), so the scheduler's split is undone and
    cut again before the thread root, an event id (``$...``)."""
    joined = f"{chat_id}:{thread_id}" if thread_id else chat_id
    room, _, thread = joined.partition(":$")
    return room, f"${thread}" if thread else ""


def matrix_sender(homeserver: str, token: str, *, workspace: Path, home: Path) -> Any:
    """``send(chat_id, thread_id, text, media)`` for scheduled jobs' answers: the text in pieces
    as Matrix HTML, each with a txn id derived from the answer (a retried delivery is the same
    event); each ``MEDIA:`` file uploaded and sent as ``m.image`` / ``m.file``, only from the
    workspace or ``HERMES_HOME/cache`` as a chat answer's (a refused file is sent as its note)."""
    from actors.scheduler._delivery import DeliveryFailed

    from ._chunks import chunk_text

    async def send(chat_id: str, thread_id: str, text: str, media: tuple[str, ...]) -> None:
        room, thread = split_target(chat_id, thread_id)
        target = PlatformMessage(platform="matrix", chat_type="dm", chat_id=room, thread_id=thread, user_id="", message_id=thread or "cron", text="")
        try:
            async with httpx.AsyncClient() as client:
                for i, piece in enumerate(chunk_text(text, MATRIX_LIMIT, utf8_bytes) if text else []):
                    path = room_path(room, "send", "m.room.message", txn_id(target, i, f"cron\0{text}\0{piece}"))
                    await call(client, homeserver, token, "PUT", path, body=message_content(target, piece, first=i == 0), timeout=30.0)
                for n, file in enumerate(media):
                    item = await read_attachment(file, workspace=workspace, home=home)
                    path = room_path(room, "send", "m.room.message", txn_id(target, n, f"cron\0{text}\0media\0{file}"))
                    if isinstance(item, str):
                        await call(client, homeserver, token, "PUT", path, body=message_content(target, item, first=False), timeout=30.0)
                        continue
                    mxc = await upload(client, homeserver, token, item.name, item.data, timeout=MEDIA_TIMEOUT)
                    content = media_content(target, item.kind, item.name, mxc, len(item.data))
                    await call(client, homeserver, token, "PUT", path, body=content, timeout=30.0)
        except CallFailed as failure:
            raise DeliveryFailed(f"matrix room {room}: {failure}", retry=retry_delay(failure, 1) is not None) from None

    return send
