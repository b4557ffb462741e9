"""Every message body of docs/protocol.md, declared once.

Field names are the document's, so a body's fields are also its JSON form in
the shared test vectors. Each field's codec sits in its annotation; `BODIES`
says which (type, reply) each class is.
"""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass
from typing import Annotated, Any, Union

from .rules import RULE, Rule
from .wire import (
    ADDR16,
    FLAG,
    U8,
    U16,
    U32,
    U64,
    Codec,
    EnumOf,
    ListOf,
    PageOf,
    PageSince,
    Since,
    String16,
    Struct,
)

#: The `next` of the last page of LIST_RULES, RULE_STATS and (protocol
#: version 7) LIST_SERVICES.
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


class Protocol(enum.IntEnum):
    """A service's transport protocol: its IPPROTO_ number."""

    TCP = 6
    UDP = 17


class Family(enum.IntEnum):
    """A service's address family, as the protocol numbers it."""

    IPV4 = 4
    IPV6 = 6


class XDPMode(enum.StrEnum):
    """How XDP is attached to an interface (`Interface.xdp`)."""

    NATIVE = "native"
    GENERIC = "generic"
    NONE = "none"


Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]


def service_address(family: int, addr: Address | bytes) -> Address:
    """`addr` as its `family` makes it: from the wire's 16 bytes, an IPv4
    address (family 4: the first 4 bytes; the other 12 are zeros, written
    as such and ignored on reading) or an IPv6 address (any other family).
    An IPv4-mapped IPv6 address stays IPv6, as santactl shows it
    (`.ipv4_mapped` gives the IPv4 one)."""
    if isinstance(addr, (bytes, bytearray, memoryview)):
        raw = bytes(addr)
        if len(raw) != 16:
            raise ValueError(f"an address of {len(raw)} bytes; the protocol's take 16")
        return ipaddress.IPv4Address(raw[:4]) if family == 4 else ipaddress.IPv6Address(raw)
    want = 4 if family == 4 else 6
    if addr.version != want:
        raise ValueError(f"an IPv{addr.version} address for a service of family {family}")
    return addr


UInt8 = Annotated[int, U8]
UInt16 = Annotated[int, U16]
UInt32 = Annotated[int, U32]
UInt64 = Annotated[int, U64]
RuleField = Annotated[Rule, RULE]
UInt32List = Annotated[list[int], ListOf(U32)]


# Shared structures.

@dataclass(frozen=True)
class Service:
    """A registered socket: `protocol` a Protocol, `family` a Family (a
    number this SDK does not name stays an int), `addr` an IPv4Address or
    IPv6Address (service_address), `port` an int. `manager` (protocol
    version 2; "" in version 1)
    is the HELLO name of the client that attached it or last set its
    learning: "" if neither happened since santad started."""

    service_id: UInt32
    protocol: Annotated[Protocol | int, EnumOf(Protocol, U8)]
    family: Annotated[Family | int, EnumOf(Family, U8)]
    port: UInt16
    addr: Annotated[Address, ADDR16]  # 16 bytes are accepted too: service_address
    cookie: UInt64
    netns_cookie: UInt64
    owner_uid: UInt32
    rules: UInt32
    manager: Annotated[str, Since(2, String16(64), "")]

    def __post_init__(self) -> None:
        object.__setattr__(self, "addr", service_address(self.family, self.addr))


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
    xdp: Annotated[XDPMode | str, EnumOf(XDPMode, String16())]
    tc: Annotated[bool, FLAG]  # the TC program is attached


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
    admin: Annotated[bool, FLAG]  # may manage every service
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


@dataclass(frozen=True)
class ListServicesRequest:
    """In protocol version 7, one page of the services: those of id `start`
    and above, at most `max` (0: as many as fit one reply). Older versions
    have no pages, nor these fields."""

    start: Annotated[int, Since(7, U32, 0)] = 0
    max: Annotated[int, Since(7, U32, 0)] = 0


@dataclass(frozen=True)
class ListServicesReply:
    """The services, in rising id order. In protocol version 7 a page of
    them, sent as the page replies are (see PageSince): `next` is where the
    next page starts, or LAST_PAGE. Older versions have no pages: `next`
    reads as LAST_PAGE, the reply being the whole list."""

    services: list[Service]
    next: Annotated[int, Since(7, U32, LAST_PAGE)] = LAST_PAGE


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
    ListServicesReply: PageSince(7, ListServicesReply, "services", Struct(Service), LAST_PAGE),
    ListRulesReply: PageOf(ListRulesReply, Struct(RuleEntry)),
    RuleStatsReply: PageOf(RuleStatsReply, Struct(RuleCounters)),
}

#: The reverse of BODIES, with each body's codec.
KIND_OF: dict[type[Any], tuple[MsgType, bool, Codec[Any]]] = {
    cls: (t, reply, _CODECS.get(cls) or Struct(cls)) for (t, reply), cls in BODIES.items()
}
