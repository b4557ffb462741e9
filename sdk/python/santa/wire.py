"""Field codecs: the little-endian grammar every body is written in.

A codec writes one value to a bytearray, reads it back from a Reader and
tells its encoded size (so batches can be split without encoding twice).
Bodies are dataclasses whose fields carry their codec in `Annotated[...]`;
`Struct` turns such a dataclass into a codec, so each message is declared
once and both directions follow from the declaration.
"""

from __future__ import annotations

import dataclasses
import errno
import struct
import typing
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from .errors import NO_INDEX, SantaError

T = TypeVar("T")
D = TypeVar("D")


class Out(bytearray):
    """The bytes of one message being written, and the protocol version its
    body is in: what a structure that changed between versions asks."""

    def __init__(self, version: int, size: int = 0) -> None:
        super().__init__(size)
        self.version = version


class Reader:
    """A cursor over one body, in protocol version `version`, that refuses
    to read past its end."""

    def __init__(self, data: bytes | memoryview, version: int) -> None:
        self._data = memoryview(data)
        self._pos = 0
        self.version = version

    @property
    def remaining(self) -> int:
        return len(self._data) - self._pos

    def take(self, n: int) -> memoryview:
        if n > self.remaining:
            raise SantaError(errno.EBADMSG, NO_INDEX, "the body ends inside a field")
        chunk = self._data[self._pos : self._pos + n]
        self._pos += n
        return chunk

    def expect(self, count: int, min_size: int) -> None:
        """Refuses a count the rest of the body cannot hold, before any
        allocation trusts it."""
        if count * min_size > self.remaining:
            raise SantaError(
                errno.EBADMSG, NO_INDEX,
                f"a count of {count} does not fit in the {self.remaining} bytes left",
            )

    def finish(self) -> None:
        if self.remaining:
            raise SantaError(
                errno.EBADMSG, NO_INDEX, f"{self.remaining} bytes left over after the body"
            )


class Codec(Generic[T]):
    """Writes, reads and sizes values of one wire type. A size is the same in
    every version that can carry the value."""

    min_size: int

    def write(self, out: Out, value: T) -> None:
        raise NotImplementedError

    def read(self, r: Reader) -> T:
        raise NotImplementedError

    def size(self, value: T) -> int:
        raise NotImplementedError


class Int(Codec[int]):
    def __init__(self, fmt: str, name: str) -> None:
        self._st = struct.Struct("<" + fmt)
        self._name = name
        self.min_size = self._st.size

    def write(self, out: Out, value: int) -> None:
        try:
            out += self._st.pack(value)
        except struct.error:
            raise SantaError(
                errno.EINVAL, NO_INDEX, f"{value!r} does not fit in a {self._name}"
            ) from None

    def read(self, r: Reader) -> int:
        value: int = self._st.unpack(r.take(self.min_size))[0]
        return value

    def size(self, value: int) -> int:
        return self.min_size


U8 = Int("B", "u8")
U16 = Int("H", "u16")
U32 = Int("I", "u32")
U64 = Int("Q", "u64")


class Bytes16(Codec[bytes]):
    """`bytes16`: a u16 length, then the bytes."""

    min_size = 2

    def write(self, out: Out, value: bytes) -> None:
        U16.write(out, len(value))
        out += value

    def read(self, r: Reader) -> bytes:
        return bytes(r.take(U16.read(r)))

    def size(self, value: bytes) -> int:
        return 2 + len(value)


BYTES16 = Bytes16()


class String16(Codec[str]):
    """`string16`: UTF-8 in a bytes16, at most `limit` bytes."""

    min_size = 2

    def __init__(self, limit: int = 0xFFFF) -> None:
        self._limit = limit

    def _check(self, raw: bytes | memoryview) -> None:
        if len(raw) > self._limit:
            raise SantaError(
                errno.EINVAL, NO_INDEX,
                f"a text of {len(raw)} bytes; the limit is {self._limit}",
            )

    def write(self, out: Out, value: str) -> None:
        raw = value.encode()
        self._check(raw)
        BYTES16.write(out, raw)

    def read(self, r: Reader) -> str:
        raw = BYTES16.read(r)
        self._check(raw)
        try:
            return raw.decode()
        except UnicodeDecodeError as e:
            raise SantaError(errno.EINVAL, NO_INDEX, f"text is not UTF-8: {e}") from None

    def size(self, value: str) -> int:
        return 2 + len(value.encode())


class Since(Codec[T]):
    """A field that only messages of protocol version `version` and later
    carry; in older ones it is absent, and reads as `default`. Its size is
    the one in the versions that carry it."""

    min_size = 0

    def __init__(self, version: int, codec: Codec[T], default: T) -> None:
        self.version = version
        self._codec = codec
        self.default = default

    def write(self, out: Out, value: T) -> None:
        if out.version >= self.version:
            self._codec.write(out, value)

    def read(self, r: Reader) -> T:
        return self._codec.read(r) if r.version >= self.version else self.default

    def size(self, value: T) -> int:
        return self._codec.size(value)


class Addr16(Codec[Any]):
    """A socket's address in 16 bytes, no length prefix: IPv6, or IPv4 in
    the first 4 bytes and zeros after. Written from an `ipaddress` address;
    read as the raw bytes, which the structure holding it turns into an
    address by its family (messages.service_address)."""

    min_size = 16

    def write(self, out: Out, value: Any) -> None:
        out += value.packed.ljust(16, b"\0")

    def read(self, r: Reader) -> bytes:
        return bytes(r.take(16))

    def size(self, value: Any) -> int:
        return 16


ADDR16 = Addr16()


class EnumOf(Codec[Any]):
    """A value of `codec` read as the member of `enum_cls` it names; one this
    SDK does not name (a newer santad's) stays a plain value rather than
    failing the whole message. Written as its plain value: the enum is an
    IntEnum or a StrEnum."""

    def __init__(self, enum_cls: type[Any], codec: Codec[Any]) -> None:
        self._enum = enum_cls
        self._codec = codec
        self.min_size = codec.min_size

    def write(self, out: Out, value: Any) -> None:
        self._codec.write(out, value)

    def read(self, r: Reader) -> Any:
        value = self._codec.read(r)
        try:
            return self._enum(value)
        except ValueError:
            return value

    def size(self, value: Any) -> int:
        return self._codec.size(value)


class Flag(Codec[bool]):
    """A u8 that is 0 or 1, read as a bool (numbers on the wire and in the
    vectors); 0, 1, False and True are written."""

    min_size = 1

    def write(self, out: Out, value: bool) -> None:
        U8.write(out, self._check(value))

    def read(self, r: Reader) -> bool:
        return bool(self._check(U8.read(r)))

    def size(self, value: bool) -> int:
        return 1

    @staticmethod
    def _check(value: int) -> int:
        if value not in (0, 1):
            raise SantaError(errno.EINVAL, NO_INDEX, f"a flag is {value}, not 0 or 1")
        return int(value)


FLAG = Flag()


class ListOf(Codec[list[T]]):
    """A count, then that many items. Errors inside an item name its index.

    `write_items` and `read_items` serve bodies whose count is not right
    before its items (a rule's processors, the page replies)."""

    def __init__(self, item: Codec[T], count: Int = U32, min_count: int = 0) -> None:
        self._item = item
        self._count = count
        self._min_count = min_count
        self.min_size = count.min_size + min_count * item.min_size

    def write(self, out: Out, value: list[T]) -> None:
        self._count.write(out, len(value))
        self.write_items(out, value)

    def read(self, r: Reader) -> list[T]:
        return self.read_items(r, self._count.read(r))

    def size(self, value: list[T]) -> int:
        return self._count.min_size + self.items_size(value)

    def write_items(self, out: Out, value: list[T]) -> None:
        self._check_count(len(value))
        i = 0
        try:
            for i, v in enumerate(value):
                self._item.write(out, v)
        except SantaError as e:
            raise _at_index(e, i) from None

    def read_items(self, r: Reader, n: int) -> list[T]:
        self._check_count(n)
        r.expect(n, self._item.min_size)
        items: list[T] = []
        try:
            for _ in range(n):
                items.append(self._item.read(r))
        except SantaError as e:
            raise _at_index(e, len(items)) from None
        return items

    def items_size(self, value: list[T]) -> int:
        return sum(self._item.size(v) for v in value)

    def _check_count(self, n: int) -> None:
        if n < self._min_count:
            raise SantaError(
                errno.EINVAL, NO_INDEX, f"a count of {n}; at least {self._min_count} are due"
            )


def _at_index(e: SantaError, i: int) -> SantaError:
    """Names the list item an error happened in. An enclosing list renames
    it again: the index names an item of the outermost list, the batch."""
    return SantaError(e.code, i, e.message)


class Struct(Codec[D]):
    """A dataclass whose fields are `Annotated[type, codec]`, in wire order."""

    def __init__(self, cls: type[D]) -> None:
        hints = typing.get_type_hints(cls, include_extras=True)
        self._cls: Callable[..., D] = cls
        self._fields: list[tuple[str, Codec[Any]]] = [
            (f.name, hints[f.name].__metadata__[0])
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]
        ]
        self.min_size = sum(c.min_size for _, c in self._fields)

    def write(self, out: Out, value: D) -> None:
        for name, codec in self._fields:
            codec.write(out, getattr(value, name))

    def read(self, r: Reader) -> D:
        return self._cls(**{name: codec.read(r) for name, codec in self._fields})

    def size(self, value: D) -> int:
        return sum(codec.size(getattr(value, name)) for name, codec in self._fields)


class PageOf(Codec[D]):
    """The page replies: a dataclass of `next` and a list, sent as `count`
    u32, `next` u32, then `count` items. The count stands apart from its
    items, so these are not plain Structs."""

    min_size = 8

    def __init__(self, cls: type[D], item: Codec[Any]) -> None:
        self._cls: Callable[..., D] = cls
        self._next, self._list = (f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
        self._items = ListOf(item)

    def write(self, out: Out, value: D) -> None:
        items = getattr(value, self._list)
        U32.write(out, len(items))
        U32.write(out, getattr(value, self._next))
        self._items.write_items(out, items)

    def read(self, r: Reader) -> D:
        n = U32.read(r)
        next_start = U32.read(r)
        return self._cls(**{self._next: next_start, self._list: self._items.read_items(r, n)})

    def size(self, value: D) -> int:
        return 8 + self._items.items_size(getattr(value, self._list))


class PageSince(Codec[D]):
    """A reply that is a page (`count` u32, `next` u32, then `count` items,
    as PageOf) from protocol version `version` on, and a plain list before
    it: its `next` then is not on the wire, reads as `last` (the reply is
    the whole list), and must be `last` to be written."""

    min_size = 4

    def __init__(self, version: int, cls: type[D], items: str, item: Codec[Any], last: int) -> None:
        self.version = version
        self._cls: Callable[..., D] = cls
        self._list = items
        self._items = ListOf(item)
        self._last = last

    def write(self, out: Out, value: D) -> None:
        items, next_start = getattr(value, self._list), getattr(value, "next")
        if out.version >= self.version:
            U32.write(out, len(items))
            U32.write(out, next_start)
            self._items.write_items(out, items)
            return
        if next_start != self._last:
            raise SantaError(
                errno.EINVAL, NO_INDEX,
                f"a page (next {next_start}) needs protocol version {self.version}; this message is in {out.version}",
            )
        self._items.write(out, items)

    def read(self, r: Reader) -> D:
        if r.version < self.version:
            return self._cls(**{self._list: self._items.read(r), "next": self._last})
        n = U32.read(r)
        next_start = U32.read(r)
        return self._cls(**{self._list: self._items.read_items(r, n), "next": next_start})

    def size(self, value: D) -> int:
        return 8 + self._items.items_size(getattr(value, self._list))
