"""examples/graceful_server.py in a subprocess: SIGTERM stops it gracefully, a second signal now."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .._output import Output

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
]

ROOT = Path(__file__).resolve().parents[2]


class Server:
    """The example running in a subprocess, and what it printed."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "examples" / "graceful_server.py"), *args],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out = Output(self.proc)
        try:
            match = re.search(r"listening on 127\.0\.0\.1:(\d+)", self.read_until("listening on"))
            assert match is not None, self.out.stdout
        except BaseException:
            # A start that failed or was too slow leaves no server behind.
            self.proc.kill()
            self.out.finish()
            raise
        self.port = int(match[1])

    def read_until(self, text: str, timeout: float = 10) -> str:
        """Wait for a line of stdout holding ``text``; returns the lines up to it."""
        return self.out.read_until(text, timeout)

    def request(self, seconds: float) -> socket.socket:
        """Send ``work SECONDS`` on a new connection, once the server holds it."""
        client = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        client.sendall(b"work %g\n" % seconds)
        time.sleep(0.2)  # the handler reads the request and starts working
        return client

    def finish(self) -> tuple[int, str, str]:
        return self.out.finish()


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server("--grace", "3")
    try:
        yield running
    finally:
        if running.proc.poll() is None:
            running.proc.kill()
            running.out.finish()


def refused_soon(port: int, within: float = 5.0) -> bool:
    """Whether connecting to ``port`` is refused within ``within`` seconds.

    The server closes its listener a moment after it prints that it stops:
    a connection that lands in the listener's queue meanwhile is dropped
    with it, unserved.
    """
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        except ConnectionRefusedError:
            return True
        except OSError:
            pass  # reset: it was queued as the listener closed
        time.sleep(0.05)
    return False


def reply(client: socket.socket) -> bytes:
    with client:
        return b"".join(iter(lambda: client.recv(100), b""))


def test_sigterm_refuses_new_connections_and_lets_requests_in_flight_finish(
    server: Server,
) -> None:
    client = server.request(1.0)
    server.proc.send_signal(signal.SIGTERM)
    server.read_until("SIGTERM: stopping; requests in flight have 3 s")
    assert refused_soon(server.port)
    assert reply(client) == b"done\n"
    status, output, errors = server.finish()
    assert status == 0, errors
    assert "stopped: 1 finished, 0 cancelled" in output
    assert "Traceback" not in errors


def test_requests_still_running_when_the_grace_runs_out_are_cancelled(server: Server) -> None:
    client = server.request(60)
    server.proc.send_signal(signal.SIGTERM)
    asked = time.monotonic()
    server.read_until("SIGTERM: stopping")
    assert reply(client) == b""  # hung up when the grace ran out
    assert 2.5 < time.monotonic() - asked < 10
    status, output, errors = server.finish()
    assert status == 0, errors
    assert "stopped: 0 finished, 1 cancelled" in output


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_second_signal_stops_at_once(server: Server, second: signal.Signals) -> None:
    client = server.request(60)
    server.proc.send_signal(signal.SIGTERM)
    server.read_until("SIGTERM: stopping")
    server.proc.send_signal(second)
    stopped = time.monotonic()
    server.read_until(f"{second.name}: stopping now")
    assert reply(client) == b""
    status, output, errors = server.finish()
    assert time.monotonic() - stopped < 2.5  # well before the 3 s grace
    assert status == 0, errors
    assert "stopped: 0 finished, 1 cancelled" in output


def test_ctrl_c_alone_stops_at_once(server: Server) -> None:
    client = server.request(60)
    server.proc.send_signal(signal.SIGINT)
    server.read_until("SIGINT: stopping now")
    assert reply(client) == b""
    status, output, errors = server.finish()
    assert status == 0, errors
    assert "stopped: 0 finished, 1 cancelled" in output
