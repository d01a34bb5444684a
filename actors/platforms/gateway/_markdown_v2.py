"""Markdown as models write it, converted to Telegram's MarkdownV2, pure.

From the Bot API's "Formatting options": in MarkdownV2 the characters
``_ * [ ] ( ) ~ ` > # + - = | { } . !`` must be escaped with ``\\`` everywhere outside an
entity's markup; inside ``pre`` and ``code`` only `````` ` `````` and ``\\`` are escaped; inside
a link's ``(...)`` only ``)`` and ``\\``. Bold is ``*x*``, italic ``_x_``, strikethrough
``~x~``, inline code ```x```, a fenced block keeps its language.

Converted: fenced code blocks, inline code, ``[text](url)``, ``**bold**`` / ``__bold__``,
``*italic*`` / ``_italic_``, ``~~strike~~``, ``# headings`` (as bold), ``> quotes``; the rest is
escaped text. Entities do not nest here (their inner text is escaped plain text), so the
output always parses; a piece Telegram still refuses is sent again as plain text by the adapter.
"""

from __future__ import annotations

import re

SPECIAL = re.compile(r"([_*\[\]()~`>#+\-=|{}.!\\])")
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)(?:^```[ \t]*$|\Z)", re.DOTALL | re.MULTILINE)
INLINE = re.compile(
    r"`(?P<code>[^`\n]+)`"
    r"|\[(?P<label>[^\]\n]+)\]\((?P<url>(?:[^()\s]|\([^()\s]*\))+)\)"  # balanced parentheses in a URL
    r"|\*\*(?P<bold>[^*\n]+?)\*\*"
    r"|__(?P<bold2>[^_\n]+?)__"
    r"|~~(?P<strike>[^~\n]+?)~~"
    r"|(?<![\w*])\*(?P<italic>[^*\s][^*\n]*?)\*(?![\w*])"
    r"|(?<![\w_])_(?P<italic2>[^_\s][^_\n]*?)_(?![\w_])"
)
HEADING = re.compile(r"^#{1,6}\s+(.*)$")
QUOTE = re.compile(r"^>\s?(.*)$")


def escape(text: str) -> str:
    """Plain text, every special character escaped."""
    return SPECIAL.sub(r"\\\1", text)


def _escape_code(text: str) -> str:
    return text.replace("\\", "\\\\").replace("`", "\\`")


def _escape_url(url: str) -> str:
    return url.replace("\\", "\\\\").replace(")", "\\)")


def _inline(text: str) -> str:
    out: list[str] = []
    at = 0
    for found in INLINE.finditer(text):
        out.append(escape(text[at : found.start()]))
        at = found.end()
        parts = found.groupdict()
        if parts["code"] is not None:
            out.append(f"`{_escape_code(parts['code'])}`")
        elif parts["label"] is not None:
            out.append(f"[{escape(parts['label'])}]({_escape_url(parts['url'])})")
        elif (bold := parts["bold"] or parts["bold2"]) is not None:
            out.append(f"*{escape(bold)}*")
        elif parts["strike"] is not None:
            out.append(f"~{escape(parts['strike'])}~")
        else:
            out.append(f"_{escape(parts['italic'] or parts['italic2'] or '')}_")
    out.append(escape(text[at:]))
    return "".join(out)


def _line(line: str) -> str:
    if heading := HEADING.match(line):
        return f"*{escape(heading.group(1).strip())}*"
    if quote := QUOTE.match(line):
        return f">{_inline(quote.group(1))}"
    return _inline(line)


def to_markdown_v2(text: str) -> str:
    """``text`` (Markdown) as Telegram MarkdownV2."""
    out: list[str] = []
    at = 0
    for block in FENCE.finditer(text):
        out.append("\n".join(_line(line) for line in text[at : block.start()].split("\n")))
        at = block.end()
        language = re.sub(r"[^\w+#-]", "", block.group(1).strip())
        body = block.group(2).rstrip("\n")
        out.append(f"```{language}\n{_escape_code(body)}\n```")
    out.append("\n".join(_line(line) for line in text[at:].split("\n")))
    return "".join(out)
