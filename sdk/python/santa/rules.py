"""The rule model of docs/rules.md and its wire form.

The SDK does not check rules.md's limits: santad does, and names the broken
limit in its error, so the limits live in one place.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field, replace
from typing import Union

from .errors import NO_INDEX, SantaError
from .wire import BYTES16, U8, U16, U32, Codec, ListOf, Out, Reader

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
class Guard:
    """A memcached rule's guard, as santad lists it (protocol version 2,
    docs/memcached.md): the rule answers only while its `key` (empty: any
    key) and its domain are at these generations of the domain's life
    `epoch`, for `expires_in_ms` more milliseconds (0: no deadline). An agent
    that reads generations installs such rules; this SDK sends none."""

    key: bytes
    gen: int
    domain_gen: int
    epoch: int
    expires_in_ms: int


@dataclass(frozen=True)
class Rule:
    """When the request holds `pattern` at `cond_off`, answer with a
    `reply_len`-byte reply built by `processors`, in order.

    With a length condition (protocol version 2) only requests whose payload
    length L is at least `min_len` and, unless `max_len` is 0, at most
    `max_len` match: without it the pattern is a prefix, and a request with
    more bytes after it matches too. Exactly n bytes: min_len = max_len = n."""

    cond_off: int
    pattern: bytes
    reply_len: int
    processors: list[Processor] = field(default_factory=list)
    min_len: int = 0
    max_len: int = 0
    #: Set on rules santad lists only: the client refuses to send a rule
    #: with a guard.
    guard: Guard | None = None

    @classmethod
    def on(cls, pattern: bytes, reply: bytes, offset: int = 0) -> Rule:
        """The paper's Listing 1: `pattern` at `offset` is answered by `reply`."""
        return cls(offset, pattern, len(reply), [Put(0, reply)])

    @property
    def has_length(self) -> bool:
        return bool(self.min_len or self.max_len)

    def exact_length(self, n: int) -> Rule:
        """This rule for requests of exactly `n` payload bytes."""
        return replace(self, min_len=n, max_len=n)


class _ProcessorCodec(Codec[Processor]):
    min_size = 6  # an empty put: kind, reserved, dst, a zero length

    def write(self, out: Out, value: Processor) -> None:
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


#: Bit 0 of a rule's flags (version 2): min_len and max_len follow.
FLAG_LENGTH = 1
#: Bit 1 (version 2): a guard follows them.
FLAG_GUARD = 2


def _write_guard(out: Out, g: Guard) -> None:
    BYTES16.write(out, g.key)
    for v in (g.gen, g.domain_gen, g.epoch, g.expires_in_ms):
        U32.write(out, v)


def _read_guard(r: Reader) -> Guard:
    g = Guard(BYTES16.read(r), U32.read(r), U32.read(r), U32.read(r), U32.read(r))
    if g.epoch == 0:
        raise SantaError(errno.EINVAL, NO_INDEX, "a guard of epoch 0, a dead domain's")
    return g


class _RuleCodec(Codec[Rule]):
    """Hand-written rather than a Struct: `nproc` sits between `reply_len`
    and `flags`, away from the processors it counts, and the flags say what
    follows them. Version 1 has no flags (0): neither a length condition nor
    a guard can go."""

    min_size = 8

    def write(self, out: Out, value: Rule) -> None:
        flags = (FLAG_LENGTH if value.has_length else 0) | (FLAG_GUARD if value.guard else 0)
        if flags and out.version < 2:
            raise SantaError(
                errno.EINVAL, NO_INDEX,
                "a length condition or a guard needs protocol version 2; "
                f"this connection speaks version {out.version}",
            )
        U16.write(out, value.cond_off)
        BYTES16.write(out, value.pattern)
        U16.write(out, value.reply_len)
        U8.write(out, len(value.processors))
        U8.write(out, flags)
        if value.has_length:
            U16.write(out, value.min_len)
            U16.write(out, value.max_len)
        if value.guard:
            _write_guard(out, value.guard)
        PROCESSORS.write_items(out, value.processors)

    def read(self, r: Reader) -> Rule:
        cond_off = U16.read(r)
        pattern = BYTES16.read(r)
        reply_len = U16.read(r)
        nproc = U8.read(r)
        flags = U8.read(r)
        known = FLAG_LENGTH | FLAG_GUARD if r.version >= 2 else 0
        if flags & ~known:
            raise SantaError(
                errno.EINVAL, NO_INDEX,
                f"rule flags are {flags:#x}; version {r.version} defines {known:#x}",
            )
        min_len = max_len = 0
        if flags & FLAG_LENGTH:
            min_len, max_len = U16.read(r), U16.read(r)
            if not (min_len or max_len):  # one encoding per rule: that is flag 0
                raise SantaError(
                    errno.EINVAL, NO_INDEX, "a length condition of min_len 0 and max_len 0"
                )
        guard = _read_guard(r) if flags & FLAG_GUARD else None
        processors = PROCESSORS.read_items(r, nproc)
        return Rule(cond_off, pattern, reply_len, processors, min_len, max_len, guard)

    def size(self, value: Rule) -> int:
        length = 4 if value.has_length else 0
        guard = 2 + len(value.guard.key) + 16 if value.guard else 0
        return 8 + length + guard + len(value.pattern) + PROCESSORS.items_size(value.processors)


RULE = _RuleCodec()
