"""``SOUL.md``: the agent's identity, read from HERMES_HOME as Hermes does.

Hermes puts ``HERMES_HOME/SOUL.md`` first in the system prompt, in place of its default
identity line ("You are Hermes ..."). The file is threat-scanned like every other prompt
file; a blocked or unreadable one leaves the default identity and a visible note saying why.

Reads a file: call from a worker thread, once per new session (the prompt is then frozen).
"""

from __future__ import annotations

from pathlib import Path

from ._threats import scan_text

SOUL_FILE = "SOUL.md"
MAX_SOUL_CHARS = 20_000
_MAX_READ_BYTES = 1_000_000


def soul_identity(home: Path, *, max_chars: int = MAX_SOUL_CHARS) -> str:
    """The identity ``HERMES_HOME/SOUL.md`` gives, or "" when there is none (the default applies).

    A file that cannot be read or fails the threat scan gives a one-line note in brackets,
    which the prompt builder shows after the default identity.
    """
    path = home / SOUL_FILE
    if not path.is_file():
        return ""
    try:
        with path.open("rb") as source:
            data = source.read(_MAX_READ_BYTES)
    except OSError as exc:
        return f"[{SOUL_FILE} in {home} could not be read: {exc.strerror or exc}]"
    text = data.decode("utf-8", errors="replace").removeprefix("\ufeff").strip()
    if not text:
        return ""
    threat = scan_text(text)
    if threat is not None:
        return f"[{SOUL_FILE} in {home} was blocked: {threat.label}]"
    if len(text) > max_chars:
        text = text[:max_chars] + f"\n[... {len(text) - max_chars:,} more characters of {SOUL_FILE} cut]"
    return text


def same_file(a: Path, b: Path) -> bool:
    """True when ``a`` and ``b`` name one existing file (the workdir's SOUL.md is home's)."""
    try:
        return a.samefile(b)
    except OSError:
        return False
