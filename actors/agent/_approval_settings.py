"""How approvals behave, read the way Hermes users write it.

``config.yaml``::

    approvals:
      mode: manual        # manual (ask a person) | off (run dangerous commands without asking)
      timeout: 300        # seconds an approval request waits; no answer denies
      deny: ["docker system prune*"]   # globs that are never run, whatever is approved
    command_allowlist:    # what "always" approved; Hermes writes its pattern descriptions here
      - recursive delete
      - git-force-push

``HERMES_YOLO_MODE=1`` (environment or ``.env``) and ``--yolo`` mean ``mode: off``. ``off``
skips the question for *dangerous* commands only: the hardline list (and the deny globs)
never run, whatever the mode.

``command_allowlist`` entries are our own pattern keys (``rm-recursive``) or what Hermes
saved there: its pattern descriptions (``recursive delete``) or the older regex-derived
keys (``rm``). Those are mapped to our keys by :data:`HERMES_ALLOWLIST_NAMES`; an entry
that names nothing we know is ignored and reported by :func:`unknown_allowlist_entries`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from ._config import ConfigError, read_config, read_dotenv

ApprovalMode = Literal["manual", "off"]
DEFAULT_TIMEOUT = 300.0

HERMES_ALLOWLIST_NAMES: dict[str, tuple[str, ...]] = {
    # Hermes pattern descriptions -> our keys
    "recursive delete": ("rm-recursive",),
    "recursive delete (long flag)": ("rm-recursive",),
    "delete in root path": ("rm-recursive",),
    "world-writable permissions": ("chmod-777",),
    "recursive world-writable (long flag)": ("chmod-777",),
    "recursive chown to root": ("chown-recursive-system",),
    "recursive chown to root (long flag)": ("chown-recursive-system",),
    "format filesystem": ("mkfs",),
    "disk copy": ("dd-disk", "raw-disk-read"),
    "sql drop": ("sql-drop",),
    "sql delete without where": ("sql-delete-all",),
    "sql truncate": ("sql-truncate",),
    "stop/disable system service": ("systemctl-stop",),
    "pipe remote content to shell": ("pipe-to-shell",),
    "execute remote script via process substitution": ("pipe-to-shell",),
    "xargs with rm": ("find-delete",),
    "find -exec rm": ("find-delete",),
    "find -delete": ("find-delete",),
    "git reset --hard (destroys uncommitted changes)": ("git-reset-hard",),
    "git force push (rewrites remote history)": ("git-force-push",),
    "git force push short flag (rewrites remote history)": ("git-force-push",),
    "git clean with force (deletes untracked files)": ("git-clean",),
    # Hermes's older regex-derived keys
    "rm": ("rm-recursive",),
    "chmod": ("chmod-777",),
    "mkfs": ("mkfs",),
    "dd": ("dd-disk", "raw-disk-read"),
    "find": ("find-delete",),
    "xargs": ("find-delete",),
    "systemctl": ("systemctl-stop",),
}
"""What Hermes writes in ``command_allowlist`` (lower-cased), and the keys it means here."""


@dataclasses.dataclass(frozen=True, slots=True)
class ApprovalSettings:
    """The approval policy every session of a runtime shares."""

    mode: ApprovalMode = "manual"
    timeout: float = DEFAULT_TIMEOUT
    """Seconds a request waits for an answer; then it is denied."""
    allowlist: frozenset[str] = frozenset()
    """Pattern keys approved for good (``command_allowlist``, mapped to our keys)."""
    deny: tuple[str, ...] = ()
    """``fnmatch`` globs that block a command outright (``approvals.deny``)."""
    source: str = ""
    """What set ``mode: off`` (``--yolo``, ``HERMES_YOLO_MODE``, ``config.yaml``), for the warning."""

    @property
    def yolo(self) -> bool:
        return self.mode == "off"


def allowlist_keys(entries: Any) -> frozenset[str]:
    """Our pattern keys for ``command_allowlist`` entries (ours as they are, Hermes's mapped)."""
    keys: set[str] = set()
    for entry in entries if isinstance(entries, (list, tuple)) else ():
        if not isinstance(entry, str) or not entry.strip():
            continue
        name = entry.strip()
        keys.update(HERMES_ALLOWLIST_NAMES.get(name.lower(), (name,)))
    return frozenset(keys)


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def load_approval_settings(
    home: Path, *, env: Mapping[str, str] | None = None, yolo: bool = False, config: Mapping[str, Any] | None = None
) -> ApprovalSettings:
    """Read ``approvals:`` and ``command_allowlist:``; ``--yolo`` or ``HERMES_YOLO_MODE`` turn asking off.

    Raises :class:`ConfigError` naming the file and the key when a value has the wrong shape.
    """
    env = os.environ if env is None else env
    config = read_config(home) if config is None else config
    where = home / "config.yaml"
    section = config.get("approvals") or {}
    if not isinstance(section, dict):
        msg = f"{where}: 'approvals' must be a mapping (mode, timeout, deny)"
        raise ConfigError(msg)
    raw_mode = section.get("mode", "manual")
    if raw_mode is False:  # YAML reads a bare `off` as false
        raw_mode = "off"
    mode = str(raw_mode).strip().lower()
    if mode == "smart":
        mode = "manual"  # no auxiliary judge here: a person decides
    if mode not in ("manual", "off"):
        msg = f"{where}: approvals.mode is {raw_mode!r}; use manual (ask before dangerous commands) or off"
        raise ConfigError(msg)
    timeout = section.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        msg = f"{where}: approvals.timeout must be a number of seconds above 0 (it is {timeout!r})"
        raise ConfigError(msg)
    deny = section.get("deny") or ()
    if not isinstance(deny, (list, tuple)) or not all(isinstance(g, str) for g in deny):
        msg = f'{where}: approvals.deny must be a list of command globs, such as ["docker system prune*"]'
        raise ConfigError(msg)
    source = "config.yaml (approvals.mode: off)" if mode == "off" else ""
    if yolo:
        mode, source = "off", "--yolo"
    elif _truthy(env.get("HERMES_YOLO_MODE")) or _truthy(read_dotenv(home / ".env").get("HERMES_YOLO_MODE")):
        mode, source = "off", "HERMES_YOLO_MODE"
    return ApprovalSettings(
        mode="off" if mode == "off" else "manual",
        timeout=float(timeout),
        allowlist=allowlist_keys(config.get("command_allowlist")),
        deny=tuple(deny),
        source=source,
    )
