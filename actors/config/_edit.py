"""``hermes config set``: change one value of config.yaml, keeping its comments, order and quoting.

ruamel.yaml's round-trip mode edits the document in place (PyYAML drops comments). The new text
is validated by the typed loader *before* anything is written, then written atomically: a
temporary file in the same directory, flushed and fsynced, given the old file's mode (0600 for
a new one), renamed over the old one, and the directory fsynced. A refused value leaves the
file byte for byte as it was.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.error import YAMLError as RoundTripError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString
from ruamel.yaml.tokens import CommentToken

from actors._atomic import write_atomic

from ._errors import ConfigError


class EditRefused(ConfigError):
    """The path or the value cannot be set; the message says why and what to do."""


def split_key(key: str) -> list[str | int]:
    """``custom_providers.0.name`` or ``custom_providers[0].name`` -> ``["custom_providers", 0, "name"]``."""
    parts: list[str | int] = []
    for part in re.sub(r"\[(\d+)\]", r".\1", key).split("."):
        if not part:
            raise EditRefused(f"{key!r} is not a key path; write sections and keys with dots, such as compression.threshold")
        parts.append(int(part) if part.isdigit() else part)
    return parts


def parse_value(text: str, takes_text: bool = False) -> Any:
    """``VALUE`` as YAML (YAML 1.1, as the loader reads it): a scalar or a list; a mapping is refused.

    ``takes_text``: the key takes this text as a string (a model name ``3.5``, ``approvals.mode
    off``), so it is kept as written rather than read as a number or a boolean.
    """
    if text == "" or takes_text:
        return _round_trip(text)
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        raise EditRefused(f"{text!r} is not a YAML value; quote it, for example '\"{text}\"'") from None
    if isinstance(value, dict):
        raise EditRefused("a value is a scalar or a list ([a, b]); set a mapping's keys one at a time (section.key VALUE)")
    return _round_trip(value)


def _round_trip(value: Any) -> Any:
    if isinstance(value, list):
        seq = CommentedSeq([_round_trip(item) for item in value])
        seq.fa.set_flow_style()
        return seq
    if isinstance(value, str) and not _reads_back(value):
        return DoubleQuotedScalarString(value)  # "off", "yes", "1.0": a string only when quoted
    return value


def _reads_back(text: str) -> bool:
    try:
        return bool(yaml.safe_load(text) == text)
    except yaml.YAMLError:
        return False


def edited_text(text: str | None, key: str, value: Any) -> str:
    """``text`` (None: no file yet) with ``key`` set to ``value``, comments and layout kept."""
    editor = YAML(typ="rt")
    editor.preserve_quotes = True
    editor.width = 4096  # never re-wrap long lines
    try:
        if text and text.strip():
            mapping, offset = _layout(text)
            editor.indent(mapping=mapping, sequence=offset + 2, offset=offset)
            document = editor.load(text)
        else:
            document = None
    except RoundTripError as exc:
        raise EditRefused(f"config.yaml cannot be edited: it is not valid YAML ({str(exc).splitlines()[0]}); fix it first") from None
    document = CommentedMap() if document is None else document
    if not isinstance(document, CommentedMap):
        raise EditRefused("config.yaml does not hold a mapping of settings; fix it first")
    container, last = _walk(document, split_key(key), key)
    if isinstance(container, CommentedMap) and last not in container and container:
        _append(container, last, value)
    else:
        container[last] = value
    out = io.StringIO()
    editor.dump(document, out)
    return out.getvalue()


_KEY_LINE = re.compile(r"^( *)[^\s#-][^:#]*:(\s|$)")
_ITEM_LINE = re.compile(r"^( *)- ")


def _layout(text: str) -> tuple[int, int]:
    """The file's mapping indent and how far a list's dashes sit from their key (ruamel applies one
    layout to the whole document: the file's own is kept where it is consistent)."""
    mapping, offset = 0, None
    parent = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, item = _KEY_LINE.match(line), _ITEM_LINE.match(line)
        if key and len(key.group(1)) and (not mapping or len(key.group(1)) < mapping):
            mapping = len(key.group(1))
        if item and offset is None and parent is not None:
            offset = max(len(item.group(1)) - parent, 0)
        parent = len(key.group(1)) if key and line.rstrip().endswith(":") else None
    return mapping or 2, offset if offset is not None else 0


def _append(mapping: CommentedMap, key: str | int, value: Any) -> None:
    """Add ``key`` last in ``mapping``. ruamel keeps the blank lines and comments that follow a
    mapping (up to the next section) on its last item; they move to the new key, so that it goes
    right after the last item instead of under the next section's comment."""
    owner: Any = mapping
    last: Any = next(reversed(list(mapping)))
    while isinstance(owner[last], CommentedMap) and owner[last]:  # the comment sits on the deepest last item
        owner, last = owner[last], next(reversed(list(owner[last])))
    mapping[key] = value
    entry = owner.ca.items.get(last)
    token = entry[2] if entry and len(entry) > 2 else None
    if token is None or "\n" not in token.value.rstrip("\n"):
        return
    head, _, rest = token.value.partition("\n")
    token.value = head + "\n"
    mapping.ca.items[key] = [None, None, CommentToken("\n" + rest, CommentMark(0), None), None]


def _walk(document: CommentedMap, parts: list[str | int], key: str) -> tuple[Any, str | int]:
    """The mapping or list that holds the last part, creating mappings on the way."""
    node: Any = document
    i = 0
    while True:
        if isinstance(node, list):
            index = parts[i]
            if not isinstance(index, int) or index >= len(node):
                raise EditRefused(f"{key}: {'.'.join(map(str, parts[:i])) or 'the list'} has {len(node)} items; use an index below {len(node)}")
            if i == len(parts) - 1:
                return node, index
            node, i = node[index], i + 1
            continue
        if not isinstance(node, dict):
            raise EditRefused(f"{key}: {'.'.join(map(str, parts[:i]))} is a value, not a section; set it directly or remove it first")
        # A key with dots of its own ("gpt-4.1" under pricing) is matched whole when it exists.
        taken = next((n for n in range(len(parts) - i, 0, -1) if ".".join(map(str, parts[i : i + n])) in node), 1)
        name = ".".join(map(str, parts[i : i + taken]))
        if i + taken == len(parts):
            return node, name
        if name not in node or node[name] is None:
            node[name] = CommentedMap()
        node, i = node[name], i + taken


def write_atomically(file: Path, text: str) -> None:
    """Replace ``file`` (its symlink target, if it is one) by ``text``, all or nothing; a new file gets mode 600 (config.yaml may hold keys)."""
    write_atomic(file.resolve(), text.encode("utf-8"), new_mode=0o600)
