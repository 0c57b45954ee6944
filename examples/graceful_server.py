"""A TCP server that stops gracefully on SIGTERM, and at once on a second signal.

    python examples/graceful_server.py [--port 0] [--grace 10]

Each connection sends one line, ``work SECONDS``; the handler works that
long (a sleep stands for the real work), answers ``done``, and hangs up.
The signals follow the usual server convention (gunicorn's, say):

- SIGTERM asks the server to stop: ``service.cancel("SIGTERM", grace=GRACE)``.
  The listener closes at once, so new connections are refused, and the
  requests in flight have GRACE seconds to finish; they see
  ``asyncop.stop_requested()``. Whatever still runs then is cancelled.
- A second SIGTERM, or SIGINT (Ctrl-C) at any time, stops at once:
  ``service.cancel(...)`` without a grace.

The program prints one line per event and, at the end, how many requests
finished and how many were cancelled; it exits 0 either way.
"""

from __future__ import annotations

import argparse
import functools
import signal
from dataclasses import dataclass
from typing import Any

import asyncop
from asyncop.net import IncompleteRead, serve_tcp
from asyncop.signals import SignalReceiver, open_signal_receiver

HOST = "127.0.0.1"


@dataclass
class Tally:
    """How the requests ended."""

    finished: int = 0
    cancelled: int = 0


async def handle(tally: Tally, stream: Any) -> None:
    """Serve one request: ``work SECONDS`` -> ``done`` after that long."""
    try:
        line = await stream.receive_until(b"\n", 100)
    except IncompleteRead:
        return  # the client hung up without asking anything
    seconds = float(line.split()[1])
    try:
        await asyncop.sleep(seconds)  # the real work would go here
    except asyncop.Cancelled:
        tally.cancelled += 1
        raise
    tally.finished += 1
    await stream.send_all(b"done\n")


async def serve(port: int, tally: Tally) -> None:
    """The service: a TCP server; prints its address once it accepts."""
    async with asyncop.scope() as s:
        listeners = await s.start(
            functools.partial(serve_tcp, functools.partial(handle, tally), port, host=HOST)
        )
        print(f"listening on {HOST}:{listeners[0].socket.getsockname()[1]}", flush=True)


async def stop_on_signals(
    received: SignalReceiver, service: asyncop.AsyncOperation[Any], grace: float
) -> None:
    """SIGTERM: stop with a grace; a second SIGTERM, or SIGINT: stop now."""
    asked = False
    async for signum in received:
        if signum == signal.SIGTERM and not asked:
            asked = True
            print(
                f"SIGTERM: stopping; requests in flight have {grace:g} s "
                "(SIGTERM again or Ctrl-C stops now)",
                flush=True,
            )
            service.cancel("SIGTERM", grace=grace)
        else:
            print(f"{signum.name}: stopping now", flush=True)
            service.cancel(signum.name)


async def main(received: SignalReceiver, port: int, grace: float) -> Tally:
    tally = Tally()
    async with asyncop.scope() as program:
        service = program.spawn(serve, port, tally, name="service")
        program.spawn(stop_on_signals, received, service, grace, name="signals")
        await asyncop.race(service)  # the service has ended: by itself, or stopped
        program.cancel()  # the signal watcher has nothing left to stop
    return tally


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="the port (default: any free one)")
    parser.add_argument("--grace", type=float, default=10.0, help="seconds requests get to finish")
    args = parser.parse_args(argv)
    with (
        asyncop.Runtime(2, name="graceful-server") as runtime,
        open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received,
    ):
        tally = runtime.run(main, received, args.port, args.grace)
    print(f"stopped: {tally.finished} finished, {tally.cancelled} cancelled", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(run())
