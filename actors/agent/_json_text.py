"""JSON text a model wrote (a tool call's arguments, a structured answer), read in the pure core.

Read by msgspec first: most of it is plain JSON, and msgspec reads it several times faster
than the standard library, to the same values. What msgspec refuses is read again by the
standard library, which also takes what msgspec does not (``NaN``, ``1e999``, lone surrogate
escapes) and words its errors as models have always been told them. Nesting deep enough to
exhaust Python's recursion (a careless or hostile model can send 100,000 brackets) is one more
``ValueError`` with a clear text, never a ``RecursionError`` out of a machine step.
"""

from __future__ import annotations

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
