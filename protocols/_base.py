"""The message convention as code, and the one codec every message goes through.

Every message between actors, every event streamed to a client and every stored record
is a subclass of :class:`Message`: a frozen, tagged msgspec Struct. ``frozen`` and ``tag``
are inherited; ``kw_only`` is not, so every subclass says ``kw_only=True`` itself (a test
walks all subclasses and checks it). The tag is the class name and so part of the wire
format: renaming a message is a protocol change.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

T = TypeVar("T")


class Message(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Base of every typed message: frozen, keyword-only, tagged by class name."""


_json_encoder = msgspec.json.Encoder()
_msgpack_encoder = msgspec.msgpack.Encoder()
_json_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}
_msgpack_decoders: dict[Any, msgspec.msgpack.Decoder[Any]] = {}


def to_json(obj: object) -> bytes:
    """Encode a message (or any msgspec-encodable value) as JSON bytes."""
    return _json_encoder.encode(obj)


def to_msgpack(obj: object) -> bytes:
    """Encode a message (or any msgspec-encodable value) as MessagePack bytes."""
    return _msgpack_encoder.encode(obj)


def from_json(data: bytes | str, type: type[T] | Any) -> T:
    """Decode JSON into ``type`` (a Message class or a union of them), validating it.

    Raises:
        msgspec.ValidationError: the data does not match the type.
        msgspec.DecodeError: the data is not JSON.
    """
    decoder = _json_decoders.get(type)
    if decoder is None:
        decoder = _json_decoders[type] = msgspec.json.Decoder(type)
    return decoder.decode(data)  # type: ignore[no-any-return]


def from_msgpack(data: bytes, type: type[T] | Any) -> T:
    """Decode MessagePack into ``type``, validating it (errors as :func:`from_json`)."""
    decoder = _msgpack_decoders.get(type)
    if decoder is None:
        decoder = _msgpack_decoders[type] = msgspec.msgpack.Decoder(type)
    return decoder.decode(data)  # type: ignore[no-any-return]
