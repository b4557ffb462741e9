"""Framing: the 16-byte header, and whole messages to and from bytes."""

from __future__ import annotations

import errno
import struct
from dataclasses import dataclass
from typing import Any

from .errors import NO_INDEX, SantaError
from .messages import BODIES, KIND_OF, MsgType
from .wire import Out, Reader

MAGIC = 0x41544E53  # b"SNTA" read as a little-endian u32
#: Protocol versions this SDK speaks: 2 adds a rule's length condition, 7
#: pages LIST_SERVICES; 3 to 6 change only messages this SDK does not speak,
#: its bodies there being version 2's. A message's header names the version
#: its body is in; HELLO, which every santad reads in version 1, agrees on
#: one per connection.
MIN_VERSION = 1
VERSION = 7  # the newest
HEADER_SIZE = 16
MAX_MESSAGE = 131072
REPLY_BIT = 0x8000

_HEADER = struct.Struct("<IHHII")


@dataclass(frozen=True)
class Header:
    version: int
    type: MsgType
    reply: bool
    length: int
    seq: int


def encode(seq: int, body: object, version: int = MIN_VERSION) -> bytes:
    """The whole message carrying `body`, in protocol `version`; its class
    names the message type."""
    try:
        msg_type, reply, codec = KIND_OF[type(body)]
    except KeyError:
        raise TypeError(f"{type(body).__name__} is not a message body") from None
    if not MIN_VERSION <= version <= VERSION:
        raise SantaError(
            errno.EINVAL, NO_INDEX, f"version {version}; this SDK speaks {MIN_VERSION} to {VERSION}"
        )
    out = Out(version, HEADER_SIZE)
    codec.write(out, body)
    _check_size(len(out), "the message")
    wire_type = msg_type | REPLY_BIT if reply else msg_type
    try:
        _HEADER.pack_into(out, 0, MAGIC, version, wire_type, len(out), seq)
    except struct.error:
        raise SantaError(errno.EINVAL, NO_INDEX, f"seq {seq!r} does not fit in a u32") from None
    return bytes(out)


def decode(data: bytes | memoryview) -> tuple[Header, Any]:
    """Header and body of one datagram, checked as docs/protocol.md says."""
    _check_size(len(data), "the datagram")
    if len(data) < HEADER_SIZE:
        raise SantaError(errno.EPROTO, NO_INDEX, f"a {len(data)}-byte datagram holds no header")
    magic, version, wire_type, length, seq = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise SantaError(errno.EPROTO, NO_INDEX, f"bad magic {magic:#010x}")
    if not MIN_VERSION <= version <= VERSION:
        raise SantaError(
            errno.EPROTO, NO_INDEX,
            f"protocol version {version}; this SDK speaks {MIN_VERSION} to {VERSION}",
        )
    _check_size(length, "the header's length")
    if length != len(data):
        raise SantaError(
            errno.EPROTO, NO_INDEX, f"the header says {length} bytes, the datagram has {len(data)}"
        )
    msg_type, reply = _split_type(wire_type)
    _, _, codec = KIND_OF[BODIES[msg_type, reply]]
    r = Reader(memoryview(data)[HEADER_SIZE:], version)
    body = codec.read(r)
    r.finish()
    return Header(version, msg_type, reply, length, seq), body


def _check_size(size: int, what: str) -> None:
    if size > MAX_MESSAGE:
        raise SantaError(
            errno.EMSGSIZE, NO_INDEX, f"{what} is {size} bytes; the limit is {MAX_MESSAGE}"
        )


def _split_type(wire_type: int) -> tuple[MsgType, bool]:
    # ERROR is all ones, so it cannot be read as "reply bit + a type"; and
    # no masked value is ERROR, so a request can never claim to be one.
    if wire_type == MsgType.ERROR:
        return MsgType.ERROR, True
    try:
        msg_type = MsgType(wire_type & ~REPLY_BIT)
    except ValueError:
        raise SantaError(errno.EPROTO, NO_INDEX, f"unknown message type {wire_type:#06x}") from None
    return msg_type, bool(wire_type & REPLY_BIT)
