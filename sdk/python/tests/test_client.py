"""The client against a fake santad over real SOCK_SEQPACKET sockets."""

import dataclasses
import errno
import ipaddress
import os
import socket
import tempfile
import unittest
from collections.abc import Callable
from unittest import mock

from santa import NO_INDEX, SOCKET_ENV, Client, Guard, Protocol, Put, Rule, RuleEntry, SantaError, encode
from santa.messages import (
    AbortRequest, AddRulesRequest, AttachRequest, BeginReply, BeginRequest, CommitRequest,
    DeleteRulesRequest, ErrorReply, HelloReply, HelloRequest, ListRulesRequest, ListServicesRequest,
    StatusReply,
)
from santa.protocol import MAX_MESSAGE, VERSION

from .fake_santad import FakeSanta, cookie


def rules(n: int, reply_len: int = 6) -> list[Rule]:
    return [Rule.on(b"req %d" % i, bytes(reply_len)) for i in range(n)]


class ClientTest(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakeSanta()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.fake.serve(theirs)
        self.client = Client(ours, "test")
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.sid = self.client.attach(self.udp).service_id

    def tearDown(self) -> None:
        self.client.close()
        self.udp.close()
        self.fake.stop()

    def requests(self, kind: type) -> list:
        return [r for r in self.fake.requests if isinstance(r, kind)]

    def test_hello(self) -> None:
        self.assertEqual(self.fake.requests[0], HelloRequest(1, VERSION, "test"))
        self.assertEqual(self.client.hello.daemon, "fake santad")
        self.assertEqual((self.client.hello.version, self.client.version), (VERSION, VERSION))

    def test_length_condition(self) -> None:
        rule = Rule.on(b"Hello", reply=b"COMSYS").exact_length(5)
        self.assertEqual((rule.min_len, rule.max_len, rule.has_length), (5, 5, True))
        ranged = Rule(0, b"Hi", 1, [], min_len=3)
        ids = self.client.add_rules(self.sid, [rule, ranged])
        self.assertEqual(list(self.client.rules(self.sid)), [RuleEntry(ids[0], rule), RuleEntry(ids[1], ranged)])

    def test_attach_passes_the_socket_itself(self) -> None:
        (service,) = self.client.services()
        self.assertEqual(self.fake.cookies, [cookie(self.udp)])
        self.assertEqual(service.cookie, cookie(self.udp))
        self.assertEqual(service.port, self.udp.getsockname()[1])
        self.assertEqual(service.addr, ipaddress.IPv4Address("127.0.0.1"))
        self.assertIs(service.protocol, Protocol.UDP)
        self.assertEqual(service.manager, "test")  # our HELLO name
        self.assertEqual(self.requests(AttachRequest), [AttachRequest(0)])

    def test_services_pages(self) -> None:
        """services() reads every page of LIST_SERVICES (the fake's hold 2),
        each from where the last said the next starts."""
        socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(4)]
        try:
            sids = [self.sid]
            for s in socks:
                s.bind(("127.0.0.1", 0))
                sids.append(self.client.attach(s).service_id)
            self.assertEqual([s.service_id for s in self.client.services()], sids)
            self.assertEqual(self.requests(ListServicesRequest),
                             [ListServicesRequest(0), ListServicesRequest(sids[2]), ListServicesRequest(sids[4])])
        finally:
            for s in socks:
                s.close()

    def test_listing_1(self) -> None:
        rule = Rule.on(b"Hello", reply=b"COMSYS")
        self.assertEqual(rule, Rule(0, b"Hello", 6, [Put(0, b"COMSYS")]))
        rule_id = self.client.add_rule(self.sid, rule)
        self.assertEqual(list(self.client.rules(self.sid)), [RuleEntry(rule_id, rule)])
        self.assertEqual(self.client.service_stats(self.sid).rules, 1)
        self.assertEqual(self.client.status().services, 1)

    def test_small_batch_is_one_message(self) -> None:
        ids = self.client.add_rules(self.sid, rules(10))
        self.assertEqual(len(ids), 10)
        (request,) = self.requests(AddRulesRequest)
        self.assertEqual(request.txn, 0)
        self.assertEqual(self.requests(BeginRequest), [])

    def test_empty_batch_sends_nothing(self) -> None:
        sent = len(self.fake.requests)
        self.assertEqual(self.client.add_rules(self.sid, []), [])
        self.client.delete_rules(self.sid, [])
        self.assertEqual(len(self.fake.requests), sent)

    def test_large_batch_is_split_under_a_transaction(self) -> None:
        batch = rules(3000, reply_len=100)
        ids = self.client.add_rules(self.sid, batch)
        kinds = [type(r) for r in self.fake.requests[2:]]  # after HELLO, ATTACH
        adds = self.requests(AddRulesRequest)
        self.assertGreaterEqual(len(adds), 3)
        self.assertEqual(kinds, [BeginRequest] + [AddRulesRequest] * len(adds) + [CommitRequest])
        (commit,) = self.requests(CommitRequest)
        self.assertTrue(all(a.txn == commit.txn != 0 for a in adds))
        self.assertEqual([r for a in adds for r in a.rules], batch)
        self.assertTrue(all(len(encode(1, a)) <= MAX_MESSAGE for a in adds))
        self.assertEqual(len(set(ids)), 3000)
        self.assertEqual([e.rule for e in self.client.rules(self.sid)], batch)

    def test_split_batch_is_all_or_nothing(self) -> None:
        batch = rules(3000, reply_len=100)
        batch[2500] = Rule(0, b"", 1)
        with self.assertRaises(SantaError) as caught:
            self.client.add_rules(self.sid, batch)
        # The index names the rule in the caller's list, not in its piece.
        self.assertEqual((caught.exception.code, caught.exception.index), (errno.EINVAL, 2500))
        self.assertIsInstance(self.fake.requests[-1], AbortRequest)
        self.assertEqual(list(self.client.rules(self.sid)), [])

    def test_large_delete_is_split_too(self) -> None:
        self.client.delete_rules(self.sid, range(100_000))
        deletes = self.requests(DeleteRulesRequest)
        self.assertEqual(sum(len(d.rule_ids) for d in deletes), 100_000)
        self.assertGreater(len(deletes), 1)
        self.assertEqual(len(self.requests(CommitRequest)), 1)

    def test_rule_too_big_for_any_message(self) -> None:
        huge = Rule(0, b"x", 1, [Put(0, bytes(60000))] * 3)
        with self.assertRaises(SantaError) as caught:
            self.client.add_rules(self.sid, [Rule.on(b"a", b"b"), huge])
        self.assertEqual((caught.exception.code, caught.exception.index), (errno.EMSGSIZE, 1))

    def test_paging(self) -> None:
        ids = self.client.add_rules(self.sid, rules(5))
        self.assertEqual([e.rule_id for e in self.client.rules(self.sid)], ids)
        self.assertEqual(len(self.requests(ListRulesRequest)), 3)  # pages of 2
        self.fake.hits = 4
        counters = [(c.rule_id, c.hits) for c in self.client.rule_stats(self.sid)]
        self.assertEqual(counters, [(i, 4) for i in ids])

    def test_transaction_commits(self) -> None:
        old = self.client.add_rules(self.sid, rules(2))
        new = Rule.on(b"new", b"NEW")
        with self.client.transaction(self.sid) as txn:
            a = txn.add_rule(Rule.on(b"a", b"A"))
            txn.replace_rules([(old[0], new)])
            txn.delete_rules([old[1]])
            (b,) = txn.add_rules([Rule.on(b"b", b"B")])
            self.assertEqual(list(self.client.rules(self.sid))[0].rule, rules(1)[0])  # nothing yet
        self.assertEqual(txn.rule_ids, [a, b])
        self.assertEqual(
            {e.rule_id: e.rule.pattern for e in self.client.rules(self.sid)},
            {old[0]: b"new", a: b"a", b: b"b"},
        )

    def test_transaction_aborts_on_exception(self) -> None:
        with self.assertRaises(KeyError):
            with self.client.transaction(self.sid) as txn:
                txn.add_rules(rules(3))
                raise KeyError("the caller's own failure")
        self.assertEqual(self.fake.requests[-1], AbortRequest(txn.txn))
        self.assertEqual(list(self.client.rules(self.sid)), [])

    def test_error_reply(self) -> None:
        with self.assertRaises(SantaError) as caught:
            self.client.detach(999)
        e = caught.exception
        self.assertEqual((e.code, e.index, e.message), (errno.ENOENT, NO_INDEX, "no service 999"))
        self.assertIn("ENOENT", str(e))
        # Only EPROTO and EMSGSIZE end a connection.
        self.client.detach(self.sid)
        self.assertEqual(self.client.services(), [])


class ConnectTest(unittest.TestCase):
    def test_connect_by_path(self) -> None:
        fake = self._connect_to_fake(lambda path: Client.connect(path, name="by-path"))
        self.assertEqual(fake.requests[0], HelloRequest(1, VERSION, "by-path"))

    def test_connect_by_environment(self) -> None:
        """Without a path, connect() uses $SANTA_SOCKET."""

        def connect(path: str) -> Client:
            with mock.patch.dict(os.environ, {SOCKET_ENV: path}):
                return Client.connect(name="by-env")

        fake = self._connect_to_fake(connect)
        self.assertEqual(fake.requests[0], HelloRequest(1, VERSION, "by-env"))

    def _connect_to_fake(self, connect: Callable[[str], Client]) -> FakeSanta:
        """Serves a fake santad at a fresh path and asks its STATUS over
        the client connect(path) makes."""
        fake = FakeSanta()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "santa.sock")
            fake.listen(path)
            try:
                with connect(path) as client:
                    self.assertEqual(client.status().daemon, "fake santad")
            finally:
                fake.stop()
        return fake

    def test_version_mismatch(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        theirs.send(encode(1, HelloReply(VERSION + 1, 0, 0, 1, 1, 0, 0, "from the future")))
        with self.assertRaises(SantaError) as caught:
            Client(ours)
        self.assertEqual(caught.exception.code, errno.EPROTONOSUPPORT)
        self.assertEqual(ours.fileno(), -1)  # the client closed what it owned
        theirs.close()

    def test_version_1_daemon(self) -> None:
        """An older santad is served in version 1, without a service's
        manager; but a length condition, which version 1 cannot carry, is
        refused before it is sent."""
        fake = FakeSanta(version=1)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fake.serve(theirs)
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("127.0.0.1", 0))
        with Client(ours) as client, udp:
            self.assertEqual(client.version, 1)
            service = client.attach(udp)
            self.assertEqual(service.manager, "")
            sid = service.service_id
            plain = Rule.on(b"Hello", b"COMSYS")
            with self.assertRaises(SantaError) as caught:
                client.add_rules(sid, [plain, plain.exact_length(5)])
            e = caught.exception
            self.assertEqual((e.code, e.index), (errno.EINVAL, 1))
            self.assertIn("a length condition or a guard needs protocol version 2", e.message)
            self.assertFalse(fake.requests[2:])  # HELLO, ATTACH: nothing sent
            client.add_rule(sid, plain)
        fake.stop()

    def test_services_of_a_daemon_without_pages(self) -> None:
        """A santad of version 6 has no pages: its one reply is the list,
        and more services than one reply holds are refused, not cut."""
        fake = FakeSanta(version=6)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fake.serve(theirs)
        socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(3)]
        try:
            with Client(ours) as client:
                self.assertEqual(client.version, 6)
                sids = []
                for s in socks:
                    s.bind(("127.0.0.1", 0))
                    sids.append(client.attach(s).service_id)
                self.assertEqual([s.service_id for s in client.services()], sids)
                self.assertEqual([r for r in fake.requests if isinstance(r, ListServicesRequest)],
                                 [ListServicesRequest()])
                fake.services_fit = 2
                with self.assertRaises(SantaError) as caught:
                    client.services()
                self.assertEqual(caught.exception.code, errno.EPROTONOSUPPORT)
                client.detach(sids[0])  # a refusal: the connection stays
        finally:
            for s in socks:
                s.close()
            fake.stop()

    def test_guards_are_not_sent(self) -> None:
        """A rule santad listed with a guard is refused before it is sent,
        added or replacing, in a transaction or not."""
        fake = FakeSanta()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fake.serve(theirs)
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("127.0.0.1", 0))
        with Client(ours) as client, udp:
            sid = client.attach(udp).service_id
            plain = Rule.on(b"Hello", b"COMSYS")
            guarded = dataclasses.replace(plain, guard=Guard(b"k", 1, 1, 1, 0))
            sent = len(fake.requests)
            for call in (lambda: client.add_rules(sid, [plain, guarded]),
                         lambda: client.replace_rules(sid, [(1, plain), (2, guarded)]),
                         lambda: client.transaction(sid).add_rules([plain, guarded])):
                with self.assertRaises(SantaError) as caught:
                    call()
                e = caught.exception
                self.assertEqual((e.code, e.index), (errno.EINVAL, 1))
                self.assertIn("rule 1 has a guard", e.message)
            self.assertEqual([type(r).__name__ for r in fake.requests[sent:]], ["BeginRequest"])
        fake.stop()


class ReplyCheckTest(unittest.TestCase):
    """Canned replies queued on the peer before each request: no thread."""

    def setUp(self) -> None:
        ours, self.peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.peer.send(encode(1, HelloReply(1, 0, 0, 1, 1, 0, 0, "canned")))
        self.client = Client(ours)

    def tearDown(self) -> None:
        self.client.close()
        self.peer.close()

    def refused(self, reply: bytes) -> SantaError:
        self.peer.send(reply)
        with self.assertRaises(SantaError) as caught:
            self.client.status()
        return caught.exception

    def test_wrong_seq(self) -> None:
        self.assertEqual(self.refused(encode(9, StatusReply("", 0, 0, 0, []))).code, errno.EPROTO)

    def test_wrong_type(self) -> None:
        self.assertEqual(self.refused(encode(2, BeginReply(1))).code, errno.EPROTO)

    def test_error_without_a_seq(self) -> None:
        e = self.refused(encode(0, ErrorReply(errno.EPROTO, NO_INDEX, "bad magic")))
        self.assertEqual((e.code, e.message), (errno.EPROTO, "bad magic"))

    def test_reply_in_another_version(self) -> None:
        e = self.refused(encode(2, StatusReply("", 0, 0, 0, []), 2))
        self.assertEqual(e.code, errno.EPROTO)
        self.assertIn("in version 2; the connection speaks 1", e.message)

    def test_reply_shorter_than_its_header_says(self) -> None:
        cut = encode(2, StatusReply("", 0, 0, 0, []))[:-1]
        self.assertEqual(self.refused(cut).code, errno.EPROTO)


if __name__ == "__main__":
    unittest.main()
