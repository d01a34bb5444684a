"""The threat scan for text that ends up in a system prompt (memory entries, context files,
skill descriptions).

Text in the system prompt is trusted more than anything a user or a web page says, so a
memory entry or an ``AGENTS.md`` is a place an attacker would like to write to. The scan
refuses four kinds of text:

- ``prompt_injection``: instructions that try to override the prompt ("ignore previous
  instructions", "system prompt override", fake chat-template role markers, "you are now
  a ...", "do not tell the user");
- ``exfiltration``: commands that send keys or the environment to a URL, read credential
  files, or plant SSH access;
- ``secret``: strings shaped like API keys, tokens or private keys (a secret in the
  system prompt is sent to the model provider with every request); the shapes are the
  table in ``_secrets.py``, the one the terminal tool redacts output with;
- ``invisible_unicode``: zero-width characters, bidirectional overrides and tag characters
  that hide text from a person reviewing the file.

Matching is on the NFKC-normalised text, case-insensitive except for key shapes, with any
whitespace (newlines included) between words. It is a tripwire for the obvious, not a
proof of safety.

The patterns run in the ``regex`` module, within a budget for the whole scan (half a second
and 2 µs a character).
Some are quadratic in a line's length ("a sender, then a secret later on the line" tried at
every ``curl``): with ``re``, 40,000 characters of ``curl curl ...`` took 5 s, and a context
file is read up to a megabyte. A scan out of time refuses the text (``unscannable``).
"""

from __future__ import annotations

import dataclasses
import time
import unicodedata
from typing import Literal

import regex

from ._secrets import SECRET_NAME, find_secret

ThreatKind = Literal["prompt_injection", "exfiltration", "secret", "invisible_unicode", "unscannable"]


@dataclasses.dataclass(frozen=True, slots=True)
class Threat:
    """What the scan found: its kind and a one-line reason for a person or a model."""

    kind: ThreatKind
    reason: str
    """What was found, with an excerpt: for a tool result or an error message."""
    label: str
    """What was found, without the text itself: for notes inside a system prompt, which
    must not carry the blocked text in with them."""

    def __str__(self) -> str:
        return self.reason


_I = regex.IGNORECASE

SCAN_BUDGET_S = 0.5
"""Seconds the patterns may take over one text, together, plus :data:`SCAN_BUDGET_PER_CHAR_S`
for each character (a plain megabyte takes about a second)."""
SCAN_BUDGET_PER_CHAR_S = 2e-6

_INJECTION: list[tuple[regex.Pattern[str], str]] = [
    (
        regex.compile(
            r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:(?:all|any|the|your|of|these|those)\s+)*"
            r"(?:previous|prior|above|earlier|preceding|former|original|system|existing)\s+"
            r"(?:instructions?|prompts?|rules|directions|directives|guidelines|messages|context)",
            _I,
        ),
        "prompt injection",
    ),
    (regex.compile(r"\b(?:ignore|disregard)\s+(?:all|any|your)\s+(?:instructions|rules|guidelines)\b", _I), "prompt injection"),
    (regex.compile(r"\bsystem\s+prompt\s+override\b", _I), "system prompt override"),
    (
        regex.compile(r"\b(?:new|updated|replacement|real|actual)\s+system\s+(?:prompt|instructions)\s*[:=]", _I),
        "system prompt override",
    ),
    (regex.compile(r"\byour\s+new\s+(?:instructions|system\s+prompt|role|directives)\b", _I), "system prompt override"),
    (
        regex.compile(r"<\|(?:im_start|im_end|system|endoftext)\|>|</?\s*system\s*>|\[/?(?:SYSTEM|INST)\]", _I),
        "a fake chat-template role marker",
    ),
    (
        regex.compile(r"\byou\s+are\s+now\s+(?:a|an|the|DAN|no\s+longer|unrestricted|jailbroken|free\s+of)\b", _I),
        "role override",
    ),
    (regex.compile(r"\b(?:developer|DAN|jailbreak|god)\s+mode\s+(?:enabled|activated|on)\b", _I), "role override"),
    (regex.compile(r"\b(?:enable|enter|activate)\s+(?:developer|DAN|jailbreak|god)\s+mode\b", _I), "role override"),
    (
        regex.compile(
            r"\bpretend\s+(?:that\s+)?(?:you\s+are|to\s+be)\b[^\n]{0,60}\b(?:without|no)\s+"
            r"(?:restrictions|rules|filters|guidelines|limits)\b",
            _I,
        ),
        "role override",
    ),
    (
        regex.compile(r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|reveal\s+(?:this\s+|it\s+)?to|mention\s+(?:this\s+|it\s+)?to)\s+the\s+user\b", _I),
        "hiding things from the user",
    ),
    (regex.compile(r"\bwithout\s+(?:telling|informing|notifying)\s+the\s+user\b", _I), "hiding things from the user"),
    (regex.compile(r"\bhide\s+(?:this|it|that)\s+from\s+the\s+user\b", _I), "hiding things from the user"),
]

_SENDERS = r"(?:curl|wget|nc|ncat|netcat|socat|httpie|scp|rsync|Invoke-WebRequest|Invoke-RestMethod|iwr|irm|requests\.(?:get|post|put))"
_SECRET_VAR = rf"\$\{{?(?-i:[A-Z0-9_]*(?:{SECRET_NAME})[A-Z0-9_]*)"
"""An environment variable named like a secret (upper case, as environment variables are)."""

_EXFILTRATION: list[tuple[regex.Pattern[str], str]] = [
    (regex.compile(rf"\b{_SENDERS}\b[^\n]*{_SECRET_VAR}", _I), "a command that sends a secret variable over the network"),
    (regex.compile(rf"{_SECRET_VAR}[^\n]*\|\s*{_SENDERS}\b", _I), "a command that sends a secret variable over the network"),
    (regex.compile(rf"\bhttps?://\S*{_SECRET_VAR}", _I), "a URL that carries a secret variable"),
    (
        regex.compile(rf"\b(?:env|printenv|set|export\s+-p)\b\s*\|\s*(?:base64\s*\|\s*)?{_SENDERS}\b", _I),
        "a command that sends the environment over the network",
    ),
    (
        regex.compile(rf"\b{_SENDERS}\b[^\n]*(?:\$\(\s*(?:env|printenv)\s*\)|`\s*(?:env|printenv)\s*`|/proc/self/environ|os\.environ)", _I),
        "a command that sends the environment over the network",
    ),
    (
        regex.compile(rf"\b{_SENDERS}\b[^\n]*(?:-d|--data(?:-binary|-raw)?|-F|--form|-T|--upload-file)\s*@?\S*(?:\.env|\.netrc|credentials)\b", _I),
        "a command that uploads a credentials file",
    ),
    (
        regex.compile(
            r"\b(?:cat|less|head|tail|base64|xxd|strings|scp|cp)\s+(?:-\S+\s+)*\S*"
            r"(?:\.env|\.netrc|\.pgpass|\.npmrc|\.pypirc|\.git-credentials|id_rsa|id_ed25519|\.aws/credentials|credentials\.json)\b",
            _I,
        ),
        "reading a credentials file",
    ),
    (regex.compile(r"\bauthorized_keys\b", _I), "planting SSH access (authorized_keys)"),
    (regex.compile(r"(?:\$HOME|\$\{HOME\}|~)/\.ssh\b", _I), "access to ~/.ssh"),
    (regex.compile(r"(?:\$HOME|\$\{HOME\}|~)/\.hermes/\.env\b", _I), "access to Hermes's .env"),
]

_INVISIBLE = frozenset([*range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2060, 0x2065), *range(0x2066, 0x206A), 0xFEFF, 0x180E])
"""Zero-width characters, LRM/RLM, bidi embeddings and overrides, bidi isolates, word
joiners and invisible operators, the BOM used as ZWNBSP, the Mongolian vowel separator."""


def _invisible(char: str) -> bool:
    code = ord(char)
    return code in _INVISIBLE or 0xE0000 <= code <= 0xE007F  # tag characters ("ASCII smuggling")


def scan_text(text: str) -> Threat | None:
    """The first threat found in ``text``, or None when it looks ordinary."""
    for index, char in enumerate(text):
        if _invisible(char):
            name = unicodedata.name(char, "unnamed")
            label = f"invisible Unicode character U+{ord(char):04X} {name}"
            return Threat("invisible_unicode", f"{label} at position {index} (it can hide text from a reader)", label)
    normal = unicodedata.normalize("NFKC", text)
    budget = SCAN_BUDGET_S + SCAN_BUDGET_PER_CHAR_S * len(normal)
    until = time.monotonic() + budget
    try:
        for pattern, label in _INJECTION:
            if found := pattern.search(normal, timeout=_left(until)):
                return Threat("prompt_injection", f"looks like {label} ({_excerpt(found.group(0))!r})", f"looks like {label}")
        for pattern, label in _EXFILTRATION:
            if found := pattern.search(normal, timeout=_left(until)):
                return Threat("exfiltration", f"looks like {label} ({_excerpt(found.group(0))!r})", f"looks like {label}")
    except TimeoutError:
        label = "a text too long or too repetitive to check"
        return Threat("unscannable", f"{label}: {len(text):,} characters took over {budget:.1f} s; shorten it", label)
    if secret := find_secret(normal):
        summary = f"contains what looks like {secret.label}"
        shown = f" ({secret.context}...)" if secret.context else ""
        return Threat("secret", f"{summary}{shown}; secrets belong in .env, not here", summary)
    return None


def _left(until: float) -> float:
    return max(0.001, until - time.monotonic())


def _excerpt(matched: str, limit: int = 60) -> str:
    flat = " ".join(matched.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
