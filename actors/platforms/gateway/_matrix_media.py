"""Files on Matrix: the media repository (``POST /_matrix/media/v3/upload`` gives an ``mxc://``
URL; downloads by ``/_matrix/client/v1/media/download`` with the access token, the
authenticated media of Matrix 1.11, or the older ``/_matrix/media/v3/download`` where the
homeserver lacks it) and the ``m.image`` / ``m.file`` events that carry an ``mxc://`` URL.
Building and parsing are pure; calls are coroutines for the reactor.
"""

from __future__ import annotations

import mimetypes
from typing import Any
from urllib.parse import quote

import httpx

from protocols import PlatformMessage

from ._matrix_api import message_content, parse_answer
from ._media import IMAGE_SUFFIXES, Kind
from ._retry import CallFailed


def mime_of(name: str) -> str:
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def media_content(message: PlatformMessage, kind: Kind, name: str, mxc: str, size: int) -> dict[str, Any]:
    """An ``m.image`` (a photo) or ``m.file`` answering ``message``: the file's name as body,
    its ``mxc://`` URL, its type and size; in the message's thread like a text reply."""
    content = message_content(message, name, first=False)
    for key in ("format", "formatted_body"):
        content.pop(key, None)
    content.update({"msgtype": "m.image" if kind == "photo" else "m.file", "url": mxc, "info": {"mimetype": mime_of(name), "size": size}})
    if kind != "photo":
        content["filename"] = name
    return content


def split_mxc(mxc: str) -> tuple[str, str]:
    """``mxc://<server>/<media id>`` -> ``(server, media id)``; :class:`CallFailed` (400) for anything else."""
    server, _, media_id = mxc.removeprefix("mxc://").partition("/")
    if not mxc.startswith("mxc://") or not server or not media_id or "/" in media_id:
        raise CallFailed(400, f"not a Matrix media URL: {mxc[:100]!r}")
    return server, media_id


def image_suffixed(name: str, mime: str) -> str:
    """A name whose suffix names the image's type (``data_url`` reads it), from the mimetype when the name has none."""
    if any(name.lower().endswith(suffix) for suffix in IMAGE_SUFFIXES):
        return name
    by_mime = {v: k for k, v in IMAGE_SUFFIXES.items()}
    return f"{name or 'image'}{by_mime.get(mime, '.jpg')}"


async def upload(client: httpx.AsyncClient, homeserver: str, token: str, name: str, data: bytes, *, timeout: float) -> str:
    """The file into the media repository; its ``mxc://`` URL."""
    url = f"{homeserver.rstrip('/')}/_matrix/media/v3/upload"
    headers = {"authorization": f"Bearer {token}", "content-type": mime_of(name)}
    try:
        response = await client.post(url, params={"filename": name}, content=data, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        raise CallFailed(0, f"upload {name}: {type(exc).__name__}: {exc}".replace(token, "<token>")) from None
    answer = parse_answer(response.status_code, response.content, response.headers)
    mxc = answer.get("content_uri")
    if not isinstance(mxc, str) or not mxc.startswith("mxc://"):
        raise CallFailed(502, f"the upload of {name} gave no content_uri: {str(answer)[:200]}")
    return mxc


async def download(client: httpx.AsyncClient, homeserver: str, token: str, mxc: str, *, limit: int, timeout: float) -> bytes:
    """The bytes behind ``mxc``, at most ``limit`` (more is :class:`CallFailed` 413): the
    authenticated endpoint first, the unauthenticated one where the homeserver does not know it."""
    server, media_id = split_mxc(mxc)
    tail = f"/download/{quote(server, safe='')}/{quote(media_id, safe='')}"
    base = homeserver.rstrip("/")
    try:
        return await _fetch(client, f"{base}/_matrix/client/v1/media{tail}", token, limit, timeout)
    except CallFailed as failure:
        unknown_endpoint = "M_UNRECOGNIZED" in failure.description or failure.status == 405 or "not a Matrix answer" in failure.description
        if not unknown_endpoint:
            raise
    return await _fetch(client, f"{base}/_matrix/media/v3{tail}", token, limit, timeout)


async def _fetch(client: httpx.AsyncClient, url: str, token: str, limit: int, timeout: float) -> bytes:
    try:
        async with client.stream("GET", url, headers={"authorization": f"Bearer {token}"}, timeout=timeout) as response:
            if response.status_code != 200:
                parse_answer(response.status_code, await response.aread(), response.headers)
            data = bytearray()
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) > limit:
                    raise CallFailed(413, f"the file is over the {limit // (1024 * 1024)} MB limit")
            return bytes(data)
    except httpx.HTTPError as exc:
        raise CallFailed(0, f"download: {type(exc).__name__}: {exc}".replace(token, "<token>")) from None
