"""How a command looks: ANSI escapes stripped, Unicode normalised, invisible characters removed.

:func:`normalize_command` gives the spelling the detector judges beside the command as
written; :func:`display_command` the spelling an approval prompt shows, where nothing can
hide; :func:`strip_ansi` also cleans command output.
"""

from __future__ import annotations

import re
import unicodedata

_ANSI = re.compile(
    r"""
      \x1b\[[0-?]*[ -/]*[@-~]              # CSI: colours, cursor movement
    | \x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?   # OSC: titles, hyperlinks
    | \x1b[PX^_][^\x1b]*(?:\x1b\\)?        # DCS, SOS, PM, APC strings
    | \x1b[ -/]*[0-~]                      # two-character and nF escapes
    | \x9b[0-?]*[ -/]*[@-~]                # 8-bit CSI
    | \x1b                                 # a lone ESC
    """,
    re.VERBOSE,
)
_INVISIBLE_EXTRA = frozenset("\u115f\u1160\u3164\uffa0\u2800")
"""Fillers that render as nothing but are letters, not format characters."""
_HSPACE = re.compile(r"[ \t\f\v]+")


def strip_ansi(text: str) -> str:
    """Remove terminal escape sequences (colours, cursor moves, titles, hyperlinks)."""
    return _ANSI.sub("", text)


def _visible(char: str) -> bool:
    if char in "\n\t":
        return True
    if char in _INVISIBLE_EXTRA:
        return False
    # Cf: zero-width spaces and joiners, bidi controls, BOM, soft hyphen; Cc: control
    # characters; Mn: combining marks left over after NFKC composition.
    return unicodedata.category(char) not in ("Cf", "Cc", "Mn")


def normalize_command(command: str) -> str:
    """What the command looks like to a reader: the spelling the detector judges.

    ANSI escapes stripped, NFKC (full-width ``ｒｍ`` becomes ``rm``), invisible and
    control characters removed, carriage returns made newlines, runs of blanks collapsed
    to one space, blank lines dropped.
    """
    text = strip_ansi(command).replace("\r\n", "\n").replace("\r", "\n")
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in text if _visible(c))
    lines = (_HSPACE.sub(" ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


_IFS = re.compile(r"\$\{IFS[^}]*\}|\$IFS\b")
_IFS_GLUED = re.compile(r"""[^\s="';|&(]\$\{?IFS\b|\$\{IFS[^}]*\}[^\s;|&)"']|\$IFS\b[^\s;|&)"']""")
_SPLIT_FILLERS = re.compile(r"\$\{?[0-9@*]\}?")


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")


def hidden_character(command: str) -> str | None:
    """The first control, escape or invisible character in ``command`` (what a reader would not see), or None.

    A lone carriage return counts: a terminal shows the text after it over the text before.
    """
    found = _CONTROL.search(command)
    if found:
        return found.group()
    if command.isascii():
        return None
    return next((c for c in command if c in _INVISIBLE_EXTRA or unicodedata.category(c) == "Cf"), None)


def ifs_spelling(command: str) -> str | None:
    """``command`` with ``$IFS`` word splitting spelled as the spaces bash sees, or None when it uses none.

    Only ``$IFS`` glued to other characters counts (``rm${IFS}-rf``): ``old=$IFS`` or
    ``"$IFS"`` are how scripts save and use it.
    """
    if not _IFS_GLUED.search(command):
        return None
    return _SPLIT_FILLERS.sub("", _IFS.sub(" ", command))


def display_command(command: str) -> str:
    """The command with control and invisible characters made visible (``\\x1b``, ``\\u200b``).

    What an approval prompt shows, so that escapes cannot disguise what will run.
    """
    out = []
    for char in command:
        if char in "\n\t" or (char.isprintable() and unicodedata.category(char) not in ("Cf", "Mn")):
            out.append(char)
        elif ord(char) < 0x100:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(f"\\u{ord(char):04x}")
    return "".join(out)
