"""Where a job's answer goes: the target (pure) and the sending (reactor coroutines).

Targets, as Hermes users write them:

- ``local``: only the output file (every answer is also saved there, whatever the target:
  ``HERMES_HOME/cron/output/<job>/<occurrence>.md``);
- ``origin``: back where the job was made: a ``<platform>:<chat_id>`` origin, or a chat's session
  (``agent:main:<platform>:<chat_type>:<chat_id>[:<thread_id>]``), goes to that chat;
  a session origin gets a :class:`CronDelivered` event on its stream (TUI, SSE clients);
- ``<platform>:<chat_id>[:<thread_id>]``: a messaging platform configured under ``platforms:``;
  it is sent through the adapter registered for it (``Senders``), and reported unavailable when
  none is running;
- ``http://`` / ``https://`` URL: a webhook, POSTed a JSON object.

An answer of exactly ``[SILENT]`` is not delivered (nor saved). ``MEDIA: <path>`` lines are taken
out of the text and sent as attachments (listed in a webhook's ``media``).
Sends are retried (``ATTEMPTS`` in all, backing off) and the outcome is recorded with the
occurrence.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Literal

import trio

from actors._atomic import write_atomic
from protocols._session import SessionEvent

SILENT = "[SILENT]"
ATTEMPTS = 3
BACKOFF = 1.0
"""Seconds before the second attempt; doubled for each next one."""
_MEDIA = re.compile(r"^\s*MEDIA:\s*(\S.*?)\s*$", re.MULTILINE)
_KINDS = ("local", "origin")


class CronDelivered(SessionEvent, frozen=True, kw_only=True):
    """A scheduled job's answer, delivered to the session that created the job."""

    job_id: str
    job_name: str
    occurrence: float
    text: str
    media: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Target:
    kind: Literal["local", "origin", "platform", "webhook", "session"]
    platform: str = ""
    chat_id: str = ""
    thread_id: str = ""
    url: str = ""
    session_id: str = ""

    def describe(self) -> str:
        match self.kind:
            case "platform":
                return f"{self.platform}:{self.chat_id}" + (f":{self.thread_id}" if self.thread_id else "")
            case "webhook":
                return self.url
            case "session":
                return f"session {self.session_id}"
        return self.kind


def parse_target(text: str) -> Target:
    """What a ``deliver`` value means.

    Raises:
        ValueError: it is none of the target forms.
    """
    raw = text.strip()
    if raw.lower() in _KINDS:
        return Target(kind=raw.lower())  # type: ignore[arg-type]
    if raw.startswith(("http://", "https://")):
        return Target(kind="webhook", url=raw)
    parts = raw.split(":")
    if 2 <= len(parts) <= 3 and re.fullmatch(r"[a-z][a-z0-9_]*", parts[0]) and all(parts[1:]):
        return Target(kind="platform", platform=parts[0], chat_id=parts[1], thread_id=parts[2] if len(parts) == 3 else "")
    raise ValueError(f"deliver {raw!r} is not a target; use 'local', 'origin', '<platform>:<chat_id>[:<thread_id>]' or an http(s) URL")


_CHAT_SESSION = re.compile(r"agent:main:([a-z][a-z0-9_]*):[a-z_]+:([^:]+)(?::([^:]+))?")
"""A chat's session id (``actors.platforms.gateway``): ``agent:main:<platform>:<chat_type>:<chat_id>[:<thread_id>]``."""


def resolve(target: Target, origin: str) -> Target:
    """``origin`` made concrete: the chat or the session the job came from (a job made in a chat's
    session goes back to that chat)."""
    if target.kind != "origin":
        return target
    chat = _CHAT_SESSION.fullmatch(origin)
    if chat is not None:
        return Target(kind="platform", platform=chat.group(1), chat_id=chat.group(2), thread_id=chat.group(3) or "")
    try:
        found = parse_target(origin)
    except ValueError:
        return Target(kind="session", session_id=origin)
    return found if found.kind == "platform" else Target(kind="session", session_id=origin)


def split_media(answer: str) -> tuple[str, tuple[str, ...]]:
    """The answer without its ``MEDIA:`` lines, and the paths they named."""
    media = tuple(m.group(1) for m in _MEDIA.finditer(answer))
    return (_MEDIA.sub("", answer).strip() if media else answer), media


def is_silent(answer: str) -> bool:
    return answer.strip() == SILENT


PlatformSend = Callable[[str, str, str, tuple[str, ...]], Awaitable[None]]
"""``send(chat_id, thread_id, text, media)`` of a running platform adapter; raises on failure."""


@dataclasses.dataclass(slots=True)
class Senders:
    """The running platform adapters' senders, by platform name (the gateway registers them)."""

    platforms: dict[str, PlatformSend] = dataclasses.field(default_factory=dict)
    publish: Callable[[str, SessionEvent], object] | None = None
    """Publish an event on a session's stream (``session`` targets)."""
    post: Callable[[str, Mapping[str, object], float], Awaitable[int]] | None = None
    """POST JSON to a URL within a timeout, returning the status (webhooks)."""


class DeliveryFailed(Exception):
    """A send failed; ``retry`` says whether another attempt may work."""

    def __init__(self, text: str, *, retry: bool) -> None:
        super().__init__(text)
        self.retry = retry


def output_path(home: Path, job_id: str, at: float) -> Path:
    stamp = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H-%M-%SZ")
    return home / "cron" / "output" / job_id / f"{stamp}.md"


async def save_output(home: Path, job_id: str, job_name: str, at: float, text: str) -> Path:
    path = output_path(home, job_id, at)
    header = f"# {job_name}\n\nJob `{job_id}`, occurrence {dt.datetime.fromtimestamp(at, dt.UTC).isoformat()}\n\n"

    def write() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, (header + text + "\n").encode(), new_mode=0o600)

    await trio.to_thread.run_sync(write)
    return path


async def _send_once(target: Target, senders: Senders, payload: Mapping[str, object], text: str, media: tuple[str, ...]) -> None:
    match target.kind:
        case "platform":
            send = senders.platforms.get(target.platform)
            if send is None:
                raise DeliveryFailed(f"platform {target.platform!r} is configured but no adapter for it is running in this server", retry=False)
            await send(target.chat_id, target.thread_id, text, media)
        case "webhook":
            if senders.post is None:
                raise DeliveryFailed("webhook delivery is not available in this process", retry=False)
            status = await senders.post(target.url, payload, 30.0)
            if status >= 400:
                raise DeliveryFailed(f"the webhook answered HTTP {status}", retry=status >= 500 or status == 429)
        case "session":
            if senders.publish is None:
                raise DeliveryFailed("no session streams in this process", retry=False)
            job_id, job_name, at = str(payload["job_id"]), str(payload["job_name"]), float(payload["occurrence"])  # type: ignore[arg-type]
            senders.publish(target.session_id, CronDelivered(job_id=job_id, job_name=job_name, occurrence=at, text=text, media=media))


async def deliver(target: Target, senders: Senders, payload: Mapping[str, object], *, sleep: Callable[[float], Awaitable[None]] = trio.sleep) -> str:
    """Send one answer to ``target`` (after the local save), retrying; what happened, in words."""
    if target.kind == "local":
        return "local"
    text, media = split_media(str(payload["answer"]))
    delay = BACKOFF
    for attempt in range(1, ATTEMPTS + 1):
        try:
            await _send_once(target, senders, {**payload, "answer": text, "media": list(media)}, text, media)
            return f"{target.describe()}" + (f" (attempt {attempt})" if attempt > 1 else "")
        except DeliveryFailed as exc:
            if not exc.retry or attempt == ATTEMPTS:
                return f"failed: {target.describe()}: {exc} (attempt {attempt} of {ATTEMPTS})"
        except (OSError, trio.TooSlowError) as exc:
            if attempt == ATTEMPTS:
                return f"failed: {target.describe()}: {type(exc).__name__}: {exc} (attempt {attempt} of {ATTEMPTS})"
        except Exception as exc:  # an httpx error or an adapter's own: recorded, retried
            if attempt == ATTEMPTS:
                return f"failed: {target.describe()}: {type(exc).__name__}: {exc} (attempt {attempt} of {ATTEMPTS})"
        await sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")  # pragma: no cover
