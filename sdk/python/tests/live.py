#!/usr/bin/env python3
"""Every operation of the SDK against a live santad, checked in the kernel.

    live.py SOCKET

Run in a network namespace where santad serves lo, as any user
(test/daemon/sdk_test.go runs it as nobody). A UDP socket on 127.0.0.1 plays
the application: rules go onto it, and a second socket asks. A request the
kernel answers never reaches the application; one it does not, does. Prints
a line per step and "live: ok"; exits 1 at the first failure. Not a unittest
module: it needs a real santad.
"""

from __future__ import annotations

import errno
import socket
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from santa import VERSION, Client, Copy, Put, Rule, SantaError, accepted  # noqa: E402

TIMEOUT = 1.0


class Failed(Exception):
    pass


def check(ok: bool, what: str) -> None:
    if not ok:
        raise Failed(what)


def step(what: str) -> None:
    print(f"live: {what}", flush=True)


class Peer:
    """The application's socket and a client of it."""

    def __init__(self) -> None:
        self.app = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.app.bind(("127.0.0.1", 0))
        self.app.settimeout(TIMEOUT)
        self.client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.client.connect(self.app.getsockname())
        self.client.settimeout(TIMEOUT)

    def ask(self, request: bytes, on: socket.socket) -> bytes:
        """Sends `request` and returns what arrives on `on`."""
        self.client.send(request)
        try:
            return on.recv(2048)
        except TimeoutError:
            raise Failed(f"{request!r}: nothing arrived within {TIMEOUT} s") from None

    def kernel_answers(self, request: bytes, reply: bytes) -> None:
        """The kernel answers `request` with exactly `reply`."""
        got = self.ask(request, self.client)
        check(got == reply, f"{request!r}: got {got!r}, want {reply!r}")

    def app_receives(self, request: bytes) -> None:
        """`request` is not answered by the kernel: it reaches the application."""
        got = self.ask(request, self.app)
        check(got == request, f"the application got {got!r}, want {request!r}")
        self.client.settimeout(0.1)
        try:
            raise Failed(f"{request!r} was answered by the kernel too: {self.client.recv(2048)!r}")
        except TimeoutError:
            pass
        finally:
            self.client.settimeout(TIMEOUT)


def refused(code: int, call: Callable[[], object]) -> None:
    try:
        call()
    except SantaError as e:
        check(e.code == code and bool(e.message), f"refused with {e}, want {errno.errorcode[code]}")
        return
    raise Failed(f"not refused; want {errno.errorcode[code]}")


def run(path: str) -> None:
    peer = Peer()
    with Client.connect(path, name="live.py") as c:
        step(f"hello: uid {c.hello.uid}, admin {c.hello.admin}")
        svc = c.attach(peer.app)
        sid = svc.service_id
        check(svc.port == peer.app.getsockname()[1], f"attached port {svc.port}")
        check(svc.manager == "live.py", f"attached with manager {svc.manager!r}")
        step(f"attach: service {sid}, manager {svc.manager}")

        ping = c.add_rule(sid, Rule.on(b"ping", b"pong"))
        peer.kernel_answers(b"ping", b"pong")
        # A DNS-like rule: the reply begins with the request's 2-byte id.
        echo = c.add_rule(sid, Rule(2, b"echo", 6, [Put(2, b"ECHO"), Copy(0, 2, 0)]))
        peer.kernel_answers(b"\x12\x34echo", b"\x12\x34ECHO")
        step(f"add: rules {ping} (put) and {echo} (put + copy) answered by the kernel")

        c.replace_rules(sid, [(ping, Rule.on(b"ping", b"PONG!"))])
        peer.kernel_answers(b"ping", b"PONG!")
        step("replace: the new reply, same id")

        batch = c.add_rules(sid, [Rule.on(b"b%d" % i, b"B%d" % i) for i in range(3)])
        for i in range(3):
            peer.kernel_answers(b"b%d" % i, b"B%d" % i)
        step(f"batch: rules {batch}")

        with c.transaction(sid) as txn:
            staged = txn.add_rules([Rule.on(b"t%d" % i, b"T%d" % i) for i in range(3)])
            txn.replace_rules([(batch[0], Rule.on(b"b0", b"B0 again"))])
            peer.app_receives(b"t0")  # staged, not applied
        check(len(staged) == 3 and staged == txn.rule_ids, f"staged ids {staged}")
        for i in range(3):
            peer.kernel_answers(b"t%d" % i, b"T%d" % i)
        peer.kernel_answers(b"b0", b"B0 again")
        step(f"transaction: ids {staged} known when staged, applied at commit")

        c.delete_rules(sid, [batch[1]])
        peer.app_receives(b"b1")
        step("delete: the request reaches the application")

        listed = {e.rule_id: e.rule for e in c.rules(sid)}
        want = {ping, echo, batch[0], batch[2], *staged}
        check(set(listed) == want, f"rules {sorted(listed)}, want {sorted(want)}")
        check(listed[ping] == Rule.on(b"ping", b"PONG!"), f"rule {ping} reads back {listed[ping]}")
        step(f"rules: {len(listed)} listed, contents as installed")

        hits = {rc.rule_id: rc.hits for rc in c.rule_stats(sid)}
        check(hits[ping] == 2 and hits[echo] == 1 and hits[staged[0]] == 1, f"hits {hits}")
        stats = c.service_stats(sid)
        check(stats.matched == 10 and stats.passed >= 2 and stats.rules == 7, f"service stats {stats}")
        step(f"stats: rule hits {hits}, service matched {stats.matched}")

        services = {s.service_id: s.manager for s in c.services()}
        check(services.get(sid) == "live.py", f"services and managers {services}")
        status = c.status()
        check(status.rules >= 7 and any(i.name == "lo" for i in status.interfaces), f"status {status}")
        step(f"services and status: {status.daemon}, {status.rules} rules on the host")

        check(c.version == VERSION, f"HELLO agreed on version {c.version}")
        exact = Rule.on(b"len?", b"LEN!").exact_length(6)
        length = c.add_rule(sid, exact)
        peer.kernel_answers(b"len?xx", b"LEN!")
        peer.app_receives(b"len?xxx")
        peer.app_receives(b"len?x")
        listed = {e.rule_id: e.rule for e in c.rules(sid)}
        check(listed[length] == exact, f"rule {length} reads back {listed[length]}")
        step("length: the rule's length answered by the kernel, one byte more or less by the application")

        refused(errno.EEXIST, lambda: c.attach(peer.app))
        refused(errno.ENOENT, lambda: c.delete_rules(sid, [0xFFFFFFF0]))
        step("errors: EEXIST for a second attach, ENOENT for an unknown rule")

        tcp_accepted(c)
        step("tcp: a request sent before accept() answered by the kernel")

        c.detach(sid)
        peer.app_receives(b"ping")
        step("detach: everything reaches the application again")
    print("live: ok", flush=True)


def tcp_accepted(c: Client) -> None:
    """A request sent to an attached TCP listener before accept() is answered
    by the kernel (inside accept(), which asks for the peer's address; the
    announcement after it is harmless), and the first receive finds
    nothing. The C SDK's live test accepts without the address, where the
    announcement is what answers."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        service = c.attach(listener)
        c.add_rule(service.service_id, Rule.on(b"GET /t\n", b"TCP!\n"))
        with socket.create_connection(listener.getsockname(), timeout=TIMEOUT) as client:
            client.sendall(b"GET /t\n")  # loopback: in before accept() returns
            conn, _ = listener.accept()
            with conn:
                accepted(conn)
                reply = client.recv(16)
                check(reply == b"TCP!\n", f"TCP reply {reply!r}, want b'TCP!\\n' from the kernel")
                conn.setblocking(False)
                try:
                    got = conn.recv(16)
                except BlockingIOError:
                    got = None
                check(got is None, f"the application received {got!r}, which the kernel answered")
        c.detach(service.service_id)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: live.py SOCKET")
    try:
        run(sys.argv[1])
    except (Failed, SantaError, OSError) as e:
        sys.exit(f"live: FAILED: {e}")


if __name__ == "__main__":
    main()
