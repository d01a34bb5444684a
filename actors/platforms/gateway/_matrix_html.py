"""The model's Markdown as Matrix HTML (``formatted_body`` with ``format:
org.matrix.custom.html``), pure.

Fenced code blocks become ``<pre><code class="language-x">``; inside a line, inline code, links
(http, https, mailto, matrix only), bold, italic and strike become their tags; ``#`` headings
and ``>`` quotes become blocks; lines are joined by ``<br>``. Everything else is escaped, so
the output is always well formed and a stray ``<`` in an answer shows as text. No nesting
beyond what a bold or a link label holds; an unclosed fence runs to the end.
"""

from __future__ import annotations

import html
import re

_INLINE = re.compile(
    r"(?P<tick>`+)(?P<code>.+?)(?P=tick)"
    r"|\[(?P<label>[^\]\n]+)\]\((?P<url>[^)\s]+)\)"
    r"|\*\*(?P<bold>[^*\n]+?)\*\*"
    r"|__(?P<bold2>[^_\n]+?)__"
    r"|~~(?P<strike>[^~\n]+?)~~"
    r"|(?<![\w*])\*(?P<italic>[^*\s](?:[^*\n]*?[^*\s])?)\*(?![\w*])"
    r"|(?<![\w_])_(?P<italic2>[^_\s](?:[^_\n]*?[^_\s])?)_(?![\w_])"
)
_SCHEMES = ("http://", "https://", "mailto:", "matrix:")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


def inline_html(text: str) -> str:
    """One line of Markdown as inline HTML."""
    out: list[str] = []
    pos = 0
    for m in _INLINE.finditer(text):
        out.append(_escape(text[pos : m.start()]))
        pos = m.end()
        if m.group("code") is not None:
            out.append(f"<code>{_escape(m.group('code'))}</code>")
        elif m.group("url") is not None:
            url = m.group("url")
            label = inline_html(m.group("label"))
            out.append(f'<a href="{html.escape(url, quote=True)}">{label}</a>' if url.lower().startswith(_SCHEMES) else _escape(m.group(0)))
        elif (bold := m.group("bold") or m.group("bold2")) is not None:
            out.append(f"<strong>{inline_html(bold)}</strong>")
        elif m.group("strike") is not None:
            out.append(f"<del>{inline_html(m.group('strike'))}</del>")
        else:
            out.append(f"<em>{inline_html(m.group('italic') or m.group('italic2'))}</em>")
    out.append(_escape(text[pos:]))
    return "".join(out)


def _code_block(info: str, lines: list[str]) -> str:
    language = info.split()[0] if info.split() else ""
    attribute = f' class="language-{html.escape(language, quote=True)}"' if language else ""
    return f"<pre><code{attribute}>{_escape(chr(10).join(lines))}\n</code></pre>"


def to_matrix_html(markdown: str) -> str:
    """``markdown`` as Matrix HTML (the plain text stays the event's ``body``)."""
    blocks: list[tuple[bool, str]] = []
    """(is a block element, html): inline rows are joined by ``<br>``."""
    lines = markdown.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            code: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                code.append(lines[i])
                i += 1
            i += 1  # the closing fence (or the end)
            blocks.append((True, _code_block(stripped[3:], code)))
            continue
        if stripped.startswith(">"):
            quoted: list[str] = []
            while i < len(lines) and lines[i].strip().startswith(">"):
                quoted.append(inline_html(lines[i].strip()[1:].lstrip()))
                i += 1
            blocks.append((True, f"<blockquote>{'<br>'.join(quoted)}</blockquote>"))
            continue
        heading = _HEADING.match(stripped)
        if heading:
            level = len(heading.group(1))
            blocks.append((True, f"<h{level}>{inline_html(heading.group(2))}</h{level}>"))
        else:
            blocks.append((False, inline_html(line)))
        i += 1
    out: list[str] = []
    for n, (block, text) in enumerate(blocks):
        if n and not block and not blocks[n - 1][0]:
            out.append("<br>")
        out.append(text)
    return "".join(out)
