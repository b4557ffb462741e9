"""Typed fields: addresses as ipaddress objects, enums and bools for what
the wire numbers, with the wire's bytes unchanged."""

import ipaddress
import unittest
from dataclasses import replace

from santa import Family, Protocol, XDPMode, decode, encode
from santa.messages import HelloReply, Interface, Service, StatusReply

V4 = bytes([192, 0, 2, 1]) + bytes(12)
V6 = bytes.fromhex("20010db8000000000000000000000053")
MAPPED = bytes.fromhex("00000000000000000000ffffc0000201")  # ::ffff:192.0.2.1
SERVICE = Service(4, 17, 4, 5353, V4, 4097, 1, 0, 0, "")


def round_trip(body: object) -> object:
    return decode(encode(9, body, 2))[1]


class ServiceTest(unittest.TestCase):
    def test_decoded_types(self) -> None:
        s = round_trip(SERVICE)
        assert isinstance(s, Service)
        self.assertEqual(s.addr, ipaddress.IPv4Address("192.0.2.1"))
        self.assertIs(s.protocol, Protocol.UDP)
        self.assertIs(s.family, Family.IPV4)
        self.assertIs(type(s.port), int)

    def test_ints_still_compare(self) -> None:
        """Code written for the ints of before keeps working."""
        self.assertEqual(SERVICE.protocol, 17)
        self.assertEqual(SERVICE.family, 4)
        self.assertEqual(SERVICE.addr.packed + bytes(12), V4)

    def test_ipv6_and_mapped(self) -> None:
        """Family 6 is IPv6, an IPv4-mapped address included: santactl shows
        it as IPv6 too."""
        for raw in (V6, MAPPED):
            s = round_trip(replace(SERVICE, family=6, addr=raw))
            assert isinstance(s, Service)
            self.assertEqual(s.addr, ipaddress.IPv6Address(raw))
        mapped = replace(SERVICE, family=6, addr=MAPPED).addr
        assert isinstance(mapped, ipaddress.IPv6Address)
        self.assertEqual(mapped.ipv4_mapped, ipaddress.IPv4Address("192.0.2.1"))

    def test_same_bytes_from_an_address(self) -> None:
        """An address and the wire's 16 bytes encode alike: IPv4 padded with
        zeros."""
        for family, raw, addr in (
            (4, V4, ipaddress.IPv4Address("192.0.2.1")),
            (6, V6, ipaddress.IPv6Address("2001:db8::53")),
        ):
            with self.subTest(addr):
                by_bytes = replace(SERVICE, family=family, addr=raw)
                by_addr = replace(SERVICE, family=family, addr=addr)
                self.assertEqual(by_bytes, by_addr)
                self.assertEqual(encode(1, by_bytes, 2), encode(1, by_addr, 2))

    def test_unknown_numbers_stay_ints(self) -> None:
        """A newer santad's protocol or family does not fail the message."""
        s = round_trip(replace(SERVICE, protocol=132, family=7, addr=V6))
        assert isinstance(s, Service)
        self.assertEqual((s.protocol, s.family), (132, 7))
        self.assertIs(type(s.protocol), int)
        self.assertIsInstance(s.addr, ipaddress.IPv6Address)

    def test_address_and_family_disagree(self) -> None:
        for family, addr in (
            (4, ipaddress.IPv6Address("::1")),
            (6, ipaddress.IPv4Address("127.0.0.1")),
            (4, bytes(4)),
        ):
            with self.subTest(addr), self.assertRaises(ValueError):
                replace(SERVICE, family=family, addr=addr)


class FlagTest(unittest.TestCase):
    def test_tc_and_xdp(self) -> None:
        status = StatusReply("santad", 0, 1, 0, [
            Interface(2, "eth0", "native", 1), Interface(3, "lo", "turbo", 0),
        ])
        got = round_trip(status)
        assert isinstance(got, StatusReply)
        eth0, lo = got.interfaces
        self.assertIs(eth0.tc, True)
        self.assertIs(lo.tc, False)
        self.assertIs(eth0.xdp, XDPMode.NATIVE)
        self.assertEqual(eth0.xdp, "native")
        self.assertEqual(lo.xdp, "turbo")  # a mode this SDK does not name
        self.assertEqual(encode(1, got, 2), encode(1, status, 2))

    def test_admin(self) -> None:
        hello = HelloReply(2, 0, 0, 1, True, 0, 0, "santad")
        got = round_trip(hello)
        assert isinstance(got, HelloReply)
        self.assertIs(got.admin, True)
        self.assertEqual(encode(1, hello, 2), encode(1, replace(hello, admin=1), 2))


if __name__ == "__main__":
    unittest.main()
