"""Every message body of docs/protocol.md, declared once.

Field names are the document's, so a body's fields are also its JSON form in
the shared test vectors. Each field's codec sits in its annotation; `BODIES`
says which (type, reply) each class is.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Annotated, Any

from .rules import RULE, Rule
from .wire import FLAG, U8, U16, U32, U64, Codec, Fixed, ListOf, PageOf, Since, String16, Struct

#: The `next` of the last page of LIST_RULES and RULE_STATS.
LAST_PAGE = 0xFFFFFFFF


class MsgType(enum.IntEnum):
    HELLO = 1
    ATTACH = 2
    DETACH = 3
    ADD_RULES = 4
    REPLACE_RULES = 5
    DELETE_RULES = 6
    BEGIN = 7
    COMMIT = 8
    ABORT = 9
    LIST_SERVICES = 10
    LIST_RULES = 11
    RULE_STATS = 12
    SERVICE_STATS = 13
    STATUS = 14
    ERROR = 0xFFFF


UInt8 = Annotated[int, U8]
UInt16 = Annotated[int, U16]
UInt32 = Annotated[int, U32]
UInt64 = Annotated[int, U64]
RuleField = Annotated[Rule, RULE]
UInt32List = Annotated[list[int], ListOf(U32)]


# Shared structures.

@dataclass(frozen=True)
class Service:
    """A registered socket. `manager` (protocol version 2; "" in version 1)
    is the HELLO name of the client that attached it or last set its
    learning: "" if neither happened since santad started."""

    service_id: UInt32
    protocol: UInt8
    family: UInt8
    port: UInt16
    addr: Annotated[bytes, Fixed(16)]
    cookie: UInt64
    netns_cookie: UInt64
    owner_uid: UInt32
    rules: UInt32
    manager: Annotated[str, Since(2, String16(64), "")]


@dataclass(frozen=True)
class RuleEntry:
    """A rule with its id: LIST_RULES pages and REPLACE_RULES updates."""

    rule_id: UInt32
    rule: RuleField


@dataclass(frozen=True)
class RuleCounters:
    rule_id: UInt32
    hits: UInt64
    bytes: UInt64


@dataclass(frozen=True)
class Interface:
    ifindex: UInt32
    name: Annotated[str, String16()]
    xdp: Annotated[str, String16()]
    tc: Annotated[int, FLAG]


# Bodies that share a shape share a base; each message still has its own
# class, because the class is what names the message when encoding.

@dataclass(frozen=True)
class _Empty:
    pass


@dataclass(frozen=True)
class _ServiceId:
    service_id: UInt32


@dataclass(frozen=True)
class _Txn:
    txn: UInt32


@dataclass(frozen=True)
class _RuleIds:
    rule_ids: UInt32List


@dataclass(frozen=True)
class _Page:
    service_id: UInt32
    start: UInt32
    max: UInt32


@dataclass(frozen=True)
class HelloRequest:
    min_version: UInt16
    max_version: UInt16
    client: Annotated[str, String16(64)]


@dataclass(frozen=True)
class HelloReply:
    version: UInt16
    uid: UInt32
    gid: UInt32
    pid: UInt32
    admin: Annotated[int, FLAG]
    quota_rules: UInt32
    quota_bytes: UInt64
    daemon: Annotated[str, String16()]


@dataclass(frozen=True)
class AttachRequest:
    flags: UInt32 = 0


class DetachRequest(_ServiceId):
    pass


class DetachReply(_Empty):
    pass


@dataclass(frozen=True)
class AddRulesRequest:
    service_id: UInt32
    txn: UInt32
    rules: Annotated[list[Rule], ListOf(RULE, min_count=1)]


class AddRulesReply(_RuleIds):
    pass


@dataclass(frozen=True)
class ReplaceRulesRequest:
    service_id: UInt32
    txn: UInt32
    updates: Annotated[list[RuleEntry], ListOf(Struct(RuleEntry))]


class ReplaceRulesReply(_Empty):
    pass


@dataclass(frozen=True)
class DeleteRulesRequest:
    service_id: UInt32
    txn: UInt32
    rule_ids: UInt32List


class DeleteRulesReply(_Empty):
    pass


class BeginRequest(_ServiceId):
    pass


class BeginReply(_Txn):
    pass


class CommitRequest(_Txn):
    pass


@dataclass(frozen=True)
class CommitReply:
    """How many rules the transaction added; their ids came with ADD_RULES."""

    added: UInt32


class AbortRequest(_Txn):
    pass


class AbortReply(_Empty):
    pass


class ListServicesRequest(_Empty):
    pass


@dataclass(frozen=True)
class ListServicesReply:
    services: Annotated[list[Service], ListOf(Struct(Service))]


class ListRulesRequest(_Page):
    pass


@dataclass(frozen=True)
class ListRulesReply:
    """On the wire the count comes before `next`: see PageOf."""

    next: int
    rules: list[RuleEntry]


class RuleStatsRequest(_Page):
    pass


@dataclass(frozen=True)
class RuleStatsReply:
    """On the wire the count comes before `next`: see PageOf."""

    next: int
    counters: list[RuleCounters]


class ServiceStatsRequest(_ServiceId):
    pass


@dataclass(frozen=True)
class ServiceStatsReply:
    """A service's counters. The tc_* fields (protocol version 2; 0 in
    version 1) say why TC answered what XDP could not; `fallback` is their
    sum."""
    matched: UInt64
    passed: UInt64
    fallback: UInt64
    bad_csum: UInt64
    rules: UInt32
    rule_bytes: UInt64
    tc_checksum: Annotated[int, Since(2, U64, 0)] = 0
    tc_too_long: Annotated[int, Since(2, U64, 0)] = 0
    tc_no_xdp: Annotated[int, Since(2, U64, 0)] = 0


class StatusRequest(_Empty):
    pass


@dataclass(frozen=True)
class StatusReply:
    daemon: Annotated[str, String16()]
    rules: UInt32
    capacity: UInt32
    services: UInt32
    interfaces: Annotated[list[Interface], ListOf(Struct(Interface), U16)]


@dataclass(frozen=True)
class ErrorReply:
    code: UInt32
    index: UInt32
    message: Annotated[str, String16(1024)]


#: Which message each body class is: (type, is it a reply).
BODIES: dict[tuple[MsgType, bool], type[Any]] = {
    (MsgType.HELLO, False): HelloRequest,
    (MsgType.HELLO, True): HelloReply,
    (MsgType.ATTACH, False): AttachRequest,
    (MsgType.ATTACH, True): Service,
    (MsgType.DETACH, False): DetachRequest,
    (MsgType.DETACH, True): DetachReply,
    (MsgType.ADD_RULES, False): AddRulesRequest,
    (MsgType.ADD_RULES, True): AddRulesReply,
    (MsgType.REPLACE_RULES, False): ReplaceRulesRequest,
    (MsgType.REPLACE_RULES, True): ReplaceRulesReply,
    (MsgType.DELETE_RULES, False): DeleteRulesRequest,
    (MsgType.DELETE_RULES, True): DeleteRulesReply,
    (MsgType.BEGIN, False): BeginRequest,
    (MsgType.BEGIN, True): BeginReply,
    (MsgType.COMMIT, False): CommitRequest,
    (MsgType.COMMIT, True): CommitReply,
    (MsgType.ABORT, False): AbortRequest,
    (MsgType.ABORT, True): AbortReply,
    (MsgType.LIST_SERVICES, False): ListServicesRequest,
    (MsgType.LIST_SERVICES, True): ListServicesReply,
    (MsgType.LIST_RULES, False): ListRulesRequest,
    (MsgType.LIST_RULES, True): ListRulesReply,
    (MsgType.RULE_STATS, False): RuleStatsRequest,
    (MsgType.RULE_STATS, True): RuleStatsReply,
    (MsgType.SERVICE_STATS, False): ServiceStatsRequest,
    (MsgType.SERVICE_STATS, True): ServiceStatsReply,
    (MsgType.STATUS, False): StatusRequest,
    (MsgType.STATUS, True): StatusReply,
    (MsgType.ERROR, True): ErrorReply,
}

#: Bodies whose wire order is not their fields' order.
_CODECS: dict[type[Any], Codec[Any]] = {
    ListRulesReply: PageOf(ListRulesReply, Struct(RuleEntry)),
    RuleStatsReply: PageOf(RuleStatsReply, Struct(RuleCounters)),
}

#: The reverse of BODIES, with each body's codec.
KIND_OF: dict[type[Any], tuple[MsgType, bool, Codec[Any]]] = {
    cls: (t, reply, _CODECS.get(cls) or Struct(cls)) for (t, reply), cls in BODIES.items()
}
