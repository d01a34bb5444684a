"""JSON text a model wrote (a tool call's arguments, a structured answer), read in the pure core.

Read by msgspec first: most of it is plain JSON, and msgspec reads it several times faster
than the standard library, to the same values. What msgspec refuses is read again by the
standard library, which also takes what msgspec does not (``NaN``, ``1e999``, lone surrogate
escapes) and words its errors as models have always been told them. Nesting deep enough to
exhaust Python's recursion (a careless or hostile model can send 100,000 brackets) is one more
``ValueError`` with a clear text, never a ``RecursionError`` out of a machine step.
"""

from __future__ import annotations

import gc
import json
from typing import Any

import msgspec

TOO_DEEP = "nested too deeply: the value has hundreds of levels of brackets or braces; send a flatter one"


def read_json(text: str) -> Any:
    """The value ``text`` holds, as ``json.loads`` gives it; a ``ValueError`` saying what is wrong otherwise."""
    try:
        return msgspec.json.decode(text)
    except (ValueError, RecursionError):  # msgspec.DecodeError and UnicodeEncodeError are ValueErrors
        pass
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None


def nests_deeper_than(value: Any, limit: int) -> bool:
    """Whether decoded JSON ``value`` has more than ``limit`` levels of arrays and objects.

    Breadth-first, one level per step, and the per-item work is in C: ``gc.get_referents``
    lists a level's children, ``gc.is_tracked`` keeps the containers. The garbage collector
    tracks every list and every dict holding a container; it may leave a dict of scalars
    untracked, which is a leaf: one more level, nothing below it.
    """
    children = gc.get_referents(value)  # Invariant: the children of the containers `depth` levels down
    depth = 1
    while True:
        containers = [*filter(gc.is_tracked, children)]
        if not containers:
            return depth == limit and dict in map(type, children)
        depth += 1
        if depth > limit:
            return True
        children = gc.get_referents(*containers)
