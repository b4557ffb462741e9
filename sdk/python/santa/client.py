"""A blocking client for santad: one request, then its reply."""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar

from .errors import NO_INDEX, SantaError
from .messages import (
    LAST_PAGE,
    AbortReply,
    AbortRequest,
    AddRulesReply,
    AddRulesRequest,
    AttachRequest,
    BeginReply,
    BeginRequest,
    CommitReply,
    CommitRequest,
    DeleteRulesReply,
    DeleteRulesRequest,
    DetachReply,
    DetachRequest,
    ErrorReply,
    HelloReply,
    HelloRequest,
    ListRulesReply,
    ListRulesRequest,
    ListServicesReply,
    ListServicesRequest,
    ReplaceRulesReply,
    ReplaceRulesRequest,
    RuleCounters,
    RuleEntry,
    RuleStatsReply,
    RuleStatsRequest,
    Service,
    ServiceStatsReply,
    ServiceStatsRequest,
    StatusReply,
    StatusRequest,
)
from .protocol import HEADER_SIZE, MAX_MESSAGE, MIN_VERSION, VERSION, decode, encode
from .rules import RULE, Rule
from .wire import U32, Struct

DEFAULT_PATH = "/run/santa/santa.sock"
SOCKET_ENV = "SANTA_SOCKET"


def default_path() -> str:
    """The socket connect() uses without a path: $SANTA_SOCKET if set, else
    DEFAULT_PATH."""
    return os.environ.get(SOCKET_ENV) or DEFAULT_PATH

R = TypeVar("R")
T = TypeVar("T")


class _Paged(Protocol):
    @property
    def next(self) -> int: ...


P = TypeVar("P", bound=_Paged)


class Client:
    """One connection to santad. Not for concurrent use from several threads."""

    def __init__(self, sock: socket.socket, name: str = "santa-python") -> None:
        """Says HELLO on `sock`, a connected SOCK_SEQPACKET socket, which the
        client owns from now on."""
        self._sock = sock
        self._seq = 0
        # HELLO goes in version 1, which every santad reads; its reply, and
        # every message after it, in the version it agreed on.
        self.version = MIN_VERSION
        try:
            self.hello: HelloReply = self._call(HelloRequest(MIN_VERSION, VERSION, name), HelloReply)
            if not MIN_VERSION <= self.hello.version <= VERSION:
                raise SantaError(
                    errno.EPROTONOSUPPORT, NO_INDEX,
                    f"santad agreed on version {self.hello.version}; "
                    f"this SDK speaks {MIN_VERSION} to {VERSION}",
                )
            self.version = self.hello.version
        except BaseException:
            sock.close()
            raise

    @classmethod
    def connect(cls, path: str | None = None, name: str = "santa-python") -> Client:
        """Connects to santad at path (None: default_path()) and says HELLO."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.connect(path if path is not None else default_path())
        except BaseException:
            sock.close()
            raise
        return cls(sock, name)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Services.

    def attach(self, sock: socket.socket) -> Service:
        """Registers `sock`, a bound UDP socket; santad keeps no copy of it."""
        return self._call(AttachRequest(), Service, fds=[sock.fileno()])

    def detach(self, service_id: int) -> None:
        self._call(DetachRequest(service_id), DetachReply)

    def services(self) -> list[Service]:
        """The client's services (every one for an admin), in rising id
        order: every page, from a santad of protocol version 7. An older
        santad has no pages: its one reply is the list, and it refuses
        (EPROTONOSUPPORT) more services than one reply holds."""
        return list(self._pages(lambda _, start, m: ListServicesRequest(start, m),
                                ListServicesReply, 0, lambda p: p.services))

    def service_stats(self, service_id: int) -> ServiceStatsReply:
        return self._call(ServiceStatsRequest(service_id), ServiceStatsReply)

    def status(self) -> StatusReply:
        return self._call(StatusRequest(), StatusReply)

    # Rules. Each call is all or nothing: a batch too big for one message is
    # sent in pieces inside a transaction of its own.

    def add_rules(self, service_id: int, rules: Iterable[Rule]) -> list[int]:
        """Installs `rules`; returns their ids, in order."""
        return self._apply(_ADD, service_id, list(rules))

    def add_rule(self, service_id: int, rule: Rule) -> int:
        return self.add_rules(service_id, [rule])[0]

    def replace_rules(self, service_id: int, updates: Iterable[tuple[int, Rule]]) -> None:
        """Replaces each (rule_id, rule); a replaced rule keeps its id."""
        self._apply(_REPLACE, service_id, [RuleEntry(i, r) for i, r in updates])

    def delete_rules(self, service_id: int, rule_ids: Iterable[int]) -> None:
        self._apply(_DELETE, service_id, list(rule_ids))

    def transaction(self, service_id: int) -> Transaction:
        """Sends BEGIN. As a context manager it commits on normal exit and
        aborts on an exception. Added rules' ids are known when staged."""
        return Transaction(self, service_id)

    def rules(self, service_id: int) -> Iterator[RuleEntry]:
        """Every rule of the service, in rising id order, page by page."""
        return self._pages(ListRulesRequest, ListRulesReply, service_id, lambda p: p.rules)

    def rule_stats(self, service_id: int) -> Iterator[RuleCounters]:
        """The counters of every rule of the service, page by page."""
        return self._pages(RuleStatsRequest, RuleStatsReply, service_id, lambda p: p.counters)

    # Plumbing.

    def _call(self, body: object, reply_type: type[R], fds: Sequence[int] = ()) -> R:
        self._seq = (self._seq + 1) & 0xFFFFFFFF
        data = encode(self._seq, body, self.version)
        if fds:
            socket.send_fds(self._sock, [data], list(fds))
        else:
            self._sock.send(data)
        # One byte more than a message may hold, so that an oversized reply is
        # refused as such rather than silently cut to a valid-looking length.
        raw = self._sock.recv(MAX_MESSAGE + 1)
        if not raw:
            raise SantaError(errno.ECONNRESET, NO_INDEX, "santad closed the connection")
        header, reply = decode(raw)
        # Requests are never pipelined, so an ERROR answers this one even if
        # santad could not read its seq (a header it refused).
        if isinstance(reply, ErrorReply):
            raise SantaError(reply.code, reply.index, reply.message)
        if header.seq != self._seq:
            raise SantaError(
                errno.EPROTO, NO_INDEX, f"reply to seq {header.seq}; expected {self._seq}"
            )
        # Every reply is in the agreed version, HELLO's the first; a HELLO
        # agreeing on a version this SDK lacks is refused by the caller.
        agreed = reply.version if isinstance(reply, HelloReply) else self.version
        if header.version != agreed and MIN_VERSION <= agreed <= VERSION:
            raise SantaError(
                errno.EPROTO, NO_INDEX,
                f"{type(reply).__name__} in version {header.version}; the connection speaks {agreed}",
            )
        if not isinstance(reply, reply_type):
            raise SantaError(
                errno.EPROTO, NO_INDEX,
                f"{type(reply).__name__} in reply to {type(body).__name__}",
            )
        return reply

    def _apply(self, op: _Batch[T], service_id: int, items: list[T]) -> list[int]:
        chunks = _chunks(items, op.item_size)
        if len(chunks) <= 1:
            return self._send(op, service_id, 0, chunks)
        with self.transaction(service_id) as txn:
            ids = self._send(op, service_id, txn.txn, chunks)
        return ids

    def _send(self, op: _Batch[T], service_id: int, txn: int, chunks: list[list[T]]) -> list[int]:
        _refuse_guards([item for chunk in chunks for item in chunk])
        ids: list[int] = []
        start = 0
        for chunk in chunks:
            try:
                reply = self._call(op.request(service_id, txn, chunk), op.reply)
            except SantaError as e:
                # The daemon's index counts within the piece; the caller's
                # counts within the whole batch.
                if e.index == NO_INDEX:
                    raise
                raise SantaError(e.code, start + e.index, e.message) from None
            if isinstance(reply, AddRulesReply):
                ids += reply.rule_ids
            start += len(chunk)
        return ids

    def _pages(
        self,
        request: Callable[[int, int, int], object],
        reply_type: type[P],
        service_id: int,
        items: Callable[[P], list[T]],
    ) -> Iterator[T]:
        start = 0
        while True:
            page = self._call(request(service_id, start, 0), reply_type)
            yield from items(page)
            if page.next == LAST_PAGE:
                return
            if page.next <= start:
                # A daemon that does not move forward would loop us forever.
                raise SantaError(
                    errno.EPROTO, NO_INDEX, f"next page {page.next} after page {start}"
                )
            start = page.next


class Transaction:
    """An open transaction on one service; see Client.transaction."""

    def __init__(self, client: Client, service_id: int) -> None:
        self._client = client
        self.service_id = service_id
        self.txn = client._call(BeginRequest(service_id), BeginReply).txn
        # The ids of the rules added so far, in order: santad gives them
        # when it stages the rules and holds them until the transaction ends.
        self.rule_ids: list[int] = []
        self._open = True

    def add_rules(self, rules: Iterable[Rule]) -> list[int]:
        """Queues `rules`; returns the ids they will have once committed."""
        ids = self._queue(_ADD, list(rules))
        self.rule_ids += ids
        return ids

    def add_rule(self, rule: Rule) -> int:
        return self.add_rules([rule])[0]

    def replace_rules(self, updates: Iterable[tuple[int, Rule]]) -> None:
        self._queue(_REPLACE, [RuleEntry(i, r) for i, r in updates])

    def delete_rules(self, rule_ids: Iterable[int]) -> None:
        self._queue(_DELETE, list(rule_ids))

    def commit(self) -> int:
        """Applies everything at once; returns how many rules it added."""
        self._open = False
        return self._client._call(CommitRequest(self.txn), CommitReply).added

    def abort(self) -> None:
        self._open = False
        self._client._call(AbortRequest(self.txn), AbortReply)

    def __enter__(self) -> Transaction:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._open:
            return
        if exc is None:
            self.commit()
            return
        try:
            self.abort()
        except (SantaError, OSError):
            # The caller needs the exception that ended the block, not this
            # one; and santad drops the transaction with the connection anyway.
            pass

    def _queue(self, op: _Batch[T], items: list[T]) -> list[int]:
        return self._client._send(op, self.service_id, self.txn, _chunks(items, op.item_size))


@dataclass(frozen=True)
class _Batch(Generic[T]):
    """One of the batch requests: how to build it, its reply, its item size."""

    request: Callable[[int, int, list[T]], object]
    reply: type[Any]
    item_size: Callable[[T], int]


_ADD: _Batch[Rule] = _Batch(AddRulesRequest, AddRulesReply, RULE.size)
_REPLACE: _Batch[RuleEntry] = _Batch(ReplaceRulesRequest, ReplaceRulesReply, Struct(RuleEntry).size)
_DELETE: _Batch[int] = _Batch(DeleteRulesRequest, DeleteRulesReply, U32.size)

# What a batch request holds besides its items: header, service_id, txn, count.
_BATCH_ROOM = MAX_MESSAGE - HEADER_SIZE - 12


def _refuse_guards(items: Sequence[object]) -> None:
    """Refuses a batch with a guarded rule: the SDK reads guards in santad's
    listings but sends none (a memcached agent guards its own rules)."""
    for i, item in enumerate(items):
        rule = item.rule if isinstance(item, RuleEntry) else item
        if isinstance(rule, Rule) and rule.guard:
            raise SantaError(errno.EINVAL, i, f"rule {i} has a guard, as santad listed it: the SDK sends none")


def _chunks(items: list[T], item_size: Callable[[T], int]) -> list[list[T]]:
    """Cuts `items` into runs that each fit one message."""
    chunks: list[list[T]] = []
    start, used = 0, 0
    for i, item in enumerate(items):
        size = item_size(item)
        if size > _BATCH_ROOM:
            raise SantaError(
                errno.EMSGSIZE, i, f"an item of {size} bytes; a message holds {_BATCH_ROOM}"
            )
        if used + size > _BATCH_ROOM:
            chunks.append(items[start:i])
            start, used = i, 0
        used += size
    if start < len(items):
        chunks.append(items[start:])
    return chunks
