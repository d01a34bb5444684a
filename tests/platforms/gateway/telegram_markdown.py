"""Telegram's MarkdownV2 parser as the test Bot API server applies it, written from the Bot API's
"Formatting options": ``\\`` escapes any character; ``*bold*``, ``_italic_``, ``__underline__``,
``~strike~``, ``||spoiler||`` must be closed; ```code``` and fenced ``pre`` blocks end at an
unescaped backtick (fence); ``[text](url)``; ``>`` opens a quote at a line start; every other
reserved character (``_*[]()~`>#+-=|{}.!``) must be escaped, else the answer is a 400 "Bad
Request: can't parse entities: ...". Returns the text a user sees and the entity kinds.
"""

from __future__ import annotations

RESERVED = set("_*[]()~`>#+-=|{}.!")


class CantParse(Exception):
    pass


def _until(text: str, i: int, end: str) -> tuple[str, int]:
    """The content from ``i`` to the next unescaped ``end`` (escapes resolved), and the index after it."""
    out = []
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
            continue
        if text.startswith(end, i):
            return "".join(out), i + len(end)
        out.append(text[i])
        i += 1
    raise CantParse(f"Can't find end of the entity starting at byte offset {i}")


def parse_markdown_v2(text: str) -> tuple[str, list[str]]:
    plain: list[str] = []
    entities: list[str] = []
    open_: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 >= len(text):
                raise CantParse("Can't find end of the escape at the end of the text")
            plain.append(text[i + 1])
            i += 2
        elif text.startswith("```", i):
            newline = text.find("\n", i + 3)
            start = newline + 1 if newline != -1 else i + 3
            body, i = _until(text, start, "```")
            plain.append(body)
            entities.append("pre")
        elif c == "`":
            body, i = _until(text, i + 1, "`")
            plain.append(body)
            entities.append("code")
        elif c == "[":
            label_end = text.find("]", i)
            if label_end == -1 or not text.startswith("(", label_end + 1):
                raise CantParse(f"Character '[' is reserved and must be escaped with the preceding '\\' (offset {i})")
            label, _ = parse_markdown_v2(text[i + 1 : label_end])
            _, i = _until(text, label_end + 2, ")")
            plain.append(label)
            entities.append("text_link")
        elif c == ">" and (i == 0 or text[i - 1] == "\n"):
            entities.append("blockquote")
            i += 1
        elif text.startswith("__", i) or text.startswith("||", i):
            mark = text[i : i + 2]
            if open_ and open_[-1] == mark:
                open_.pop()
                entities.append({"__": "underline", "||": "spoiler"}[mark])
            else:
                open_.append(mark)
            i += 2
        elif c in "*_~":
            if open_ and open_[-1] == c:
                open_.pop()
                entities.append({"*": "bold", "_": "italic", "~": "strikethrough"}[c])
            else:
                open_.append(c)
            i += 1
        elif c in RESERVED:
            raise CantParse(f"Character '{c}' is reserved and must be escaped with the preceding '\\'")
        else:
            plain.append(c)
            i += 1
    if open_:
        raise CantParse(f"Can't find end of {open_[-1]!r} entity")
    return "".join(plain), entities
