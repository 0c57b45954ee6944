"""The echo client: the same process for every server of the ``echo`` workload.

Usage: ``python -m benchmarks._echo_client HOST PORT CONNECTIONS SIZE MILLISECONDS``.

As in uvloop's echo benchmark, each of CONNECTIONS connections sends a
SIZE-byte message, waits for all of it to come back, and sends the next,
for MILLISECONDS of wall time. One thread drives every connection through
``selectors``, so the client costs the same whatever the server is, and the
server is measured, not the client. Prints one JSON line: the messages
echoed, the seconds measured, and the round-trip percentiles in
microseconds.
"""

from __future__ import annotations

import json
import selectors
import socket
import sys
import time

__all__ = ["main"]


def main(argv: list[str]) -> int:
    host, port, count, size, milliseconds = argv[0], *map(int, argv[1:5])
    message = b"x" * size
    selector = selectors.DefaultSelector()
    socks = []
    for _ in range(count):
        sock = socket.create_connection((host, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        socks.append(sock)
    received = dict.fromkeys(range(count), 0)
    sent_at = dict.fromkeys(range(count), 0.0)
    rtts: list[float] = []
    for index, sock in enumerate(socks):
        selector.register(sock, selectors.EVENT_READ, index)
    start = time.perf_counter()
    end = start + milliseconds / 1000
    for index, sock in enumerate(socks):
        sent_at[index] = time.perf_counter()
        sock.sendall(message)
    now = start
    while now < end:
        for key, _ in selector.select(end - now):
            index = key.data
            sock = socks[index]
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            if not data:
                raise SystemExit("the server closed a connection")
            received[index] += len(data)
            if received[index] >= size:
                received[index] -= size
                stamp = time.perf_counter()
                rtts.append(stamp - sent_at[index])
                sent_at[index] = stamp
                sock.sendall(message)
        now = time.perf_counter()
    seconds = time.perf_counter() - start
    for sock in socks:
        sock.close()
    rtts.sort()

    def percentile(fraction: float) -> float:
        return rtts[min(len(rtts) - 1, int(fraction * len(rtts)))] * 1e6 if rtts else 0.0

    print(
        json.dumps(
            {
                "messages": len(rtts),
                "seconds": seconds,
                "p50_rtt_us": percentile(0.50),
                "p99_rtt_us": percentile(0.99),
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
