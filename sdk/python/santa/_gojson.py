"""JSON read the way Go's encoding/json reads it, for santactl's rule file.

santactl reads a rule file with encoding/json (a Decoder refusing unknown
fields, internal/cli/rulefile.go). For a file to mean the same here, and
to fail with the same message, this module follows encoding/json where
Python's json module differs: the syntax errors' wording and position, a
key matching a field whatever its case, a key given twice decoding again
into what the first one made, invalid UTF-8 and lone surrogates in strings
read as U+FFFD, numbers kept as written, values kept as written for a
json.RawMessage, and the nesting limit of 10000.

Values are decoded into a schema (`Struct`, `Ptr`, `Slice`, `Uint`, `Str`,
`Raw`: the Go types of the rule file) as plain Python values: a dict per
struct, a list per slice, None for a nil pointer or slice, the Node itself
for a json.RawMessage.

Python's json module reads a good file many times faster; `quick_value`
uses it, and a caller words an error by reading again with `first_value`.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass, field
from collections.abc import Iterable
from typing import Any

MAX_DEPTH = 10000  # encoding/json's maxNestingDepth


class JSONError(ValueError):
    """A file encoding/json refuses, with santactl's wording of why."""


@dataclass(slots=True)
class Node:
    """A JSON value: `value` is a list of (key, Node) for an object, of Nodes
    for an array, the text of a string, the literal of a number, True,
    False or None; `raw` its bytes as written."""

    kind: str  # "object", "array", "string", "number", "bool", "null"
    value: Any
    raw: bytes


# Reading: encoding/json's scanner, as a Decoder runs it over the file.

_SPACE = re.compile(rb"[ \t\r\n]*")
_PLAIN = re.compile(rb'[^"\\\x00-\x1f]*')  # string bytes needing no look
_DIGITS = re.compile(rb"[0-9]*")
_HEX = b"0123456789abcdefABCDEF"
_LITERALS = {ord("t"): (b"true", True), ord("f"): (b"false", False), ord("n"): (b"null", None)}


class _Number(str):
    """A number's literal, as Python's json module hands it over."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _Pairs(list):  # type: ignore[type-arg]
    """An object's (key, value) pairs, in order, keys given twice included."""


_QUICK = json.JSONDecoder(
    object_pairs_hook=_Pairs, parse_int=_Number, parse_float=_Number,
    parse_constant=_no_constant,
)
_SURROGATE = re.compile("[\ud800-\udfff]")


def quick_value(data: bytes) -> Node | None:
    """The JSON value `data` holds, if it is exactly one, read by Python's
    json module (many times faster than first_value), else None. On such a
    value both read the same; their `raw` is empty here, so a caller that
    must word an error reads the file again with first_value."""
    try:
        return _quick_node(_QUICK.decode(data.decode("utf-8", "surrogateescape")))
    except (ValueError, RecursionError):
        return None


def _quick_node(v: Any) -> Node:
    if isinstance(v, str):
        if isinstance(v, _Number):
            return Node("number", str(v), b"")
        return Node("string", _go_text(v), b"")
    if isinstance(v, _Pairs):
        return Node("object", [(_go_text(k), _quick_node(x)) for k, x in v], b"")
    if isinstance(v, list):
        return Node("array", [_quick_node(x) for x in v], b"")
    if v is None:
        return Node("null", None, b"")
    return Node("bool", v, b"")


def _go_text(s: str) -> str:
    # A lone surrogate, from an escape or a byte of invalid UTF-8
    # (surrogateescape), is U+FFFD to Go.
    return _SURROGATE.sub("\ufffd", s) if _SURROGATE.search(s) else s


def first_value(data: bytes) -> tuple[Node, int]:
    """The JSON value `data` begins with, and the offset just past it."""
    return _Scanner(data).top()


def after_value(data: bytes, end: int) -> None:
    """Refuses anything but space after the value that ends at `end`."""
    rest = _SPACE.match(data, end).end()  # type: ignore[union-attr]
    if rest < len(data):
        raise JSONError(f"{_position(data, rest)}: more after the end of the JSON value")


def _position(data: bytes, offset: int) -> str:
    before = data[:offset]
    line, column = 1 + before.count(b"\n"), len(before) - before.rfind(b"\n")
    return f"line {line}, column {column}"


@dataclass
class _Open:
    """An object or array being read."""

    kind: str
    start: int
    items: list[Any] = field(default_factory=list)
    key: str = ""


class _Scanner:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.i = 0

    def fail(self, context: str) -> JSONError:
        c = self.data[self.i]
        return JSONError(f"{_position(self.data, self.i)}: invalid character {quote_char(c)} {context}")

    def here(self) -> int:
        """The byte at the cursor, where the value cannot end."""
        if self.i >= len(self.data):
            raise JSONError("the JSON value ends early")
        return self.data[self.i]

    def next_byte(self) -> int:
        """The byte at the cursor after any space, where the value cannot end."""
        self.i = _SPACE.match(self.data, self.i).end()  # type: ignore[union-attr]
        return self.here()

    def top(self) -> tuple[Node, int]:
        self.i = _SPACE.match(self.data).end()  # type: ignore[union-attr]
        if self.i >= len(self.data):
            raise JSONError("no JSON value")
        stack: list[_Open] = []
        while True:
            node = self.begin_value(stack)
            while node is not None:  # a value is complete: where does it go?
                if not stack:
                    return node, self.i
                node = self.after_item(stack, node)

    def begin_value(self, stack: list[_Open]) -> Node | None:
        """Reads a scalar, or opens a container (None: read its first item)."""
        c = self.next_byte()
        if c not in b"{[":
            return self.scalar(c)
        if len(stack) >= MAX_DEPTH:
            raise self.fail("exceeded max depth")
        opened = _Open("object" if c == ord("{") else "array", self.i)
        stack.append(opened)
        self.i += 1
        c = self.next_byte()
        if c == (ord("}") if opened.kind == "object" else ord("]")):
            self.i += 1
            return self.close(stack)
        if opened.kind == "object":
            self.key(opened)
        return None

    def key(self, opened: _Open) -> None:
        """Reads `"key":` at the cursor."""
        if self.next_byte() != ord('"'):
            raise self.fail("looking for beginning of object key string")
        opened.key = self.string()
        if self.next_byte() != ord(":"):
            raise self.fail("after object key")
        self.i += 1

    def after_item(self, stack: list[_Open], node: Node) -> Node | None:
        """Stores a complete item in its container and reads what follows
        it: the container's end (returned, complete too) or a comma."""
        opened = stack[-1]
        opened.items.append((opened.key, node) if opened.kind == "object" else node)
        c = self.next_byte()
        close, context = (b"}", "after object key:value pair") if opened.kind == "object" else (b"]", "after array element")
        if c == ord(","):
            self.i += 1
            if opened.kind == "object":
                self.key(opened)
            return None
        if c != close[0]:
            raise self.fail(context)
        self.i += 1
        return self.close(stack)

    def close(self, stack: list[_Open]) -> Node:
        opened = stack.pop()
        return Node(opened.kind, opened.items, self.data[opened.start : self.i])

    def scalar(self, c: int) -> Node:
        start = self.i
        if c == ord('"'):
            text = self.string()
            return Node("string", text, self.data[start : self.i])
        if c == ord("-") or ord("0") <= c <= ord("9"):
            self.number()
            raw = self.data[start : self.i]
            return Node("number", raw.decode(), raw)
        if c in _LITERALS:
            word, value = _LITERALS[c]
            for want in word[1:]:
                self.i += 1
                if self.here() != want:
                    raise self.fail(f"in literal {word.decode()} (expecting {quote_char(want)})")
            self.i += 1
            return Node("null" if value is None else "bool", value, word)
        raise self.fail("looking for beginning of value")

    def digit(self, context: str) -> None:
        """At least one digit, then any more."""
        if not 0x30 <= self.here() <= 0x39:
            raise self.fail(context)
        self.i = _DIGITS.match(self.data, self.i + 1).end()  # type: ignore[union-attr]

    def number(self) -> None:
        d = self.data
        if d[self.i] == ord("-"):
            self.i += 1
            if not 0x30 <= self.here() <= 0x39:
                raise self.fail("in numeric literal")
        # A leading 0 stands alone: what follows it ends the number.
        self.i = self.i + 1 if d[self.i] == ord("0") else _DIGITS.match(d, self.i).end()  # type: ignore[union-attr]
        if self.i < len(d) and d[self.i] == ord("."):
            self.i += 1
            self.digit("after decimal point in numeric literal")
        if self.i < len(d) and d[self.i] in b"eE":
            self.i += 1
            if self.i < len(d) and d[self.i] in b"+-":
                self.i += 1
            self.digit("in exponent of numeric literal")

    def string(self) -> str:
        """Reads the string at the cursor (its opening quote)."""
        d = self.data
        start = self.i + 1
        self.i = start
        while True:
            self.i = _PLAIN.match(d, self.i).end()  # type: ignore[union-attr]
            c = self.here()
            if c == ord('"'):
                self.i += 1
                return _unquote(d[start : self.i - 1])
            if c < 0x20:
                raise self.fail("in string literal")
            self.i += 1  # a backslash
            c = self.here()
            if c == ord("u"):
                for _ in range(4):
                    self.i += 1
                    if self.here() not in _HEX:
                        raise self.fail("in \\u hexadecimal character escape")
            elif c not in b'"\\/bfnrt':
                raise self.fail("in string escape code")
            self.i += 1


def _replace_one_byte(e: UnicodeError) -> tuple[str, int]:
    # Go replaces each byte of invalid UTF-8 with U+FFFD, one for one.
    return "\ufffd", e.start + 1  # type: ignore[attr-defined]


codecs.register_error("santa-go-replace", _replace_one_byte)

_ESCAPES = {ord('"'): '"', ord("\\"): "\\", ord("/"): "/", ord("b"): "\b",
            ord("f"): "\f", ord("n"): "\n", ord("r"): "\r", ord("t"): "\t"}


def _unquote(b: bytes) -> str:
    """A string's contents (escapes checked by the scanner) as Go reads
    them: a surrogate escape not completing a pair is U+FFFD."""
    out: list[str] = []
    i = 0
    while True:
        j = b.find(b"\\", i)
        out.append(b[i : len(b) if j < 0 else j].decode("utf-8", "santa-go-replace"))
        if j < 0:
            return "".join(out)
        if b[j + 1] != ord("u"):
            out.append(_ESCAPES[b[j + 1]])
            i = j + 2
            continue
        r = int(b[j + 2 : j + 6], 16)
        i = j + 6
        if 0xD800 <= r < 0xE000:
            low = int(b[i + 2 : i + 6], 16) if b[i : i + 2] == b"\\u" else 0
            if r < 0xDC00 and 0xDC00 <= low < 0xE000:
                r = 0x10000 + ((r - 0xD800) << 10) + (low - 0xDC00)
                i += 6
            else:
                r = 0xFFFD
        out.append(chr(r))


# Quoting as Go's strconv.Quote does, for messages.

_GO_ESCAPES = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v",
               ord('"'): '\\"', ord("\\"): "\\\\"}


def go_quote(s: str) -> str:
    out = ['"']
    for ch in s:
        o = ord(ch)
        if o in _GO_ESCAPES:
            out.append(_GO_ESCAPES[o])
        elif ch.isprintable():  # Go's IsPrint: letters, marks, numbers, punctuation, symbols, ' '
            out.append(ch)
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


def quote_char(c: int) -> str:
    """A byte as encoding/json names it in a syntax error."""
    if c == ord("'"):
        return "'\\''"
    if c == ord('"'):
        return "'\"'"
    return "'" + go_quote(chr(c))[1:-1] + "'"


# Decoding: encoding/json's Unmarshal into the rule file's Go types. Each
# schema decodes a Node into the value a field holds so far (`current`):
# null leaves it be, but for a pointer or slice, which it resets, and a
# json.RawMessage, which holds it.

_UINT = re.compile("[0-9]+")


class Schema:
    kind_name: str  # what the rule file's messages say the field takes

    def zero(self) -> Any:
        return None

    def into(self, current: Any, node: Node, path: tuple[str, ...]) -> Any:
        raise NotImplementedError

    def wrong(self, what: str, path: tuple[str, ...]) -> JSONError:
        """The type error of a `what` (a kind of value) here, in santactl's
        words (jsonerr.go)."""
        where = ".".join(path)
        return JSONError(f"{where + ': ' if where else ''}want {self.kind_name}, not {what}")


@dataclass
class Uint(Schema):
    max: int

    @property
    def kind_name(self) -> str:  # type: ignore[override]
        return f"an integer from 0 to {self.max}"

    def zero(self) -> int:
        return 0

    def into(self, current: Any, node: Node, path: tuple[str, ...]) -> Any:
        if node.kind == "null":
            return current
        if node.kind != "number":
            raise self.wrong(node.kind, path)
        if _UINT.fullmatch(node.value) and int(node.value) <= self.max:
            return int(node.value)
        raise self.wrong("number " + node.value, path)  # Go names it by its literal


class Str(Schema):
    kind_name = "a string"

    def zero(self) -> str:
        return ""

    def into(self, current: Any, node: Node, path: tuple[str, ...]) -> Any:
        if node.kind == "string":
            return node.value
        if node.kind == "null":
            return current
        raise self.wrong(node.kind, path)


class Raw(Schema):
    """json.RawMessage: any value, null too, kept as its Node (whose `raw`
    is the value as written)."""

    kind_name = "raw JSON"

    def into(self, current: Any, node: Node, path: tuple[str, ...]) -> Any:
        return node


@dataclass
class Ptr(Schema):
    elem: Schema

    def into(self, current: Any, node: Node, path: tuple[str, ...]) -> Any:
        if node.kind == "null":
            return None
        return self.elem.into(self.elem.zero() if current is None else current, node, path)


class GoSlice(list):  # type: ignore[type-arg]
    """A Go slice's elements, and in `stale` those its array holds beyond
    its length: encoding/json decodes a later list into them."""

    def __init__(self, items: Iterable[Any] = (), stale: Iterable[Any] = ()) -> None:
        super().__init__(items)
        self.stale = list(stale)


@dataclass
class Slice(Schema):
    elem: Schema
    kind_name = "a list"

    def into(self, current: Any, node: Node, path: tuple[str, ...]) -> Any:
        if node.kind == "null":
            return None
        if node.kind != "array":
            raise self.wrong(node.kind, path)
        if not node.value:
            return GoSlice()  # a new, empty array
        backing = [] if current is None else list(current) + current.stale
        for i, child in enumerate(node.value):
            if i == len(backing):
                backing.append(self.elem.zero())
            backing[i] = self.elem.into(backing[i], child, path)
        n = len(node.value)
        return GoSlice(backing[:n], backing[n:])


@dataclass
class Struct(Schema):
    """Fields by JSON name: each a schema and the Go path an error names
    it by (an embedded struct's name comes first)."""

    fields: dict[str, tuple[Schema, str]]
    kind_name = "an object"

    def __post_init__(self) -> None:
        self.folded = {_fold(name): name for name in self.fields}

    def zero(self) -> dict[str, Any]:
        return {name: s.zero() for name, (s, _) in self.fields.items()}

    def into(self, current: Any, node: Node, path: tuple[str, ...]) -> Any:
        if node.kind == "null":
            return current
        if node.kind != "object":
            raise self.wrong(node.kind, path)
        for key, child in node.value:
            name = key if key in self.fields else self.folded.get(_fold(key))
            if name is None:
                raise JSONError(f"unknown field {go_quote(key)}")
            schema, go_path = self.fields[name]
            current[name] = schema.into(current[name], child, path + (go_path,))
        return current


def decode(schema: Schema, node: Node) -> Any:
    """`node` decoded into a zero value of `schema` (a GoSlice is a list);
    the first error is raised, as Unmarshal returns the first it saves."""
    return schema.into(schema.zero(), node, ())


def _fold(key: str) -> str:
    # Go matches a key to a field by simple case folding; the only runes
    # outside ASCII that fold to an ASCII letter are the Kelvin sign and
    # the long s.
    return "".join(ch.upper() if "a" <= ch <= "z" else ch for ch in key.replace("\u212a", "K").replace("\u017f", "S"))
