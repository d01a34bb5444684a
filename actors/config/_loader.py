"""Read config.yaml once into a :class:`HermesConfig`, with every key either applied or reported.

:func:`load_config` reads ``HERMES_HOME/config.yaml`` and ``.env`` (nothing else: no network, no
writes); :func:`parse_config` does the rest on text and is pure. In order:

1. YAML (PyYAML's safe loader, YAML 1.1 as Hermes reads it). A syntax error names the file,
   the line and the column.
2. ``${NAME}`` in any string value expands from the environment, then ``.env``. A reference
   to an unset variable is left as written (the reader that uses the value says so).
3. Every key is checked against the schema: a key the schema types is kept; a key Hermes has
   that this build does not support (``_known``) is reported as ignored; anything else is
   reported as unknown, with the closest known name ("did you mean"). Nothing is dropped
   silently. A null value of a key that takes none means "unset" (the default).
4. The result is converted to :class:`HermesConfig`; a value of the wrong type or out of its
   range is a :class:`ConfigError` naming the file, the key path (``compression.threshold``)
   and what the key allows.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec
import yaml

from ._env import expand_references, read_dotenv
from ._errors import ConfigError
from ._known import HERMES_ROOT_KEYS, HERMES_SECTION_KEYS, NOT_APPLIED
from ._schema import HermesConfig
from ._types import accepts_none, bare, container_item, describe, is_struct, member_for, struct_fields

KeyPath = tuple[str | int, ...]
_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BOOL_TAG = "tag:yaml.org,2002:bool"


class _SafeLoader(_BaseLoader):  # type: ignore[misc]
    """The safe loader (C parser when built), except that a mapping key written as a plain
    ``off`` / ``on`` / ``yes`` / ``no`` stays the word: YAML 1.1 reads those as booleans, which
    turned an MCP server or a platform named ``off:`` into the key ``False``. Values keep
    YAML 1.1's reading (``enabled: yes`` is true, as Hermes users expect)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag == _BOOL_TAG and not key_node.style:
                key_node.tag = "tag:yaml.org,2002:str"
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


class ConfigWarning(msgspec.Struct, frozen=True, kw_only=True):
    """A key the loader did not apply."""

    kind: Literal["unknown", "ignored"]
    """``unknown``: no such key (a typo?); ``ignored``: a key Hermes has that this build does not support."""
    path: str
    """Dotted, with ``[i]`` for list items: ``compression.target_ratio``, ``custom_providers[0].api_mode``."""
    suggestion: str = ""
    """For ``unknown``: the closest known key at that place, if any is close."""


class LoadedConfig(msgspec.Struct, frozen=True, kw_only=True):
    """One reading of config.yaml."""

    config: HermesConfig
    file: Path
    dotenv: Path
    exists: bool
    """Whether config.yaml exists (missing: every value is a default)."""
    data: dict[str, Any]
    """The file's mapping as read, ``${NAME}`` expanded (what ``hermes config get`` shows of ignored keys)."""
    raw: dict[str, Any] = {}
    """The file's mapping as read, ``${NAME}`` as written: what the section readers of
    ``actors.agent`` and ``actors.credentials`` take, so a start reads the file once."""
    references: dict[KeyPath, str]
    """Key path -> the value as written, for every value that used ``${NAME}`` (shown instead of the secret)."""
    warnings: tuple[ConfigWarning, ...] = ()

    def warning_lines(self) -> list[str]:
        """What ``hermes serve`` / ``chat`` print once at start: a line per unknown key, one for all ignored ones."""
        lines = []
        for warning in self.warnings:
            if warning.kind == "unknown":
                hint = f" (did you mean {warning.suggestion!r}?)" if warning.suggestion else ""
                lines.append(f"{self.file}: unknown key {warning.path!r}{hint} is not used; fix or remove it")
        ignored = [w.path for w in self.warnings if w.kind == "ignored"]
        if ignored:
            lines.append(f"{self.file}: ignored, not supported by this build: {', '.join(ignored)}")
        return lines


def load_config(home: Path, env: Mapping[str, str] | None = None) -> LoadedConfig:
    """Read ``home``'s config.yaml and .env; raise :class:`ConfigError` saying what to fix."""
    file = home / "config.yaml"
    try:
        text: str | None = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file} cannot be read ({exc}); fix its permissions or encoding (UTF-8)") from None
    dotenv = home / ".env"
    return parse_config(text, file=file, dotenv=dotenv, env=os.environ if env is None else env, dotenv_values=read_dotenv(dotenv))


def parse_config(text: str | None, *, file: Path, dotenv: Path, env: Mapping[str, str], dotenv_values: Mapping[str, str]) -> LoadedConfig:
    """The typed configuration of ``text`` (None: no file); pure."""
    raw = _parse_yaml(text, file)
    references: dict[KeyPath, str] = {}
    data = _expand(raw, {**dotenv_values, **env}, (), references)
    if isinstance(data.get("model"), str):
        data["model"] = {"default": data["model"]}
    warnings: list[ConfigWarning] = []
    cleaned = _clean_struct(data, HermesConfig, (), True, warnings)
    try:
        config = msgspec.convert(cleaned, HermesConfig)
    except msgspec.ValidationError as exc:
        raise ConfigError(_explain(exc, cleaned, file)) from None
    return LoadedConfig(config=config, file=file, dotenv=dotenv, exists=text is not None, data=data, raw=raw, references=references, warnings=tuple(warnings))


def dotted(path: KeyPath) -> str:
    """``("custom_providers", 0, "name")`` -> ``custom_providers[0].name``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _parse_yaml(text: str | None, file: Path) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        loaded = yaml.load(text, Loader=_SafeLoader)  # the safe loader (C when built, else Python)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{file} is not valid YAML ({problem}{where}); fix the file or move it away") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{file} must hold a mapping of settings (it holds a {type(loaded).__name__}); see the README for its layout")
    return loaded


def _expand(value: Any, values: Mapping[str, str], path: KeyPath, references: dict[KeyPath, str]) -> Any:
    if isinstance(value, str):
        expanded, _missing = expand_references(value, values)
        if expanded != value or _missing:
            references[path] = value
        return expanded
    if isinstance(value, dict):
        return {key: _expand(item, values, (*path, str(key)), references) for key, item in value.items()}
    if isinstance(value, list):
        return [_expand(item, values, (*path, i), references) for i, item in enumerate(value)]
    return value


def _clean(value: Any, tp: Any, path: KeyPath, report: bool, warnings: list[ConfigWarning]) -> Any:
    """``value`` with the keys the schema does not type taken out (and reported when ``report``)."""
    shape = bare(member_for(value, tp))
    if is_struct(shape) and isinstance(value, dict):
        return _clean_struct(value, shape, path, report, warnings)
    item = container_item(tp, value)
    if item is None:
        return value
    if isinstance(value, dict):
        return {str(key): _clean(entry, item, (*path, str(key)), report, warnings) for key, entry in value.items()}
    return [_clean(entry, item, (*path, i), report, warnings) for i, entry in enumerate(value)]


def _clean_struct(value: dict[Any, Any], cls: type[msgspec.Struct], path: KeyPath, report: bool, warnings: list[ConfigWarning]) -> dict[str, Any]:
    fields = struct_fields(cls)
    hermes = HERMES_ROOT_KEYS if not path else HERMES_SECTION_KEYS.get(cls.__name__, frozenset())
    out: dict[str, Any] = {}
    for raw_key, entry in value.items():
        key = str(raw_key)
        if key in fields:
            if entry is None and not accepts_none(fields[key]):
                continue  # an empty key is an unset one
            applied = bool(path) or key not in NOT_APPLIED
            if report and not applied:
                warnings.append(ConfigWarning(kind="ignored", path=key))
            out[key] = _clean(entry, fields[key], (*path, key), report and applied, warnings)
        elif not report or (not path and key.startswith("_")):
            continue
        elif key in hermes:
            warnings.append(ConfigWarning(kind="ignored", path=dotted((*path, key))))
        else:
            close = difflib.get_close_matches(key, [*fields, *hermes], n=1, cutoff=0.6)
            warnings.append(ConfigWarning(kind="unknown", path=dotted((*path, key)), suggestion=close[0] if close else ""))
    return out


_SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[\.\.\.\]")


def _explain(error: msgspec.ValidationError, cleaned: dict[str, Any], file: Path) -> str:
    """msgspec's ``Expected `float`, got `str` - at `$.compression.threshold``` in the user's words."""
    message, _, where = str(error).rpartition(" - at `")
    segments = _SEGMENT.findall(where.rstrip("`").removeprefix("$"))
    value: Any = cleaned
    tp: Any = HermesConfig
    path: KeyPath = ()
    for name, index in ((s[0], s[1]) for s in segments):
        shape = bare(member_for(value, tp))
        if name and is_struct(shape):
            tp, value, path = struct_fields(shape)[name], value.get(name), (*path, name)
        elif index and isinstance(value, list):
            tp, value, path = container_item(tp, value), value[int(index)], (*path, int(index))
        elif isinstance(value, dict):  # "[...]": msgspec does not say which key; find it
            item = container_item(tp, value)
            key = next((k for k, v in value.items() if not _converts(v, item)), next(iter(value), "?"))
            tp, value, path = item, value.get(key), (*path, key)
    name = dotted(path) or "the file"
    missing = re.match(r"Object missing required field `(.+)`", message or str(error))
    if missing:
        return f"{file}: {name} needs '{missing.group(1)}' ({name} must be {describe(tp)}); add it, or remove {name}"
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    allowed = describe(tp)
    if allowed.startswith("a string") and isinstance(value, int | float | bool):
        read = "true or false" if isinstance(value, bool) else "a number"
        allowed += f" (YAML read {read}: quote it, '{value}')"
    return f"{file}: {name} is {shown}, which is not allowed: it must be {allowed}; fix it (hermes config set {name} VALUE)"


def _converts(value: Any, tp: Any) -> bool:
    try:
        msgspec.convert(value, tp)
    except msgspec.ValidationError:
        return False
    return True
