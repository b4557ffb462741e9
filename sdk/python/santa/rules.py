"""The rule model of docs/rules.md and its wire form.

The SDK does not check rules.md's limits: santad does, and names the broken
limit in its error, so the limits live in one place.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from typing import Union

from .errors import NO_INDEX, SantaError
from .wire import BYTES16, U8, U16, Codec, ListOf, Reader

PUT = 1
COPY = 2


@dataclass(frozen=True)
class Put:
    """Reply bytes [dst, dst+len(data)) are `data`."""

    dst: int
    data: bytes


@dataclass(frozen=True)
class Copy:
    """Reply bytes [dst, dst+length) are request bytes [src, src+length)."""

    src: int
    length: int
    dst: int


Processor = Union[Put, Copy]


@dataclass(frozen=True)
class Rule:
    """When the request holds `pattern` at `cond_off`, answer with a
    `reply_len`-byte reply built by `processors`, in order."""

    cond_off: int
    pattern: bytes
    reply_len: int
    processors: list[Processor] = field(default_factory=list)
    flags: int = 0

    @classmethod
    def on(cls, pattern: bytes, reply: bytes, offset: int = 0) -> Rule:
        """The paper's Listing 1: `pattern` at `offset` is answered by `reply`."""
        return cls(offset, pattern, len(reply), [Put(0, reply)])


class _ProcessorCodec(Codec[Processor]):
    min_size = 6  # an empty put: kind, reserved, dst, a zero length

    def write(self, out: bytearray, value: Processor) -> None:
        if isinstance(value, Put):
            out += bytes((PUT, 0))
            U16.write(out, value.dst)
            BYTES16.write(out, value.data)
        else:
            out += bytes((COPY, 0))
            U16.write(out, value.src)
            U16.write(out, value.length)
            U16.write(out, value.dst)

    def read(self, r: Reader) -> Processor:
        kind, reserved = r.take(2)
        if reserved != 0:
            raise SantaError(
                errno.EINVAL, NO_INDEX, f"processor reserved byte is {reserved}, not 0"
            )
        if kind == PUT:
            return Put(U16.read(r), BYTES16.read(r))
        if kind == COPY:
            return Copy(U16.read(r), U16.read(r), U16.read(r))
        raise SantaError(errno.EINVAL, NO_INDEX, f"unknown processor kind {kind}")

    def size(self, value: Processor) -> int:
        return 4 + BYTES16.size(value.data) if isinstance(value, Put) else 8


PROCESSORS = ListOf(_ProcessorCodec(), U8)


class _RuleCodec(Codec[Rule]):
    """Hand-written rather than a Struct: `nproc` sits between `reply_len`
    and `flags`, away from the processors it counts."""

    min_size = 8

    def write(self, out: bytearray, value: Rule) -> None:
        U16.write(out, value.cond_off)
        BYTES16.write(out, value.pattern)
        U16.write(out, value.reply_len)
        U8.write(out, len(value.processors))
        U8.write(out, value.flags)
        PROCESSORS.write_items(out, value.processors)

    def read(self, r: Reader) -> Rule:
        cond_off = U16.read(r)
        pattern = BYTES16.read(r)
        reply_len = U16.read(r)
        nproc = U8.read(r)
        flags = U8.read(r)
        if flags != 0:
            raise SantaError(errno.EINVAL, NO_INDEX, f"rule flags are {flags}, not 0")
        return Rule(cond_off, pattern, reply_len, PROCESSORS.read_items(r, nproc), flags)

    def size(self, value: Rule) -> int:
        return 8 + len(value.pattern) + PROCESSORS.items_size(value.processors)


RULE = _RuleCodec()
