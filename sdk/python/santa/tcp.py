"""TCP connections of an attached listening socket."""

from __future__ import annotations

import socket

SOL = 0x53414E54
"""The level of Santa's socket option ("SANT"), for callers without the SDK."""

SO_ACCEPTED = 1
"""The option `accepted` sets."""


def accepted(conn: socket.socket) -> None:
    """Announces `conn`, just accepted from an attached TCP listener, before
    the first receive on it: requests that arrived before accept() can then
    be answered by the kernel, where otherwise the first receive takes them
    and the connection stays the application's (docs/tcp.md). Python's
    `accept()` asks for the peer's address, which does the same already:
    this is for sockets accepted without it (`accept(fd, NULL, NULL)` in C)
    and handed over. Needs no client: the kernel handles it. Does nothing on a connection that is not
    Santa's; raises OSError (ENOPROTOOPT) when Santa's data plane is not
    loaded."""
    conn.setsockopt(SOL, SO_ACCEPTED, 1)
