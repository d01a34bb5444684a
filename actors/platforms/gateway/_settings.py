"""``platforms:`` of config.yaml (Hermes's layout) and the gateway's ``.env`` secrets -> the
adapters' child specs.

```yaml
platforms:
  telegram:
    enabled: true                 # the token comes from TELEGRAM_BOT_TOKEN (or token:)
    extra:
      base_url: https://api.telegram.org
      poll_timeout: 30
      allowed_users: [12345]      # also TELEGRAM_ALLOWED_USERS=12345,678 / GATEWAY_ALLOWED_USERS
      busy_policy: queue          # interrupt | queue | steer
      require_mention: true       # groups: answer only when mentioned or replied to
      streaming: false            # show the answer while it comes, by editing one message
      edit_interval: 1.0          # seconds between two edits of it
      tool_progress: false        # a line per tool call in that message ("🔧 terminal: ls")
      batch_delay: 0.8            # a burst of one chat's messages within this many seconds is one turn (0: off)
      session_reset: {mode: idle, idle_minutes: 60}   # this platform's reset policy (default: session_reset:)
  webhook:
    enabled: true                 # or WEBHOOK_ENABLED=true
    extra:
      host: 127.0.0.1
      port: 8644                  # or WEBHOOK_PORT
      secret: ...                 # the routes' default; or WEBHOOK_SECRET
      routes:
        github: {secret: ..., events: [push], prompt: "...{repository.name}...", deliver_url: https://..., max_chars: 0}
```

Errors name the key and what it must be (:class:`ConfigError`).
"""

from __future__ import annotations

import dataclasses
import zoneinfo
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from actors.agent import ConfigError, HubRegistry
from actors.config import HermesConfig
from actors.config._schema import SessionResetSection
from supervisor import Backoff, ChildSpec, Intensity

from ._access import AccessPolicy
from ._chats import Chats
from ._edit_stream import StreamSettings
from ._telegram import TelegramAdapter
from ._webhook import Route, WebhookAdapter

SUPPORTED = ("matrix", "telegram", "webhook")
MIN_CHUNK = 64
"""The smallest ``max_chars`` of a webhook route (room for a piece's text, ``(i/N)`` and a fence)."""


class TelegramExtra(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    base_url: str = "https://api.telegram.org"
    poll_timeout: Annotated[float, msgspec.Meta(ge=0, le=600)] = 30.0
    allowed_users: list[str | int] = []
    busy_policy: Literal["interrupt", "queue", "steer"] = "queue"
    require_mention: bool = True
    context: str = ""
    """A line added to the system prompt of this platform's turns (a persona, house rules)."""
    streaming: bool = False
    """Show the answer while it comes, by editing one message (the last edit is the final reply)."""
    edit_interval: Annotated[float, msgspec.Meta(ge=0.0, le=60.0)] = 1.0
    """Seconds between two edits of the streamed message (Telegram allows about one a second)."""
    tool_progress: bool = False
    """While streaming: a line per tool call above the answer."""
    batch_delay: Annotated[float, msgspec.Meta(ge=0, le=10)] = 0.8
    """Seconds a chat's message waits for the next of a burst (``_burst``); 0: no batching."""
    session_reset: SessionResetSection | None = None
    """This platform's reset policy; None: config.yaml's ``session_reset:``."""


class RouteExtra(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    secret: str = ""
    events: list[str] = []
    prompt: str = ""
    deliver_url: str = ""
    max_chars: Annotated[int, msgspec.Meta(ge=0)] = 0
    """An answer longer than this is POSTed in numbered pieces (0: one POST, any length)."""
    skills: list[str] = []
    """Hermes's key; read, not applied by this build."""
    deliver: str = ""
    """Hermes's key (github_comment, telegram, ...); this build delivers to ``deliver_url`` only."""


class WebhookExtra(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    host: str = "127.0.0.1"
    port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 8644
    secret: str = ""
    routes: dict[str, RouteExtra] = {}
    context: str = ""
    session_reset: SessionResetSection | None = None


@dataclasses.dataclass(frozen=True)
class Gateway:
    specs: tuple[ChildSpec, ...]
    notes: tuple[str, ...]
    """Lines ``hermes serve`` prints at start (adapters not supported, missing tokens)."""
    senders: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The running adapters' senders by platform (each adapter puts its own in while it runs):
    the scheduler's ``Senders.platforms``."""

    def supervisor_options(self) -> dict[str, Any]:
        """How ``/platforms`` restarts its children when adapters run: with backoff (a platform
        outage that crashes an adapter is retried calmly) and room for a few restarts a minute,
        so one adapter's crash loop does not take the API server down with it."""
        if not self.specs:
            return {}
        return {"backoff": Backoff(initial=0.5, factor=2.0, maximum=30.0), "intensity": Intensity(max_restarts=10, within=60.0)}


def _extra(name: str, data: dict[str, Any], tp: type[Any]) -> Any:
    try:
        return msgspec.convert(data, tp, strict=False)
    except msgspec.ValidationError as exc:
        where = str(exc).rpartition(" - at `$")[2].rstrip("`")
        raise ConfigError(
            f"config.yaml: platforms.{name}.extra{where}: {str(exc).partition(' - at')[0]}; fix it (the README's 'Chat platforms' section shows the layout)"
        ) from None


def _users(text: str) -> frozenset[str]:
    return frozenset(u.strip() for u in text.split(",") if u.strip())


def _yes(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _workspace(config: HermesConfig, home: Path) -> Path:
    """The sessions' working directory (``terminal.cwd``): inbound files land there, ``MEDIA:`` files come from there."""
    from actors.agent._session_settings import workdir

    return workdir(config.terminal.cwd, home / "config.yaml", Path.cwd())


def _sees_images(config: HermesConfig) -> bool:
    """``model.vision``, else what the model's name says (as the API server judges it)."""
    from actors.agent._model import ModelSettings

    model = config.model.model or config.model.default
    return ModelSettings(model=model, base_url="", api_key="", vision=config.model.vision).sees_images


def _timezone(config: HermesConfig) -> zoneinfo.ZoneInfo | None:
    if not config.timezone:
        return None
    try:
        return zoneinfo.ZoneInfo(config.timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"config.yaml: timezone: {config.timezone!r} is not a time zone; use a name like Europe/Berlin, or leave it out") from None


def load_gateway(config: HermesConfig, env: Mapping[str, str], *, home: Path, hubs: HubRegistry, hooks: Any = None) -> Gateway:
    """The adapters to start; pure but for building specs. ``hooks``: the runtime's hooks
    (``pre_gateway_dispatch``, ``session:*``)."""
    tz = _timezone(config) if any(e.enabled for e in config.platforms.values()) else None
    specs: list[ChildSpec] = []
    notes: list[str] = []
    senders: dict[str, Any] = {}
    platforms = dict(config.platforms)
    common_allowed = _users(env.get("GATEWAY_ALLOWED_USERS", ""))
    allow_all = _yes(env.get("GATEWAY_ALLOW_ALL_USERS"))
    for name, entry in sorted(platforms.items()):
        if entry.enabled and name not in SUPPORTED:
            notes.append(f"platforms.{name}: this build has no {name} adapter (it has {', '.join(SUPPORTED)}); it is not started")
    telegram = platforms.get("telegram")
    if telegram is not None and telegram.enabled:
        extra = _extra("telegram", telegram.extra, TelegramExtra)
        token = env.get("TELEGRAM_BOT_TOKEN") or telegram.token
        if not token:
            raise ConfigError("platforms.telegram is enabled but has no bot token; put TELEGRAM_BOT_TOKEN=<token from @BotFather> in .env")
        allowed = common_allowed | _users(env.get("TELEGRAM_ALLOWED_USERS", "")) | frozenset(str(u) for u in extra.allowed_users)
        policy = AccessPolicy(allowed=allowed, allow_all=allow_all, require_mention=extra.require_mention)
        kwargs = {
            "token": token,
            "base_url": extra.base_url,
            "poll_timeout": extra.poll_timeout,
            "home": home,
            "hubs": hubs,
            "policy": policy,
            "chats": Chats(mode=extra.busy_policy),
            "context": extra.context,
            "senders": senders,
            "stream": StreamSettings(enabled=extra.streaming, interval=extra.edit_interval, tool_progress=extra.tool_progress),
            "workspace": _workspace(config, home),
            "vision": _sees_images(config),
            "hooks": hooks,
            "resets": extra.session_reset or config.session_reset,
            "burst_window": extra.batch_delay,
            "tz": tz,
        }
        specs.append(ChildSpec(id="telegram", actor=TelegramAdapter, kwargs=kwargs))
    matrix = platforms.get("matrix")
    if matrix is not None and matrix.enabled:  # _matrix_settings.py
        from ._matrix_settings import MatrixExtra, matrix_spec

        specs.append(
            matrix_spec(
                _extra("matrix", matrix.extra, MatrixExtra),
                env,
                token=matrix.token,
                allowed=common_allowed,
                allow_all=allow_all,
                home=home,
                hubs=hubs,
                senders=senders,
                hooks=hooks,
                resets=config.session_reset,
                tz=tz,
                workspace=_workspace(config, home),
                vision=_sees_images(config),
            )
        )
    webhook = platforms.get("webhook")
    if (webhook is not None and webhook.enabled) or _yes(env.get("WEBHOOK_ENABLED")):
        extra = _extra("webhook", webhook.extra if webhook is not None else {}, WebhookExtra)
        port = int(env["WEBHOOK_PORT"]) if env.get("WEBHOOK_PORT", "").isdigit() else extra.port
        default_secret = env.get("WEBHOOK_SECRET") or extra.secret
        routes = {}
        for route_name, route in extra.routes.items():
            secret = route.secret or default_secret
            if not secret:
                raise ConfigError(
                    f"platforms.webhook.extra.routes.{route_name} has no secret; set its secret (or WEBHOOK_SECRET in .env), or INSECURE_NO_AUTH for local tests"
                )
            if 0 < route.max_chars < MIN_CHUNK:
                raise ConfigError(f"platforms.webhook.extra.routes.{route_name}.max_chars is {route.max_chars}; use 0 (no limit) or at least {MIN_CHUNK}")
            routes[route_name] = Route(
                name=route_name, secret=secret, events=frozenset(route.events), prompt=route.prompt, deliver_url=route.deliver_url, max_chars=route.max_chars
            )
        if not routes:
            notes.append("platforms.webhook: no routes (platforms.webhook.extra.routes); every request will be a 404")
        kwargs = {
            "host": extra.host,
            "port": port,
            "routes": routes,
            "home": home,
            "hubs": hubs,
            "policy": AccessPolicy(allow_all=True),
            "chats": Chats(mode="queue"),
            "context": extra.context,
            "senders": senders,
            "hooks": hooks,
            "resets": extra.session_reset or config.session_reset,
            "tz": tz,
            "workspace": _workspace(config, home),
        }
        specs.append(ChildSpec(id="webhook", actor=WebhookAdapter, kwargs=kwargs))
    return Gateway(specs=tuple(specs), notes=tuple(notes), senders=senders)
