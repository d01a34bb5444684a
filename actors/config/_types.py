"""The schema's types, looked at: a struct's fields, the member of a union a value is for, a type
said in words for an error message. Pure and cached; nothing here reads a file.
"""

from __future__ import annotations

import functools
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import msgspec


@functools.cache
def struct_fields(cls: type[msgspec.Struct]) -> dict[str, Any]:
    """Field name -> resolved type (``Annotated`` kept, for its bounds)."""
    return {field.name: field.type for field in msgspec.structs.fields(cls)}


def is_struct(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, msgspec.Struct)


def bare(tp: Any) -> Any:
    """``tp`` without ``Annotated``."""
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    return tp


def union_members(tp: Any) -> tuple[Any, ...] | None:
    tp = bare(tp)
    return get_args(tp) if get_origin(tp) in (Union, types.UnionType) else None


def accepts_none(tp: Any) -> bool:
    members = union_members(tp)
    return tp is Any or (members is not None and type(None) in members)


def member_for(value: object, tp: Any) -> Any:
    """The member of ``tp`` (a union, or not) that a YAML value of this shape would be read as."""
    members = union_members(tp)
    if members is None:
        return tp
    for member in members:
        shape = bare(member)
        origin = get_origin(shape) or shape
        if isinstance(value, dict) and (is_struct(shape) or origin is dict):
            return member
        if isinstance(value, list) and origin is list:
            return member
    return tp


def container_item(tp: Any, value: object) -> Any | None:
    """The type of a dict's values or a list's items, for a value of that shape; None otherwise."""
    shape = bare(member_for(value, tp))
    if isinstance(value, dict) and get_origin(shape) is dict:
        return get_args(shape)[1]
    if isinstance(value, list) and get_origin(shape) is list:
        return get_args(shape)[0]
    return None


def type_at(path: list[str | int], root: Any) -> Any | None:
    """The schema's type for a key path (dict keys and list indexes step into their items); None: not typed."""
    tp = root
    for part in path:
        shape = bare(tp)
        members = union_members(shape)
        if members is not None:  # the struct, dict or list member the path steps into
            shape = next((bare(m) for m in members if is_struct(bare(m)) or get_origin(bare(m)) in (dict, list)), shape)
        if is_struct(shape) and isinstance(part, str):
            tp = struct_fields(shape).get(part)
        elif get_origin(shape) is dict:
            tp = get_args(shape)[1]
        elif get_origin(shape) is list and isinstance(part, int):
            tp = get_args(shape)[0]
        else:
            return None
        if tp is None:
            return None
    return tp


def takes_text(tp: Any, text: str) -> bool:
    """Whether ``text`` itself, as a string, is a value of ``tp`` (``str``, or one of its string choices)."""
    tp = bare(tp)
    members = union_members(tp) or (tp,)
    for member in members:
        member = bare(member)
        if member is str or (get_origin(member) is Literal and text in get_args(member)):
            return True
    return False


_BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))


def describe(tp: Any) -> str:
    """What ``tp`` allows, in words: ``a number > 0 and <= 1``, ``one of: manual, off``."""
    if get_origin(tp) is Annotated:
        base, *metas = get_args(tp)
        bounds = [f"{sign} {getattr(meta, name):g}" for meta in metas for name, sign in _BOUNDS if getattr(meta, name, None) is not None]
        return describe(base) + (" " + " and ".join(bounds) if bounds else "")
    members = union_members(tp)
    if members is not None:
        return " or ".join(describe(member) for member in members)
    origin = get_origin(tp)
    if origin is Literal:
        return "one of: " + ", ".join(str(choice) for choice in get_args(tp))
    if origin is list:
        return f"a list (each item {describe(get_args(tp)[0])})"
    if origin is dict:
        return f"a mapping of names to {describe(get_args(tp)[1])}"
    if is_struct(tp):
        return f"a mapping (keys: {', '.join(struct_fields(tp))})"
    words = {bool: "true or false", int: "a whole number", float: "a number", str: "a string", type(None): "empty", Any: "any value"}
    return words.get(tp, getattr(tp, "__name__", str(tp)))
