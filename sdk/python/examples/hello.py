#!/usr/bin/env python3
"""The paper's Listing 1 in Python.

A UDP server whose socket installs one rule: a request starting with "Hello"
is answered "COMSYS" by the kernel, without waking this program. Every other
request reaches it and is answered "APP:" + request. On SIGINT or SIGTERM,
or after --seconds, it prints `STATS kernel=<rule hits> app=<answered>`.
"""

from __future__ import annotations

import argparse
import math
import signal
import socket
import sys
import time
from pathlib import Path
from types import FrameType

try:
    import santa
except ImportError:
    # Run from the source tree: the package sits next to examples/.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import santa


def parse_address(text: str) -> tuple[socket.AddressFamily, tuple[str, int]]:
    """"HOST:PORT" or "[V6HOST]:PORT"."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return family, (host, int(port))


def main() -> None:
    parser = argparse.ArgumentParser(description="Listing 1: santad answers Hello, we the rest.")
    parser.add_argument("address", nargs="?", default="127.0.0.1:7777")
    parser.add_argument("--seconds", type=float, help="stop after this long")
    parser.add_argument("--socket", default=santa.default_path(), help="santad's socket (default: $SANTA_SOCKET, else /run/santa/santa.sock)")
    args = parser.parse_args()

    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    deadline = time.monotonic() + args.seconds if args.seconds else math.inf

    family, address = parse_address(args.address)
    with socket.socket(family, socket.SOCK_DGRAM) as udp, \
            santa.Client.connect(args.socket, name="hello.py") as client:
        udp.bind(address)
        service = client.attach(udp)
        rule_id = client.add_rule(service.service_id, santa.Rule.on(b"Hello", reply=b"COMSYS"))
        host, port = udp.getsockname()[:2]
        print(f"ready on {host}:{port}, service {service.service_id}, rule {rule_id}",
              file=sys.stderr, flush=True)

        answered = 0
        udp.settimeout(0.2)  # wake up now and then to notice a signal or the deadline
        while not stopping and time.monotonic() < deadline:
            try:
                request, peer = udp.recvfrom(65535)
            except TimeoutError:
                continue
            udp.sendto(b"APP:" + request, peer)
            answered += 1

        hits = sum(c.hits for c in client.rule_stats(service.service_id) if c.rule_id == rule_id)
        client.detach(service.service_id)
    print(f"STATS kernel={hits} app={answered}", flush=True)


if __name__ == "__main__":
    try:
        main()
    except (OSError, santa.SantaError) as e:  # no daemon, no permission, a refusal
        sys.exit(f"hello.py: {e}")
