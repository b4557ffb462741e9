"""The shared test vectors, and their JSON form turned into body dataclasses."""

from __future__ import annotations

import dataclasses
import enum
import ipaddress
import json
import types
import typing
from pathlib import Path
from typing import Any

from santa import Copy, Guard, Put, Rule
from santa.messages import BODIES, MsgType
from santa.wire import Since

PATH = Path(__file__).resolve().parents[3] / "testdata" / "protocol" / "vectors.json"


def load() -> dict[str, Any]:
    with PATH.open() as f:
        data: dict[str, Any] = json.load(f)
    return data


def body_class(message: dict[str, Any]) -> type[Any]:
    """The class of a vector's message; an unknown type or direction is a
    KeyError, so a new kind of vector fails rather than being skipped."""
    return BODIES[MsgType[message["type"]], message["reply"]]


def from_json(cls: type[Any], obj: dict[str, Any], version: int) -> Any:
    """The body dataclass `cls` holding `obj`, a body of protocol `version`
    in the vectors' JSON form.

    Keys must be exactly the fields of that version: a field one side lacks
    is a mismatch between this SDK and the vectors, never something to
    ignore. A field of a later version takes the value it reads as."""
    hints = typing.get_type_hints(cls)
    later: dict[str, Any] = {}  # fields of a later version, as they read
    for name, tp in typing.get_type_hints(cls, include_extras=True).items():
        codec = getattr(tp, "__metadata__", (None,))[0]
        if isinstance(codec, Since) and version < codec.version:
            later[name] = codec.default
    names = [f.name for f in dataclasses.fields(cls) if f.name not in later]
    _expect_keys(obj, names, cls.__name__)
    return cls(**later, **{n: _value(hints[n], obj[n], version) for n in names})


def _int(v: Any) -> int:
    # bool is an int in Python, but the doc says numbers, not booleans.
    if type(v) is not int:
        raise TypeError(f"{v!r} is not an integer")
    return v


def _value(tp: Any, v: Any, version: int) -> Any:
    if tp is int:
        return _int(v)
    if tp is bool:  # a flag: 0 or 1 in the vectors
        if _int(v) not in (0, 1):
            raise TypeError(f"flag {v!r} is not 0 or 1")
        return bool(v)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return _union(typing.get_args(tp), v)
    if tp is str:
        if not isinstance(v, str):
            raise TypeError(f"{v!r} is not a string")
        return v
    if tp is bytes:
        return bytes.fromhex(v)
    if tp is Rule:
        return rule(v)
    if typing.get_origin(tp) is list:
        (item,) = typing.get_args(tp)
        return [_value(item, x, version) for x in v]
    return from_json(tp, v, version)


def _union(members: tuple[Any, ...], v: Any) -> Any:
    """A field that is an enum or a plain value (Service.protocol), or an
    address, which the vectors give as the wire's 16 bytes in hex."""
    if ipaddress.IPv4Address in members:
        return bytes.fromhex(v)  # Service makes it an address by its family
    (kind,) = (m for m in members if isinstance(m, type) and issubclass(m, enum.Enum))
    value = kind(v)  # a value the SDK does not name is a mismatch here
    if type(value.value) is not type(v):
        raise TypeError(f"{v!r} is not a {kind.__name__}")
    return value


def rule(obj: dict[str, Any]) -> Rule:
    """A rule; its flags are what the SDK writes for its length condition
    and its guard."""
    keys = ["cond_off", "pattern", "reply_len", "flags", "processors"]
    flags = obj.get("flags")
    if flags not in (0, 1, 2, 3):
        raise KeyError(f"rule flags {flags!r}: the SDK knows bits 0 and 1 only")
    length, guarded = flags & 1, flags & 2
    if length:
        keys += ["min_len", "max_len"]
    if guarded:
        keys += ["guard"]
    _expect_keys(obj, keys, "rule")
    return Rule(
        _int(obj["cond_off"]),
        bytes.fromhex(obj["pattern"]),
        _int(obj["reply_len"]),
        [_processor(p) for p in obj["processors"]],
        _int(obj["min_len"]) if length else 0,
        _int(obj["max_len"]) if length else 0,
        _guard(obj["guard"]) if guarded else None,
    )


def _guard(obj: dict[str, Any]) -> Guard:
    names = ["key", "gen", "domain_gen", "epoch", "expires_in_ms"]
    _expect_keys(obj, names, "guard")
    return Guard(bytes.fromhex(obj["key"]), *(_int(obj[n]) for n in names[1:]))


def _processor(obj: dict[str, Any]) -> Put | Copy:
    ((kind, args),) = obj.items()
    if kind == "put":
        _expect_keys(args, ["dst", "bytes"], "put")
        return Put(_int(args["dst"]), bytes.fromhex(args["bytes"]))
    if kind == "copy":
        _expect_keys(args, ["src", "len", "dst"], "copy")
        return Copy(_int(args["src"]), _int(args["len"]), _int(args["dst"]))
    raise KeyError(f"unknown processor {kind!r}")


def _expect_keys(obj: dict[str, Any], names: list[str], what: str) -> None:
    if set(obj) != set(names):
        raise KeyError(f"{what} has keys {sorted(obj)}, the SDK has {sorted(names)}")
