"""The client side of the live console: ``python -m asyncop ps|tree|top|dump PATH``.

It connects to the Unix socket a program made with ``Runtime(console=PATH)``
(or ``ASYNCOP_CONSOLE=PATH``), asks for snapshots with the console's line
protocol (see ``asyncop.runtime._console``) and draws them with ``rich``
(the ``asyncop[console]`` extra, in ``_console_draw``): ``ps`` a table,
``tree`` the tree, and ``top`` a live table redrawn every second until
``q`` or Ctrl-C. ``dump`` prints the text of ``Runtime.dump()`` and needs
no ``rich``; this module needs nothing beyond the standard library.

Nothing here changes the program it looks at: the protocol has no such
request.
"""

from __future__ import annotations

import errno
import importlib
import importlib.util
import json
import os
import socket
import stat
import sys
from typing import Any

__all__ = ["ConsoleClient", "ConsoleError", "run_command"]

# How long the client waits for the console's answer.
TIMEOUT = 10.0

Snapshot = dict[str, Any]
Row = dict[str, Any]


class ConsoleError(Exception):
    """The console cannot be reached, or answered with an error; the message says why."""


class ConsoleClient:
    """One connection to a console socket, for any number of requests."""

    def __init__(self, path: str) -> None:
        self.path = path
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(TIMEOUT)
        try:
            sock.connect(path)
        except OSError as exc:
            sock.close()
            raise ConsoleError(_why_not(path, exc)) from None
        self._sock = sock
        self._reader = sock.makefile("rb")

    def request(self, what: str) -> dict[str, Any]:
        """Send one request line and return the console's answer.

        Raises:
            ConsoleError: the console closed the connection, did not answer
                within ``TIMEOUT``, or answered with an error.
        """
        why = ""
        try:
            self._sock.sendall(what.encode() + b"\n")
            line = self._reader.readline()
        except OSError as exc:  # a reset, or no answer within TIMEOUT
            line, why = b"", f" ({exc})"
        if not line:
            raise ConsoleError(
                f"the console at {self.path} closed the connection{why}: the program has "
                "ended or shut its runtimes down"
            )
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise ConsoleError(f"the console at {self.path} answered: {answer['error']}")
        return answer

    def close(self) -> None:
        """Close the connection."""
        self._reader.close()
        self._sock.close()

    def __enter__(self) -> ConsoleClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _why_not(path: str, exc: OSError) -> str:
    """Why connecting to ``path`` failed, in one sentence that says what to do."""
    if exc.errno == errno.ENOENT:
        return (
            f"no console at {path}: nothing is there; start the program with "
            f"Runtime(console={path!r}) or ASYNCOP_CONSOLE={path}"
        )
    if exc.errno == errno.ENOTSOCK or (exc.errno == errno.ECONNREFUSED and not _is_socket(path)):
        # Linux refuses a connection to a regular file or a directory with
        # ECONNREFUSED, as it does a stale socket: tell the two apart.
        return f"{path} is not a console socket; pass the path given to Runtime(console=...)"
    if exc.errno == errno.ECONNREFUSED:
        return (
            f"the console at {path} refused the connection: the program that made it has "
            "ended (the socket is stale) or is not serving it any more"
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return (
            f"not allowed to connect to the console at {path}: it serves only the user "
            "running the program; run this as that user"
        )
    return f"cannot connect to the console at {path}: {exc.strerror or exc}"


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return True  # gone meanwhile: keep the answer the connection gave


# -- formatting -----------------------------------------------------------------------


def seconds(value: float | None) -> str:
    """A duration for a column, short: ``-`` when unknown."""
    if value is None:
        return "-"
    if value == 0:
        return "0s"
    if value < 0.001:
        return f"{value * 1e6:.0f}µs"
    if value < 1:
        return f"{value * 1e3:.1f}ms"
    if value < 10:
        return f"{value:.2f}s"
    if value < 600:
        return f"{value:.1f}s"
    return f"{value / 60:.0f}m"


def deadline(row: Row) -> str:
    """When the operation's deadline comes, from the snapshot's instant."""
    left = row.get("deadline_in_s")
    if left is None:
        return "-"
    return f"in {seconds(left)}" if left >= 0 else f"{seconds(-left)} ago"


def waits_on(row: Row) -> str:
    """What the operation waits on, or the thread running it now."""
    if row.get("on_thread"):
        return f"running on {row['on_thread']}"
    what = row.get("waiting_on")
    if what is None:
        return ""
    where = row.get("waiting_at")
    return what if where is None else f"{what} at {short(where)}"


def cancel(row: Row) -> str:
    """The cancel column: the reason, or ``cancelling`` without one.

    An operation asked to stop with a grace, and not cancelled yet, shows
    the request as ``dump()`` does: its reason, and when the grace ends.
    """
    if not row.get("cancelling"):
        return stop(row)
    reason = row.get("cancel_reason")
    return "cancelling" if reason is None else str(reason)


def stop(row: Row) -> str:
    """``asked to stop (reason), cancelled at T`` for an operation asked to stop, else ``""``."""
    return str(row.get("stop") or "")


def short(where: str) -> str:
    """``file:line`` with the file's directory left out."""
    return os.path.basename(where)


def count(value: object) -> str:
    return "-" if value is None else str(value)


def header(snap: Snapshot) -> str:
    """One line about a runtime: name, process, state, clock and size."""
    calls = sum(1 for row in snap["operations"] if row["kind"] == "blocking call")
    count = len(snap["operations"]) - calls
    ops = f"{count} operation" + ("" if count == 1 else "s")
    if calls:  # (a blocking call has a row but is no operation: say what the rows are)
        ops += f", {calls} blocking call" + ("" if calls == 1 else "s")
    return (
        f"runtime {snap['name']} (pid {snap['pid']}, {snap['state']}, {snap['clock']} clock "
        f"at {snap['now']:.3f}): {ops}"
    )


# -- ps, tree, top ---------------------------------------------------------------------


def run_command(command: str, path: str) -> int:
    """Run ``ps``, ``tree``, ``top`` or ``dump`` on the console at ``path``; returns the status."""
    if command != "dump" and importlib.util.find_spec("rich") is None:
        print(
            f"python -m asyncop {command} draws with the rich package, which is not "
            "installed; install it with: pip install 'asyncop[console]'",
            file=sys.stderr,
        )
        return 1
    try:
        with ConsoleClient(path) as client:
            if command == "dump":
                print(client.request("dump")["text"])
                return 0
            # Loaded only now: it needs rich, which the dump does not.
            draw = importlib.import_module("asyncop._console_draw")
            draw.draw(command, client)
            return 0
    except ConsoleError as exc:
        print(f"python -m asyncop {command}: {exc}", file=sys.stderr)
        return 1
