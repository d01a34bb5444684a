"""What a secret looks like: the one table of secret shapes.

Two places use it. The threat scan (:func:`actors.memory.scan_text`) refuses text bound for
the system prompt that carries a secret (:func:`find_secret`), and the terminal tool hides
secrets in a command's output before the model sees it (:func:`redact_secrets`). Both read
:data:`SECRET_PATTERNS`, so what one flags the other hides.

Each pattern marks the secret itself as its ``value`` group; what surrounds it (``sk-``,
``Bearer``, ``DB_PASSWORD=``) is context that tells a reader what was there and is kept
when redacting. Key shapes are case-sensitive (``AKIA`` is, ``akia`` is not); the words of
an assignment (``password``, ``Authorization``) are not.

A tripwire for known shapes, not a proof that a text holds no secret: a random password
in prose has no shape.
"""

from __future__ import annotations

import dataclasses
import re

REDACTED = "[REDACTED]"

SECRET_NAME = r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL"
"""The words that mark a variable name as holding a secret (``OPENAI_API_KEY``,
``GITHUB_TOKEN``, ``DB_PASSWORD``): an alternation for a regular expression."""

_SECRET_NAME = re.compile(SECRET_NAME, re.IGNORECASE)


@dataclasses.dataclass(frozen=True, slots=True)
class SecretPattern:
    """One shape of secret: what it is called and how to find it."""

    label: str
    """What it is, for a person ("a GitHub token"); never the secret itself."""
    pattern: re.Pattern[str]
    """Matches the secret with its context; the group ``value`` is the secret itself."""


@dataclasses.dataclass(frozen=True, slots=True)
class SecretFound:
    """A secret found in a text: what it looks like and the context before it."""

    label: str
    context: str
    """The text of the match before the secret (``sk-``, ``Bearer ``, ``password=``), at
    most 24 characters: safe to show."""


_TOKEN_START = r"(?<![A-Za-z0-9_-])"
"""A token starts here, not inside another. Where the rest of a shape may run over ``-`` and
letters, ``\\b`` would let every ``-sk-`` of a long run be a start, each scanning to the
run's end: quadratic on hostile output. From a token's start, each run is read once."""
_TOKEN_END = r"(?![A-Za-z0-9_-])"
"""The token ends here: no more token characters follow."""
_HAS_DIGIT = r"(?=[A-Za-z0-9_-]*[0-9])"
"""The token ahead holds a digit: real keys are random, words with dashes are not."""
_ASSIGNED_NAME = (
    r"(?=(?:[A-Za-z0-9]+_)*(?i:api_?key|access_?key|secret_?key|private_?key|key|token|secret|password|passwd|pwd|credentials?)[_=])"
    r"[A-Za-z0-9_]+"
)
"""A variable named like a secret, the secret word a whole part of the name: ``API_KEY``,
``db_password``, ``SECRET_KEY_BASE`` (but not ``TOKENIZERS_PARALLELISM`` or ``MAX_TOKENS``).
The word is found by a lookahead and the name read in one run, so a long line of name
parts costs linear time."""
_INLINE_NAME = (
    r"(?:[A-Za-z0-9]+[_-])*(?i:api[_-]?key|secret[_-]?key|access[_-]?key|private[_-]?key|access[_-]?token|auth[_-]?token|"
    r"refresh[_-]?token|bearer[_-]?token|client[_-]?secret|password|passwd|secret|token)"
)
_NOT_A_VALUE = r"(?![$<{%]|\[REDACTED)"
"""A variable reference (``$KEY``, ``${KEY}``, ``%KEY%``), a placeholder (``<your key>``) or
text already redacted is not a secret."""
_VALUE_CHAR = r"[A-Za-z0-9_\-/+.]"
"""A character of a credential's value in code or prose."""


def _shape(label: str, regex: str, flags: int = 0) -> SecretPattern:
    return SecretPattern(label, re.compile(regex, flags))


SECRET_PATTERNS: tuple[SecretPattern, ...] = (
    _shape(
        "a private key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?P<value>.*?)(?=-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        re.DOTALL,
    ),
    _shape("an Anthropic API key", rf"{_TOKEN_START}sk-ant-(?P<value>{_HAS_DIGIT}[A-Za-z0-9_-]{{20,}})"),
    _shape("an OpenAI-style API key (sk-...)", rf"{_TOKEN_START}sk-(?:proj-|svcacct-|admin-)?(?P<value>{_HAS_DIGIT}[A-Za-z0-9_-]{{20,}})"),
    _shape("a Stripe secret key", r"\b(?:sk|rk)_(?:live|test)_(?P<value>[A-Za-z0-9]{16,})"),
    _shape("a GitHub token", r"\bgh[pousr]_(?P<value>[A-Za-z0-9]{30,})"),
    _shape("a GitHub token", r"\bgithub_pat_(?P<value>[A-Za-z0-9_]{30,})"),
    _shape("a GitLab token", rf"\bglpat-(?P<value>[A-Za-z0-9_-]{{20,}}){_TOKEN_END}"),
    _shape("a Slack token", r"\bxox[abeprs]-(?P<value>[A-Za-z0-9-]{10,})"),
    _shape("an AWS access key", r"\b(?:AKIA|ASIA)(?P<value>[0-9A-Z]{16})\b"),
    _shape(
        "an AWS secret key",
        r"(?i:aws_?secret_?access_?key|aws_?secret_?key|secret_?access_?key)[\"']?\s*[:=]\s*[\"']?"
        r"(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
    ),
    _shape("a Google API key", rf"\bAIza(?P<value>[0-9A-Za-z_-]{{35}}){_TOKEN_END}"),
    _shape("a Hugging Face token", r"\bhf_(?P<value>[A-Za-z0-9]{30,})"),
    _shape("an npm token", r"\bnpm_(?P<value>[A-Za-z0-9]{36})\b"),
    _shape("a PyPI token", rf"\bpypi-(?P<value>AgE[A-Za-z0-9_-]{{50,}}){_TOKEN_END}"),
    _shape("a Telegram bot token", rf"\b[0-9]{{8,10}}:(?P<value>A[A-Za-z0-9_-]{{34}}){_TOKEN_END}"),
    _shape("a JSON Web Token", rf"{_TOKEN_START}(?P<value>eyJ[A-Za-z0-9_-]{{10,}}\.ey[A-Za-z0-9_-]{{10,}}\.[A-Za-z0-9_-]{{10,}}){_TOKEN_END}"),
    _shape(
        "an Authorization header",
        r"(?i:\bauthorization)[\"']?\s*[:=]\s*[\"']?(?i:bearer|token|basic)\s+(?P<value>[A-Za-z0-9._~+/=-]{8,})",
    ),
    _shape("a bearer token", r"(?i:\bbearer)\s+(?P<value>(?=[A-Za-z0-9._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{16,})"),
    # Environment style, a line of a .env file or of `env`: `DB_PASSWORD=swordfish`, `export TOKEN='...'`.
    _shape(
        "a credential assignment",
        rf"(?m)^[ \t]*(?:export[ \t]+)?{_ASSIGNED_NAME}=([\"']?){_NOT_A_VALUE}(?P<value>[^\s\"']{{4,}})",
    ),
    # Anywhere (code, YAML, JSON): `api_key = "..."`, `"client_secret": "..."`; the value a
    # whole token of 12 or more with a digit and a letter (not a word, not a call).
    _shape(
        "a credential assignment",
        rf"{_TOKEN_START}{_INLINE_NAME}[\"']?\s*[:=]\s*[\"']?{_NOT_A_VALUE}"
        rf"(?P<value>(?={_VALUE_CHAR}*[0-9])(?={_VALUE_CHAR}*[A-Za-z]){_VALUE_CHAR}{{12,}})(?![A-Za-z0-9_\-/+.(\[])",
    ),
)
"""Every secret shape, most specific first (an ``sk-ant-`` key is an Anthropic key before
it is an ``sk-`` key)."""


def find_secret(text: str) -> SecretFound | None:
    """The first secret in ``text`` by the order of :data:`SECRET_PATTERNS`, or None."""
    for shape in SECRET_PATTERNS:
        if found := shape.pattern.search(text):
            before = found.string[found.start() : found.start("value")]
            return SecretFound(shape.label, before[:24])
    return None


def redact_secrets(text: str) -> str:
    """``text`` with the value of every secret replaced by ``[REDACTED]``; context is kept."""
    for shape in SECRET_PATTERNS:
        text = shape.pattern.sub(_redact_match, text)
    return text


def _redact_match(found: re.Match[str]) -> str:
    start, end = found.start(), found.end()
    return found.string[start : found.start("value")] + REDACTED + found.string[found.end("value") : end]


def is_secret_name(name: str) -> bool:
    """Does a variable's name say it holds a secret (``*KEY*``, ``*TOKEN*``, ``*PASSWORD*``, ...)?"""
    return _SECRET_NAME.search(name) is not None
