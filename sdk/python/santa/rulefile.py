"""santactl's rule file (docs/santactl.md, "The rule file"), read into Rules.

The same files are accepted and refused, with the same messages, as by
`santactl add -f` (internal/cli/rulefile.go): both parsers are held to the
files of testdata/rulefiles. A file's rules are not checked against
rules.md's limits here: santad does that when they are added.
"""

from __future__ import annotations

import gc
import math
import os
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from . import _gojson as gj
from .rules import Copy, Processor, Put, Rule

# The rule file's Go types (rulefile.go): byteString is embedded in a
# condition and a put, so an error names a field of it through it.
_TEXT_HEX = {"text": (gj.Str(), "byteString.text"), "hex": (gj.Str(), "byteString.hex")}
_U16 = gj.Uint(0xFFFF)
_U32 = gj.Uint(0xFFFFFFFF)
_FILE = gj.Struct({"rules": (gj.Slice(gj.Raw()), "rules")})
_RULE = gj.Struct({
    "id": (gj.Ptr(_U32), "id"),
    "condition": (gj.Struct({"offset": (_U16, "offset"), **_TEXT_HEX, "length": (gj.Raw(), "length")}), "condition"),
    "reply_len": (gj.Ptr(_U16), "reply_len"),
    "processors": (gj.Slice(gj.Struct({
        "put": (gj.Ptr(gj.Struct({"offset": (_U16, "offset"), **_TEXT_HEX})), "put"),
        "copy": (gj.Ptr(gj.Struct({"from": (_U16, "from"), "length": (_U16, "length"), "to": (_U16, "to")})), "copy"),
    })), "processors"),
    "guard": (gj.Ptr(gj.Struct({
        "key": (gj.Struct({"text": (gj.Str(), "text"), "hex": (gj.Str(), "hex")}), "key"),
        **{name: (_U32, name) for name in ("gen", "domain_gen", "epoch", "expires_in_ms")},
    })), "guard"),
})

_LENGTH_FORMS = '34, "34", "30-40" or "30-" (request payload bytes)'


class RuleFileError(ValueError):
    """A rule file santactl would refuse: `message` is santactl's words for
    it (a position, or the rule and field at fault), `path` the file's name
    if it was read from one."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(f"{path}: {message}" if path is not None else message)
        self.message = message
        self.path = path


def load(path: str | os.PathLike[str]) -> list[Rule]:
    """The rules of the rule file at `path`."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return _parse(data)
    except RuleFileError as e:
        raise RuleFileError(e.message, os.fspath(path)) from None


def loads(data: str | bytes) -> list[Rule]:
    """The rules of a rule file's contents."""
    return _parse(data.encode() if isinstance(data, str) else data)


def _parse(data: bytes) -> list[Rule]:
    # The cyclic collector, run again and again over the many objects a big
    # file makes (none of them in a cycle), would take most of the time.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse_json(data)
    finally:
        if was_enabled:
            gc.enable()


def _parse_json(data: bytes) -> list[Rule]:
    quick = gj.quick_value(data)
    if quick is not None:
        try:
            return _read(quick)
        except RuleFileError:
            pass  # worded below, from where the file says it
    try:
        node, end = gj.first_value(data)
    except gj.JSONError as e:
        raise RuleFileError(str(e)) from None
    return _read(node, lambda: gj.after_value(data, end))


def _read(node: gj.Node, check_end: Callable[[], None] | None = None) -> list[Rule]:
    """The rules of a file's JSON value, in santactl's order of checks:
    the file's shape, what follows the value (`check_end`), then each rule."""
    try:
        file = gj.decode(_FILE, node)
        if check_end:
            check_end()
    except gj.JSONError as e:
        raise RuleFileError(str(e)) from None
    if not file["rules"]:
        raise RuleFileError('no rules: want {"rules": [rule, ...]}')
    rules = []
    for i, raw in enumerate(file["rules"]):
        try:
            rules.append(_rule(gj.decode(_RULE, raw)))
        except (gj.JSONError, _Refused) as e:
            raise RuleFileError(f"rule {i}: {e}") from None
    return rules


class _Refused(ValueError):
    """A rule that is good JSON but not a good rule."""


def _rule(jr: dict[str, Any]) -> Rule:
    if jr["guard"] is not None:
        raise _Refused(
            "guard: a rule file cannot hold a guarded rule: its generations are those of when it was listed "
            "(an agent guards the rules it installs, docs/memcached.md)"
        )
    cond = jr["condition"]
    pattern = _within("condition", _bytes, cond)
    min_len = max_len = 0
    if cond["length"] is not None:
        min_len, max_len = _within("condition.length", _length, cond["length"])
    processors: list[Processor] = []
    end = 0  # of the processors' writes
    for i, jp in enumerate(jr["processors"] or []):
        p = _within(f"processor {i}", _processor, jp)
        end = max(end, p.dst + (len(p.data) if isinstance(p, Put) else p.length))
        processors.append(p)
    if jr["reply_len"] is not None:
        reply_len = jr["reply_len"]
    elif end > 0xFFFF:
        raise _Refused(f"the processors write up to byte {end}, beyond any reply")
    else:
        reply_len = end
    return Rule(cond["offset"], pattern, reply_len, processors, min_len, max_len)


def _within(where: str, f: Any, arg: Any) -> Any:
    """f(arg), its refusal prefixed with where it happened."""
    try:
        return f(arg)
    except _Refused as e:
        raise _Refused(f"{where}: {e}") from None


def _processor(jp: dict[str, Any]) -> Processor:
    put, copy = jp["put"], jp["copy"]
    if put is not None and copy is not None:
        raise _Refused('give "put" or "copy", not both')
    if put is not None:
        return Put(put["offset"], _within("put", _bytes, put))
    if copy is not None:
        return Copy(copy["from"], copy["length"], copy["to"])
    raise _Refused('give "put" or "copy"')


# Go's unicode.IsSpace, which strings.Fields splits hex at.
_GO_SPACE = re.compile("[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")
_HEX_DIGIT = frozenset(b"0123456789abcdefABCDEF")


def _bytes(s: dict[str, Any]) -> bytes:
    """A byteString: text, hex, or both agreeing."""
    text, hexdigits = s["text"], s["hex"]
    if hexdigits == "":
        if text == "":
            raise _Refused('give "text" or "hex"')
        return text.encode()
    b = _hex(_GO_SPACE.sub("", hexdigits).encode())
    if text != "" and text.encode() != b:
        raise _Refused(f"text {_quote(text.encode())} and hex {_quote(b)} differ")
    return b


def _hex(src: bytes) -> bytes:
    """encoding/hex's DecodeString, with its errors: the first bad digit,
    else an odd length."""
    for c in src:
        if c not in _HEX_DIGIT:
            rune = f"U+{c:04X}" + (f" '{chr(c)}'" if chr(c).isprintable() else "")
            raise _Refused(f"hex: invalid byte: {rune}")
    if len(src) % 2:
        raise _Refused("hex: odd length hex string")
    return bytes.fromhex(src.decode())


def _quote(b: bytes) -> str:
    """santactl's quote (escape.go): printable ASCII as it is, the rest as
    \\xHH, with Go's \\n \\r \\t \\" \\\\."""
    named = {ord('"'): '\\"', ord("\\"): "\\\\", ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}
    return '"' + "".join(named.get(c) or (chr(c) if 0x20 <= c <= 0x7E else f"\\x{c:02x}") for c in b) + '"'


def _length(node: gj.Node) -> tuple[int, int]:
    """A condition's "length" (length.go): min_len and max_len."""
    want = _Refused(f"want {_LENGTH_FORMS}, not {node.raw.decode(errors='replace')}")
    if node.kind == "number":
        value = float(node.value)
        if math.isinf(value):
            raise want
        text = _go_float(value)
    elif node.kind == "string":
        text = node.value
    else:
        raise want
    lo, ranged, hi = text.partition("-")
    low = _uint16(lo)
    if low is None:
        raise want
    high = low
    if ranged and hi == "":
        high = 0
    elif ranged:
        high = _uint16(hi)
        if not high:
            raise want
    if not ranged and low == 0:
        raise _Refused("0 allows no request: a request holds at least the condition")
    if low == 0 and high == 0:
        raise _Refused('"0-" allows every length: leave "length" out')
    return low, high


def _uint16(s: str) -> int | None:
    """strconv.ParseUint(s, 10, 16), None for an error."""
    if not re.fullmatch("[0-9]+", s) or int(s) > 0xFFFF:
        return None
    return int(s)


def _go_float(v: float) -> str:
    """strconv.FormatFloat(v, 'f', -1, 64): the shortest digits that read
    back as v, without an exponent."""
    s = format(Decimal(repr(v)), "f")
    return s.rstrip("0").rstrip(".") if "." in s else s
