"""Name resolution off the workers: ``getaddrinfo``.

The C resolver blocks, for as long as the network takes, and cannot be
interrupted. Three choices follow from that:

- **A thread per lookup**, from the runtime's blocking-call pool, so that a
  slow DNS server never holds a worker. The thread is *abandoned* on cancel
  (``spawn_blocking(abandon=True)``): the task leaves at once, and the late
  answer is dropped. Waiting for the resolver would make every timeout
  around a connect as long as the resolver's own (often 5 s or more).
- **A bound on the threads**: at most ``MAX_RESOLVER_THREADS`` lookups run
  at once, process-wide; later ones queue (FIFO) for a slot. Abandoned
  lookups keep their slot until their thread returns, so a burst of
  cancelled lookups against a dead DNS server cannot pile up threads
  without limit. A lookup cancelled while it still queues never starts.
- **No thread when none is needed**: a numeric address (``"127.0.0.1"``,
  ``"::1"``) or ``None`` is resolved in place with ``AI_NUMERICHOST``, which
  never touches the network.

Either way the call is a cancellation point on entry, like every awaitable.

**Ports are checked here**, for every caller (TCP, UDP, the servers): the C
resolver takes a port past 65535 modulo 65536 (70000 becomes 4464) without
a word, so ``check_port`` refuses one before anything is resolved, opened
or sent.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from .. import Semaphore, spawn_blocking
from ._stream_api import PASS

__all__ = ["MAX_RESOLVER_THREADS", "check_port", "getaddrinfo"]

MAX_RESOLVER_THREADS = 20
_slots = Semaphore(MAX_RESOLVER_THREADS)

# (family, type, proto, canonname, sockaddr)
AddrInfo = tuple[Any, ...]


def check_port(port: object, what: str, arg: str = "port") -> int:
    """Refuse a port that is not an int in 0..65535, naming ``what`` took it as ``arg``."""
    if isinstance(port, bool) or not isinstance(port, int):
        raise TypeError(
            f"{what} needs an int port as '{arg}', got {type(port).__name__}; pass e.g. 8080"
        )
    if not 0 <= port <= 65535:
        raise ValueError(f"{what} got {arg} {port}, outside 0..65535; pass a port in that range")
    return port


def _check_service(port: object) -> None:
    """Refuse a port ``getaddrinfo`` cannot take, or a number out of range."""
    if port is None:
        return
    if isinstance(port, str | bytes):
        text = port.decode("ascii", "replace") if isinstance(port, bytes) else port
        if text.isascii() and text.isdigit():  # a number, not a service name such as "https"
            check_port(int(text), "getaddrinfo()")
        return
    if isinstance(port, bool) or not isinstance(port, int):
        raise TypeError(
            f"getaddrinfo() needs an int port, a service name or None, got {type_name(port)}; "
            "pass e.g. 443 or 'https'"
        )
    check_port(port, "getaddrinfo()")


def _numeric(
    host: Any, port: Any, family: int, type: int, proto: int, flags: int
) -> list[AddrInfo] | None:
    """Resolve without the network, or None if the host is a name."""
    try:
        return list(
            socket.getaddrinfo(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)
        )
    except socket.gaierror:
        return None


async def getaddrinfo(
    host: str | bytes | None,
    port: str | bytes | int | None,
    family: int = 0,
    type: int = 0,
    proto: int = 0,
    flags: int = 0,
) -> list[AddrInfo]:
    """Resolve ``host`` and ``port``, like ``socket.getaddrinfo``, without blocking a worker.

    A name is resolved in a resolver thread (at most ``MAX_RESOLVER_THREADS``
    at once in the process; more lookups wait their turn); a numeric
    address or ``None`` is resolved in place.

    A cancellation point: a cancel wakes the task at once, and an answer
    that comes later is dropped.

    Returns:
        A list of ``(family, type, proto, canonname, sockaddr)``.

    Raises:
        socket.gaierror: the name does not resolve.
        TypeError: an argument has the wrong type.
        ValueError: ``port`` is a number outside 0..65535.
        Cancelled: the task was cancelled.
    """
    for label, value in (("family", family), ("type", type), ("proto", proto), ("flags", flags)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(
                f"getaddrinfo({label}=...) needs an int, got {type_name(value)}; "
                "pass a socket module constant such as socket.AF_INET"
            )
    if host is not None and not isinstance(host, str | bytes):
        raise TypeError(
            f"getaddrinfo() needs a str, bytes or None host, got {type_name(host)}; "
            "pass a name or an address such as '127.0.0.1'"
        )
    _check_service(port)
    await PASS
    infos = _numeric(host, port, family, type, proto, flags)
    if infos is not None:
        return infos
    await _slots.acquire_async()
    # Whoever takes the claim first owns the slot's release: the thread
    # when it starts the lookup, or the task when it is cancelled before
    # the thread started (the thread then does nothing).
    claim = threading.Lock()

    def lookup() -> list[AddrInfo] | None:
        if not claim.acquire(False):
            return None
        try:
            return list(socket.getaddrinfo(host, port, family, type, proto, flags))
        finally:
            _slots.release()

    try:
        result = await spawn_blocking(lookup, abandon=True)
    except BaseException:
        if claim.acquire(False):
            _slots.release()
        raise
    # None only when this task took the claim first, which it does only
    # on the way out with an error.
    assert result is not None
    return result


def type_name(value: object) -> str:
    return type(value).__name__
