"""The codec on its own: every body both ways, and every refusal of the doc."""

import errno
import struct
import unittest
from dataclasses import replace
from typing import Any

from santa import LAST_PAGE, Copy, Guard, Put, Rule, SantaError, decode, encode
from santa.errors import NO_INDEX
from santa.messages import (
    BODIES,
    KIND_OF,
    AbortReply, AbortRequest, AddRulesReply, AddRulesRequest, AttachRequest,
    BeginReply, BeginRequest, CommitReply, CommitRequest, DeleteRulesReply,
    DeleteRulesRequest, DetachReply, DetachRequest, ErrorReply, HelloReply,
    HelloRequest, Interface, ListRulesReply, ListRulesRequest, ListServicesReply,
    ListServicesRequest, MsgType, ReplaceRulesReply, ReplaceRulesRequest,
    RuleCounters, RuleEntry, RuleStatsReply, RuleStatsRequest, Service,
    ServiceStatsReply, ServiceStatsRequest, StatusReply, StatusRequest,
)
from santa.protocol import MAGIC, MAX_MESSAGE, VERSION

HELLO = Rule.on(b"Hello", b"COMSYS")
DNS = Rule(2, b"\x01\x00\x00\x01", 40, [Put(2, b"\x81\x80"), Copy(0, 2, 0)])
EMPTY_PUT = Rule(0, b"x", 1, [Put(0, b"")])  # the smallest processor there is
SERVICE = Service(7, 17, 4, 7777, bytes([127, 0, 0, 1]) + bytes(12), 4319, 3, 1000, 2, "")

# One body of every class; test_every_body_has_an_example keeps it complete.
EXAMPLES: list[Any] = [
    HelloRequest(1, 1, "test"),
    HelloReply(1, 1000, 1000, 42, 0, 65536, 64 << 20, "santad 0.1"),
    AttachRequest(),
    SERVICE,
    DetachRequest(7),
    DetachReply(),
    AddRulesRequest(7, 0, [HELLO, DNS, EMPTY_PUT]),
    AddRulesReply([1, 2]),
    ReplaceRulesRequest(7, 3, [RuleEntry(1, DNS)]),
    ReplaceRulesReply(),
    DeleteRulesRequest(7, 0, [1, 2]),
    DeleteRulesReply(),
    BeginRequest(7),
    BeginReply(3),
    CommitRequest(3),
    CommitReply(2),
    AbortRequest(3),
    AbortReply(),
    ListServicesRequest(),
    ListServicesRequest(5, 2),
    ListServicesReply([SERVICE, SERVICE]),
    ListServicesReply([SERVICE], 9),
    ListRulesRequest(7, 0, 0),
    ListRulesReply(0xFFFFFFFF, [RuleEntry(1, HELLO), RuleEntry(2, DNS)]),
    RuleStatsRequest(7, 0, 100),
    RuleStatsReply(3, [RuleCounters(1, 5, 30), RuleCounters(2, 0, 0)]),
    ServiceStatsRequest(7),
    ServiceStatsReply(10, 5, 1, 0, 2, 57),
    StatusRequest(),
    StatusReply("santad 0.1", 2, 1 << 20, 1, [Interface(2, "eth0", "native", 1)]),
    ErrorReply(errno.EINVAL, 3, "condition pattern is 300 bytes; the limit is 256"),
]


def header(wire_type: int, length: int, magic: int = MAGIC, version: int = 1) -> bytes:
    return struct.pack("<IHHII", magic, version, wire_type, length, 1)


def message(wire_type: int, body: bytes) -> bytes:
    return header(wire_type, 16 + len(body)) + body


class RoundTripTest(unittest.TestCase):
    def test_every_body_has_an_example(self) -> None:
        self.assertEqual({type(b) for b in EXAMPLES}, set(BODIES.values()))

    def test_round_trip(self) -> None:
        # In version 1, but for the pages of LIST_SERVICES (version 7), and
        # in the newest version.
        paged = (ListServicesRequest(5, 2), ListServicesReply([SERVICE], 9))
        for body in EXAMPLES:
            for version in (1, VERSION) if body not in paged else (VERSION,):
                with self.subTest(type(body).__name__, version=version):
                    header, decoded = decode(encode(99, body, version))
                    self.assertEqual(decoded, body)
                    self.assertEqual((header.seq, header.version), (99, version))
                    self.assertIs(BODIES[header.type, header.reply], type(body))

    def test_size_is_the_encoded_size(self) -> None:
        # Batches are split by size(), so it must be exact, in every version;
        # a size is the newest version's where versions differ: a service's
        # and a service's counters (version 1 has no manager, no reasons TC
        # answered), LIST_SERVICES' (version 7 pages it).
        versioned = (Service, ListServicesRequest, ListServicesReply, ServiceStatsReply)
        for body in EXAMPLES:
            with self.subTest(type(body).__name__):
                codec = KIND_OF[type(body)][2]
                if not isinstance(body, versioned):
                    self.assertEqual(codec.size(body), len(encode(1, body)) - 16)
                    self.assertEqual(codec.size(body), len(encode(1, body, 2)) - 16)
                self.assertEqual(codec.size(body), len(encode(1, body, VERSION)) - 16)
        ranged = AddRulesRequest(7, 0, [HELLO.exact_length(5), Rule(1, b"x", 1, [], 3, 0)])
        self.assertEqual(KIND_OF[AddRulesRequest][2].size(ranged), len(encode(1, ranged, 2)) - 16)

    def test_length_condition_round_trip(self) -> None:
        body = AddRulesRequest(7, 0, [HELLO.exact_length(5), Rule(1, b"x", 1, [], 3, 0), HELLO])
        header, decoded = decode(encode(4, body, 2))
        self.assertEqual((header.version, decoded), (2, body))

    def test_manager_by_version(self) -> None:
        """Version 2's service ends with its manager; version 1 has none."""
        managed = ListServicesReply([replace(SERVICE, manager="m" * 64)])
        v2 = encode(1, managed, 2)
        self.assertEqual(v2[16 + 4 + 48 :], b"\x40\x00" + b"m" * 64)
        self.assertEqual(decode(v2)[1], managed)
        v1 = encode(1, managed, 1)
        self.assertEqual(len(v1), 16 + 4 + 48)
        self.assertEqual(decode(v1)[1], ListServicesReply([SERVICE]))

    def test_services_pages_by_version(self) -> None:
        """Version 7 pages LIST_SERVICES: start and max; next after the
        count. Older versions carry none of them, and refuse a page."""
        self.assertEqual(encode(1, ListServicesRequest(5, 2), 7)[16:], struct.pack("<II", 5, 2))
        self.assertEqual(encode(1, ListServicesRequest(), 6)[16:], b"")
        page = ListServicesReply([SERVICE], 9)
        v7 = encode(1, page, 7)
        self.assertEqual(v7[16:24], struct.pack("<II", 1, 9))
        self.assertEqual(decode(v7)[1], page)
        whole = ListServicesReply([SERVICE])
        self.assertEqual(whole.next, LAST_PAGE)
        self.assertEqual(decode(encode(1, whole, 7))[1], whole)
        for version in range(1, 7):
            self.assertEqual(decode(encode(1, whole, version))[1], whole)
            with self.assertRaises(SantaError) as caught:
                encode(1, page, version)
            self.assertEqual(caught.exception.code, errno.EINVAL)

    def test_listing_1_bytes(self) -> None:
        data = encode(1, AddRulesRequest(7, 0, [HELLO]))
        self.assertEqual(data[:4], b"SNTA")
        self.assertEqual(data[6:8], b"\x04\x00")
        self.assertEqual(
            data[16:],
            struct.pack("<III", 7, 0, 1)
            + b"\x00\x00" + b"\x05\x00Hello" + b"\x06\x00" + b"\x01\x00"
            + b"\x01\x00" + b"\x00\x00" + b"\x06\x00COMSYS",
        )

    def test_reply_bit(self) -> None:
        self.assertEqual(encode(1, BeginReply(3))[6:8], struct.pack("<H", 0x8007))
        self.assertEqual(encode(1, ErrorReply(1, 2, ""))[6:8], b"\xff\xff")

    def test_empty_body(self) -> None:
        self.assertEqual(len(encode(1, StatusRequest())), 16)


class RefusalTest(unittest.TestCase):
    def refused(self, code: int, data: bytes) -> SantaError:
        with self.assertRaises(SantaError) as caught:
            decode(data)
        self.assertEqual(caught.exception.code, code, caught.exception)
        return caught.exception

    def test_header(self) -> None:
        good = encode(1, DetachRequest(7))
        self.refused(errno.EPROTO, good[:15])
        self.refused(errno.EPROTO, header(3, 20, magic=0x41544E54) + good[16:])
        self.refused(errno.EPROTO, header(3, 20, version=0) + good[16:])
        self.refused(errno.EPROTO, header(3, 20, version=VERSION + 1) + good[16:])
        self.refused(errno.EPROTO, header(3, 21) + good[16:])
        self.refused(errno.EPROTO, good + b"\x00")

    def test_types(self) -> None:
        for wire_type in (0, 15, 0x7FFF, 0x8000, 0x800F, 0xFFFE):
            with self.subTest(hex(wire_type)):
                self.refused(errno.EPROTO, message(wire_type, b""))

    def test_size(self) -> None:
        self.refused(errno.EMSGSIZE, message(10, bytes(MAX_MESSAGE - 15)))
        with self.assertRaises(SantaError) as caught:
            encode(1, DeleteRulesRequest(7, 0, list(range(MAX_MESSAGE // 4))))
        self.assertEqual(caught.exception.code, errno.EMSGSIZE)

    def test_body_exactly_consumed(self) -> None:
        self.refused(errno.EBADMSG, message(3, b"\x07\x00\x00"))
        self.refused(errno.EBADMSG, message(3, b"\x07\x00\x00\x00\x00"))
        self.refused(errno.EBADMSG, message(10, b"\x00"))
        self.refused(errno.EBADMSG, message(1, struct.pack("<HHH", 1, 1, 5) + b"abc"))

    def test_counts_checked_before_use(self) -> None:
        # Four billion rules claimed in 12 bytes: refused at once.
        self.refused(errno.EBADMSG, message(4, struct.pack("<III", 7, 0, 0xFFFFFFFF)))
        self.refused(errno.EBADMSG, message(0x800A, struct.pack("<I", 1) + bytes(47)))

    def test_rule_fields(self) -> None:
        data = encode(1, AddRulesRequest(7, 0, [HELLO, HELLO]))
        # The second rule starts after the header, service_id, txn, count and
        # the first rule; within it: cond_off 2, pattern 2+5, reply_len 2,
        # nproc 1, then flags, then the processor's kind and reserved byte.
        second = 16 + 12 + (len(data) - 28) // 2
        for name, offset, value in (("flags", 12, 1), ("kind", 13, 3), ("reserved", 14, 1)):
            with self.subTest(name):
                bad = bytearray(data)
                bad[second + offset] = value
                self.assertEqual(self.refused(errno.EINVAL, bytes(bad)).index, 1)

    def test_text_limits(self) -> None:
        self.refused(errno.EINVAL, message(1, struct.pack("<HHH", 1, 1, 65) + b"x" * 65))
        self.refused(errno.EINVAL, message(1, struct.pack("<HHH", 1, 1, 1) + b"\xff"))
        with self.assertRaises(SantaError) as caught:
            encode(1, HelloRequest(1, 1, "x" * 65))
        self.assertEqual(caught.exception.code, errno.EINVAL)
        long = bytearray(encode(1, replace(SERVICE, manager="m" * 64), 2) + b"m")
        long[8:12] = struct.pack("<I", len(long))
        long[16 + 48] = 65  # a manager of 65 bytes
        self.refused(errno.EINVAL, bytes(long))
        with self.assertRaises(SantaError) as caught:
            encode(1, replace(SERVICE, manager="m" * 65), 2)
        self.assertEqual(caught.exception.code, errno.EINVAL)

    def test_values_that_do_not_fit(self) -> None:
        for body in (
            DetachRequest(1 << 32),
            DetachRequest(-1),
            AddRulesRequest(7, 0, [Rule(0, b"x" * 65536, 1)]),
            replace(SERVICE, protocol=256),
        ):
            with self.subTest(body):
                with self.assertRaises(SantaError) as caught:
                    encode(1, body)
                self.assertEqual(caught.exception.code, errno.EINVAL)

    def test_length_condition_bytes(self) -> None:
        """Version 2: nproc, flags 1, min_len and max_len, then the processors.
        Version 1 cannot carry it: refused, naming the rule."""
        data = encode(1, AddRulesRequest(7, 0, [HELLO.exact_length(9)]), 2)
        self.assertEqual(data[4:6], b"\x02\x00")
        self.assertEqual(
            data[16 + 12 + 11 :],
            b"\x01" + b"\x01" + b"\x09\x00\x09\x00" + b"\x01\x00" + b"\x00\x00" + b"\x06\x00COMSYS",
        )
        with self.assertRaises(SantaError) as caught:
            encode(1, AddRulesRequest(7, 0, [HELLO, HELLO.exact_length(9)]), 1)
        self.assertEqual((caught.exception.code, caught.exception.index), (errno.EINVAL, 1))

    def test_rule_flags_by_version(self) -> None:
        v2 = encode(1, AddRulesRequest(7, 0, [HELLO.exact_length(9)]), 2)
        flags = 16 + 12 + 2 + 7 + 2 + 1
        v1 = bytearray(v2)
        v1[4] = 1  # the same bytes read as version 1: flags 1 is no flag there
        self.refused(errno.EINVAL, bytes(v1))
        for value in (4, 0x81):
            bad = bytearray(v2)
            bad[flags] = value
            self.refused(errno.EINVAL, bytes(bad))
        zero = bytearray(v2)
        zero[flags + 1 : flags + 5] = bytes(4)  # min_len 0, max_len 0: no condition
        self.refused(errno.EINVAL, bytes(zero))

    def test_guard(self) -> None:
        """A guard (flags bit 1, version 2) follows the length condition; it
        is read as santad lists it, and version 1 cannot carry it."""
        guarded = replace(HELLO.exact_length(5), guard=Guard(b"k1", 5, 2, 1, 30000))
        data = encode(1, ListRulesReply(LAST_PAGE, [RuleEntry(3, guarded)]), 2)
        self.assertIn(b"\x03" + b"\x05\x00\x05\x00" + b"\x02\x00k1" + b"\x05\x00\x00\x00\x02\x00\x00\x00"
                      + b"\x01\x00\x00\x00" + b"\x30\x75\x00\x00", data)
        self.assertEqual(decode(data)[1].rules[0].rule, guarded)
        with self.assertRaises(SantaError) as caught:
            encode(1, ListRulesReply(LAST_PAGE, [RuleEntry(3, guarded)]), 1)
        self.assertEqual(caught.exception.code, errno.EINVAL)
        dead = bytearray(data)
        at = data.index(b"\x01\x00\x00\x00\x30\x75")  # the epoch
        dead[at] = 0
        self.refused(errno.EINVAL, bytes(dead))

    def test_error_index_names_the_rule(self) -> None:
        with self.assertRaises(SantaError) as caught:
            encode(1, AddRulesRequest(7, 0, [HELLO, HELLO, Rule(1 << 16, b"x", 1)]))
        self.assertEqual(caught.exception.index, 2)
        self.assertEqual(self.refused(errno.EPROTO, b"").index, NO_INDEX)

    def test_not_a_body(self) -> None:
        with self.assertRaises(TypeError):
            encode(1, HELLO)


if __name__ == "__main__":
    unittest.main()
