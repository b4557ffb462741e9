"""A small santad in a thread, enough to exercise the client end to end.

It speaks the real codec over real SOCK_SEQPACKET sockets, keeps rules in a
dict, and refuses what the tests need refused. It enforces no limits but
one: an empty pattern is EINVAL, with the rule's index in the batch.
"""

from __future__ import annotations

import errno
import itertools
import socket
import struct
import threading
from typing import Any

from santa import LAST_PAGE, Rule, RuleCounters, RuleEntry, Service, decode, encode
from santa.errors import NO_INDEX
from santa.messages import (
    AbortReply, AbortRequest, AddRulesReply, AddRulesRequest, AttachRequest,
    BeginReply, BeginRequest, CommitReply, CommitRequest, DeleteRulesReply,
    DeleteRulesRequest, DetachReply, DetachRequest, ErrorReply, HelloReply,
    HelloRequest, ListRulesReply, ListRulesRequest, ListServicesReply,
    ListServicesRequest, ReplaceRulesReply, ReplaceRulesRequest, RuleStatsReply,
    RuleStatsRequest, ServiceStatsReply, ServiceStatsRequest, StatusReply,
    StatusRequest,
)
from santa.protocol import MAX_MESSAGE, VERSION

SO_COOKIE = 57
PAGE = 2  # rules per LIST_RULES / RULE_STATS page, services per LIST_SERVICES', so paging is exercised


def cookie(sock: socket.socket) -> int:
    value: int = struct.unpack("<Q", sock.getsockopt(socket.SOL_SOCKET, SO_COOKIE, 8))[0]
    return value


class Refused(Exception):
    """A request the fake answers with ERROR."""

    def __init__(self, code: int, message: str, index: int = NO_INDEX) -> None:
        super().__init__(message)
        self.reply = ErrorReply(code, index, message)


class FakeSanta:
    def __init__(self, version: int = VERSION, hits: int = 0) -> None:
        self.version = version  # the newest it speaks; HELLO agrees on at most it
        # The most services one LIST_SERVICES reply holds before version 7,
        # which pages them by PAGE; more are refused (EPROTONOSUPPORT), as santad does.
        self.services_fit = 1000
        self._body_version = 1  # of the request being answered
        self.hits = hits  # what RULE_STATS reports for every rule
        self.requests: list[Any] = []  # every request body, in arrival order
        self.cookies: list[int] = []  # SO_COOKIE of every attached fd
        self.services: dict[int, Service] = {}
        self.rules: dict[int, dict[int, Rule]] = {}
        self.txns: dict[int, tuple[int, list[Any]]] = {}
        self._ids = itertools.count(1)
        self._threads: list[threading.Thread] = []
        self._failures: list[BaseException] = []
        self._listeners: list[socket.socket] = []

    # Serving.

    def serve(self, conn: socket.socket) -> None:
        """Answers `conn` in a thread until the client hangs up."""
        self._start(self._serve, conn)

    def listen(self, path: str) -> None:
        """Accepts connections at `path` until stop()."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(path)
        listener.listen()
        self._listeners.append(listener)
        self._start(self._accept, listener)

    def stop(self) -> None:
        """Stops listening, waits until the clients have hung up, and
        re-raises what broke a serving thread."""
        for listener in self._listeners:
            # shutdown, not just close: only it wakes a blocked accept().
            listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for t in self._threads:
            t.join(10)
        if self._failures:
            raise self._failures[0]

    def _start(self, target: Any, sock: socket.socket) -> None:
        t = threading.Thread(target=target, args=(sock,), daemon=True)
        self._threads.append(t)
        t.start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # stop() shut the listener down
                return
            self.serve(conn)

    def _serve(self, conn: socket.socket) -> None:
        try:
            self._answer(conn)
        except BaseException as e:
            self._failures.append(e)

    def _answer(self, conn: socket.socket) -> None:
        client = ""  # HELLO's name: the manager of the services it attaches
        with conn:
            while True:
                data, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE + 1, 4)
                if not data:
                    return
                header, body = decode(data)
                self.requests.append(body)
                self._body_version = header.version
                if isinstance(body, HelloRequest):
                    client = body.client
                try:
                    reply = self.handle(body, fds, client)
                except Refused as e:
                    reply = e.reply
                # In the request's version, but HELLO's reply: in the agreed one.
                version = reply.version if isinstance(reply, HelloReply) else header.version
                conn.send(encode(header.seq, reply, version))

    # Requests.

    def handle(self, body: Any, fds: list[int], client: str) -> Any:
        match body:
            case HelloRequest(min_version=lo, max_version=hi):
                agreed = min(hi, self.version)
                if agreed < max(lo, 1):
                    raise Refused(errno.EPROTONOSUPPORT, f"this fake speaks versions 1 to {self.version}")
                return HelloReply(agreed, 1000, 1000, 1, 0, 0, 0, "fake santad")
            case AttachRequest():
                return self._attach(fds, client)
            case DetachRequest(service_id=sid):
                self._service(sid)
                del self.services[sid], self.rules[sid]
                return DetachReply()
            case AddRulesRequest() | ReplaceRulesRequest() | DeleteRulesRequest():
                return self._batch(body)
            case BeginRequest(service_id=sid):
                self._service(sid)
                txn = next(self._ids)
                self.txns[txn] = (sid, [])
                return BeginReply(txn)
            case CommitRequest(txn=txn):
                sid, held = self._txn(txn)
                del self.txns[txn]
                for request, ids in held:
                    self._apply(sid, request, ids)
                return CommitReply(sum(len(ids) for _, ids in held))
            case AbortRequest(txn=txn):
                self._txn(txn)
                del self.txns[txn]
                return AbortReply()
            case ListServicesRequest(start=start, max=most):
                ids = sorted(i for i in self.services if i >= start)
                if self._body_version < 7:  # no pages: the whole list
                    if len(ids) > self.services_fit:
                        raise Refused(errno.EPROTONOSUPPORT, f"{len(ids)} services take more than one reply")
                    return ListServicesReply([self.services[i] for i in ids])
                n = min(PAGE, most or PAGE)
                page = [self.services[i] for i in ids[:n]]
                return ListServicesReply(page, ids[n] if len(ids) > n else LAST_PAGE)
            case ListRulesRequest(service_id=sid, start=start):
                page, next_start = self._page(sid, start)
                entries = [RuleEntry(i, self.rules[sid][i]) for i in page]
                return ListRulesReply(next_start, entries)
            case RuleStatsRequest(service_id=sid, start=start):
                page, next_start = self._page(sid, start)
                counters = [RuleCounters(i, self.hits, 6 * self.hits) for i in page]
                return RuleStatsReply(next_start, counters)
            case ServiceStatsRequest(service_id=sid):
                rules = self._service(sid)
                return ServiceStatsReply(0, 0, 0, 0, len(rules), 0)
            case StatusRequest():
                installed = sum(map(len, self.rules.values()))
                return StatusReply("fake santad", installed, 1 << 20, len(self.services), [])
        raise AssertionError(f"fake santad got {body!r}")

    def _attach(self, fds: list[int], client: str) -> Service:
        if len(fds) != 1:
            for fd in fds:
                socket.close(fd)
            raise Refused(errno.EBADF, f"{len(fds)} fds; ATTACH takes one")
        # Like santad: read what it needs from the fd, then close its copy.
        with socket.socket(fileno=fds[0]) as sock:
            c = cookie(sock)
            host, port = sock.getsockname()[:2]
        self.cookies.append(c)
        sid = next(self._ids)
        addr = socket.inet_aton(host) + bytes(12)
        self.services[sid] = Service(sid, 17, 4, port, addr, c, 0, 1000, 0, client)
        self.rules[sid] = {}
        return self.services[sid]

    def _batch(self, body: Any) -> Any:
        self._service(body.service_id)
        for i, rule in enumerate(getattr(body, "rules", [])):
            if not rule.pattern:
                raise Refused(errno.EINVAL, "condition pattern is 0 bytes", i)
        # Like santad: added rules get their ids now, in a transaction too.
        ids = [next(self._ids) for _ in getattr(body, "rules", [])]
        if body.txn:
            self._txn(body.txn)[1].append((body, ids))
        else:
            self._apply(body.service_id, body, ids)
        return _reply_to(body, ids)

    def _apply(self, sid: int, body: Any, ids: list[int]) -> None:
        rules = self.rules[sid]
        if isinstance(body, AddRulesRequest):
            rules.update(zip(ids, body.rules))
            return
        if isinstance(body, ReplaceRulesRequest):
            rules.update((u.rule_id, u.rule) for u in body.updates)
        else:
            for i in body.rule_ids:
                rules.pop(i, None)

    def _page(self, sid: int, start: int) -> tuple[list[int], int]:
        ids = sorted(i for i in self._service(sid) if i >= start)
        return ids[:PAGE], (ids[PAGE] if len(ids) > PAGE else 0xFFFFFFFF)

    def _service(self, sid: int) -> dict[int, Rule]:
        if sid not in self.services:
            raise Refused(errno.ENOENT, f"no service {sid}")
        return self.rules[sid]

    def _txn(self, txn: int) -> tuple[int, list[Any]]:
        if txn not in self.txns:
            raise Refused(errno.ENOENT, f"no transaction {txn}")
        return self.txns[txn]


def _reply_to(body: Any, ids: list[int]) -> Any:
    if isinstance(body, AddRulesRequest):
        return AddRulesReply(ids)
    return ReplaceRulesReply() if isinstance(body, ReplaceRulesRequest) else DeleteRulesReply()
