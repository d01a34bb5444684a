"""``platforms: matrix:`` of config.yaml and the ``MATRIX_*`` variables of ``.env`` -> the
Matrix adapter's child spec.

```yaml
platforms:
  matrix:
    enabled: true                # the token comes from MATRIX_ACCESS_TOKEN
    extra:
      homeserver: https://matrix.example.org   # or MATRIX_HOMESERVER
      user_id: "@hermes:example.org"           # or MATRIX_USER_ID (checked against the token)
      allowed_users: ["@me:example.org"]       # also MATRIX_ALLOWED_USERS=@a:x,@b:y / GATEWAY_ALLOWED_USERS
      busy_policy: queue                       # interrupt | queue | steer
      require_mention: true                    # groups: answer only when mentioned or replied to
      sync_timeout: 30                         # seconds one /sync long poll waits
      chunk_limit: 16000                       # UTF-8 bytes per message
      streaming: false                         # show the answer while it comes (m.replace edits)
      edit_interval: 1.0                       # seconds between two edits
      tool_progress: false                     # while streaming: a line per tool call
```
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from actors.agent import ConfigError, HubRegistry
from actors.config._schema import SessionResetSection
from supervisor import ChildSpec

from ._access import AccessPolicy
from ._chats import Chats
from ._edit_stream import StreamSettings
from ._matrix import MATRIX_LIMIT, MatrixAdapter


class MatrixExtra(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    homeserver: str = ""
    user_id: str = ""
    allowed_users: list[str] = []
    busy_policy: Literal["interrupt", "queue", "steer"] = "queue"
    require_mention: bool = True
    sync_timeout: Annotated[float, msgspec.Meta(ge=1, le=600)] = 30.0
    chunk_limit: Annotated[int, msgspec.Meta(ge=500, le=60_000)] = MATRIX_LIMIT
    """Bytes of one message's body (Matrix refuses events over 64 KiB; the HTML counts too)."""
    encryption: bool = False
    """Hermes's key: end-to-end encryption; this build has none (true is refused)."""
    home_room: str = ""
    """Hermes's key (cron's default room); read, not used by this build."""
    context: str = ""
    batch_delay: Annotated[float, msgspec.Meta(ge=0, le=10)] = 0.8
    """Seconds a chat's message waits for the next of a burst (``_burst``); 0: no batching."""
    session_reset: SessionResetSection | None = None
    """This platform's reset policy; None: config.yaml's ``session_reset:``."""
    streaming: bool = False
    """Show the answer while it comes: one message, then ``m.replace`` edits (the last edit is the final reply)."""
    edit_interval: Annotated[float, msgspec.Meta(ge=0.0, le=60.0)] = 1.0
    """Seconds between two edits of the streamed message."""
    tool_progress: bool = False
    """While streaming: a line per tool call above the answer."""


def matrix_spec(
    extra: MatrixExtra,
    env: Mapping[str, str],
    *,
    token: str,
    allowed: frozenset[str],
    allow_all: bool,
    home: Path,
    hubs: HubRegistry,
    senders: dict[str, Any],
    hooks: Any = None,
    resets: SessionResetSection | None = None,
    tz: Any = None,
    workspace: Path | None = None,
    vision: bool = False,
) -> ChildSpec:
    """The adapter's spec; ``token``: ``platforms.matrix.token``; ``allowed`` / ``allow_all``: the
    gateway-wide allowlist; ``resets``: config.yaml's ``session_reset:`` (the platform's own wins);
    ``workspace``: where inbound files land and ``MEDIA:`` files come from; ``vision``: the model sees images."""
    homeserver = env.get("MATRIX_HOMESERVER") or extra.homeserver
    token = env.get("MATRIX_ACCESS_TOKEN") or token
    if not homeserver.startswith(("http://", "https://")):
        raise ConfigError(
            f"platforms.matrix is enabled but its homeserver is {homeserver or 'not set'!r}; put MATRIX_HOMESERVER=https://<your homeserver> in .env"
        )
    if not token:
        hint = " (password login is not built: create an access token, e.g. Element's Settings > Help & About)" if env.get("MATRIX_PASSWORD") else ""
        raise ConfigError(f"platforms.matrix is enabled but has no access token; put MATRIX_ACCESS_TOKEN=<token> in .env{hint}")
    if extra.encryption or (env.get("MATRIX_ENCRYPTION") or "").strip().lower() in ("1", "true", "yes", "on"):
        raise ConfigError("platforms.matrix: this build has no end-to-end encryption; use an unencrypted room and set encryption: false")
    users = frozenset(u.strip() for u in env.get("MATRIX_ALLOWED_USERS", "").split(",") if u.strip())
    policy = AccessPolicy(allowed=allowed | users | frozenset(extra.allowed_users), allow_all=allow_all, require_mention=extra.require_mention)
    kwargs = {
        "homeserver": homeserver,
        "token": token,
        "user_id": env.get("MATRIX_USER_ID") or extra.user_id,
        "sync_timeout": extra.sync_timeout,
        "chunk_limit": extra.chunk_limit,
        "home": home,
        "hubs": hubs,
        "policy": policy,
        "chats": Chats(mode=extra.busy_policy),
        "context": extra.context,
        "senders": senders,
        "hooks": hooks,
        "resets": extra.session_reset or resets or SessionResetSection(),
        "burst_window": extra.batch_delay,
        "tz": tz,
        "stream": StreamSettings(enabled=extra.streaming, interval=extra.edit_interval, tool_progress=extra.tool_progress),
        "workspace": workspace,
        "vision": vision,
    }
    return ChildSpec(id="matrix", actor=MatrixAdapter, kwargs=kwargs)
