"""The live console: read-only snapshots of runtimes on a Unix socket.

``Runtime(console=PATH)`` (or ``ASYNCOP_CONSOLE=PATH`` in the environment)
serves the runtime's ``snapshot()`` on a Unix socket at ``PATH``, which
``python -m asyncop ps|tree|top PATH`` reads. Every runtime of the process
given the same path is served on one socket: the first makes it, the last
to shut down removes it. So ``ASYNCOP_CONSOLE`` set for a program that
makes several runtimes shows all of them, instead of failing on the second.

Protocol
--------
The client sends one request per line (UTF-8, ``\\n``-terminated, at most
``MAX_REQUEST`` bytes); the console answers each with one JSON object on
one line, in order, and keeps the connection open until the client closes
it::

    hello      -> {"protocol": 1, "pid": 4242, "path": ..., "runtimes": [names],
                   "requests": ["hello", "snapshot", "dump"]}
    snapshot   -> {"protocol": 1, "pid": 4242, "runtimes": [<snapshot()>, ...]}
    dump       -> {"protocol": 1, "pid": 4242, "text": "<dump() of each runtime>"}
    (other)    -> {"protocol": 1, "error": "unknown request ..."}

No request changes anything: the console only reads.

Cost and threads
----------------
One thread per socket, which sleeps in ``select`` on the listening socket
and a wake-up channel, with no timeout: while no client is connected it
costs nothing, no tick and no polling. It is not served by the runtime's
workers (a listener task parked in the reactor), because a console is
wanted most when those are stuck: a step that never awaits holds the lane
every task needs, and a deadlocked tree must not also be a deaf one. The
snapshot it takes holds the runtime's lock for one walk of the tree, as
``dump()`` does. The thread is a daemon, as every thread of the runtime:
interpreter exit never waits for it, and ``Runtime.shutdown()`` joins it.
The thread serves its clients one request at a time, at most
``MAX_CLIENTS`` connected at once; a client that does not read its answer
within ``CLIENT_TIMEOUT`` seconds is dropped.

Safety
------
The socket is made with mode 0600 with no instant at which it is wider:
it is bound inside a fresh directory of mode 0700 beside ``PATH`` (no one
else can reach it there, whatever the umask), set to 0600, then linked to
``PATH``, which fails instead of replacing anything that appeared there
meanwhile. A ``PATH`` that exists is refused unless it is a stale socket
(one nobody answers on, left by a process that was killed), which is
removed. Where the OS tells the peer's user (Linux's ``SO_PEERCRED``), a
client of another user than the process's (root aside) is refused as well.
At shutdown the socket is removed, if it is still the one made here.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import selectors
import socket
import stat
import struct
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any

from ..platform import ThreadHandle, WakeupChannel, join_by, start_thread
from ._core._items import _log_exception
from ._snapshot import render_dump, take_snapshot

if TYPE_CHECKING:
    from ._core._kernel import Kernel

__all__ = ["ENV_VAR", "PROTOCOL", "Console", "attach", "console_path"]

logger = logging.getLogger("asyncop")

ENV_VAR = "ASYNCOP_CONSOLE"
PROTOCOL = 1
# The longest request line a client may send.
MAX_REQUEST = 1024
# Clients served at once; one more is told so and closed.
MAX_CLIENTS = 16
# How long a client may take to read an answer; it is dropped past that.
CLIENT_TIMEOUT = 2.0
# How long the thread pauses after an unexpected error.
ERROR_PAUSE = 0.1
# The longest path a Unix socket can be bound to (sun_path less its NUL).
MAX_PATH = 107
REQUESTS = ("hello", "snapshot", "dump")

# The consoles of this process, by absolute path; under _registry_lock.
_consoles: dict[str, Console] = {}
_registry_lock = threading.Lock()


def console_path(console: object, what: str) -> str | None:
    """The console path a runtime is given: ``console``, else ``ASYNCOP_CONSOLE``, else None.

    Raises:
        TypeError: ``console`` is neither a str path nor None.
        ValueError: ``console`` is an empty path.
    """
    if console is None:
        console = os.environ.get(ENV_VAR) or None
        if console is None:
            return None
    path = os.fspath(console) if isinstance(console, str | os.PathLike) else None
    if not isinstance(path, str):
        raise TypeError(
            f"{what}(console=...) needs the path of a Unix socket to make, got "
            f"{type(console).__name__}; pass a str or pathlib.Path, or None for no console"
        )
    if not path:
        raise ValueError(
            f"{what}(console='') needs the path of a Unix socket to make; pass a "
            "non-empty path, or None for no console"
        )
    return os.path.abspath(path)


def attach(runtime: Kernel, path: str) -> Console:
    """Serve ``runtime`` on the console at ``path``, made now if this process has none there.

    Raises:
        FileExistsError: ``path`` exists and is not a stale socket.
        ValueError: ``path`` is too long for a Unix socket.
        OSError: the socket cannot be made there (no such directory, no
            permission); the message names the path.
    """
    with _registry_lock:
        console = _consoles.get(path)
        if console is None:
            console = _consoles[path] = Console(path)
        console.runtimes.append(runtime)
    return console


class Console:
    """One console socket and the thread that serves it; see the module docstring."""

    def __init__(self, path: str) -> None:
        self.path = path
        # The runtimes served; written under _registry_lock, read by the thread.
        self.runtimes: list[Kernel] = []
        self._listener, self._identity = _bind(path)
        self._wakeup = WakeupChannel()
        self._stopping = False
        self._clients: dict[socket.socket, bytearray] = {}
        self._clients_lock = threading.Lock()
        try:
            self._thread: ThreadHandle = start_thread(
                self._main, None, name=f"asyncop-console {os.path.basename(path)}"
            )
        except BaseException:
            self._close_socket()
            raise

    def detach(self, runtime: Kernel, end: float | None) -> bool:
        """Stop serving ``runtime``; the last runtime out closes the console.

        Args:
            end: the ``time.monotonic()`` reading by which to give up
                joining the thread (None: no limit).

        Returns:
            False if the thread was still running at ``end``.
        """
        with _registry_lock:
            if runtime in self.runtimes:
                self.runtimes.remove(runtime)
            if self.runtimes or _consoles.get(self.path) is not self:
                return True
            del _consoles[self.path]
        self._stopping = True
        self._wakeup.wake()
        with self._clients_lock:
            clients = list(self._clients)
        for client in clients:  # ends a send to a client that does not read
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        ended = join_by(self._thread, end)
        self._close_socket()
        return ended

    # -- the thread -----------------------------------------------------------

    def _main(self, _: object) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ, None)
            selector.register(self._wakeup.fileno(), selectors.EVENT_READ, None)
            while not self._stopping:
                try:
                    events = selector.select()  # no timeout: parked until a client comes
                    for key, _mask in events:
                        if self._stopping:
                            break
                        if key.fileobj is self._listener:
                            self._accept(selector)
                        elif isinstance(key.fileobj, socket.socket):
                            self._serve_safely(selector, key.fileobj)
                        else:
                            self._wakeup.drain()
                except BaseException:
                    # The console must outlive any error, like the workers,
                    # and an error that recurs must not make it spin.
                    _log_exception("asyncop: the console at %r hit an error; it carries on", self)
                    time.sleep(ERROR_PAUSE)
            for client in list(self._clients):
                self._drop(selector, client)

    def _accept(self, selector: selectors.BaseSelector) -> None:
        try:
            client, _address = self._listener.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        client.settimeout(CLIENT_TIMEOUT)
        refusal = _refusal(client, len(self._clients))
        if refusal is not None:
            _send(client, {"protocol": PROTOCOL, "error": refusal})
            client.close()
            return
        with self._clients_lock:
            self._clients[client] = bytearray()
        selector.register(client, selectors.EVENT_READ, None)

    def _serve_safely(self, selector: selectors.BaseSelector, client: socket.socket) -> None:
        """``_serve``; a client whose request hits an error is logged and dropped."""
        try:
            self._serve(selector, client)
        except Exception:
            _log_exception("asyncop: the console at %r failed a request; closing it", self)
            self._drop(selector, client)

    def _serve(self, selector: selectors.BaseSelector, client: socket.socket) -> None:
        """Read what ``client`` sent, and answer each full line."""
        try:
            data = client.recv(4096)
        except OSError:
            data = b""
        if not data:
            self._drop(selector, client)
            return
        buffer = self._clients[client]
        buffer += data
        while (end := buffer.find(b"\n")) >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            if not _send(client, self._answer(line)):
                self._drop(selector, client)
                return
        if len(buffer) > MAX_REQUEST:
            error = f"a request is one line of at most {MAX_REQUEST} bytes; closing"
            _send(client, {"protocol": PROTOCOL, "error": error})
            self._drop(selector, client)

    def _answer(self, line: bytes) -> dict[str, Any]:
        """The answer to one request line."""
        request = line.decode("utf-8", "replace").strip()
        with _registry_lock:
            runtimes = list(self.runtimes)
        if request == "snapshot":
            return {
                "protocol": PROTOCOL,
                "pid": os.getpid(),
                "runtimes": [take_snapshot(rt) for rt in runtimes],
            }
        if request == "dump":
            text = "\n\n".join(render_dump(take_snapshot(rt)) for rt in runtimes)
            return {"protocol": PROTOCOL, "pid": os.getpid(), "text": text}
        if request == "hello":
            return {
                "protocol": PROTOCOL,
                "pid": os.getpid(),
                "path": self.path,
                "runtimes": [rt.name for rt in runtimes],
                "requests": list(REQUESTS),
            }
        shown = request if len(request) <= 40 else request[:37] + "..."
        return {
            "protocol": PROTOCOL,
            "error": f"unknown request {shown!r}; send one of: {', '.join(REQUESTS)}",
        }

    def _drop(self, selector: selectors.BaseSelector, client: socket.socket) -> None:
        with self._clients_lock:
            self._clients.pop(client, None)
        try:
            selector.unregister(client)
        except (KeyError, ValueError):
            pass
        client.close()

    def _close_socket(self) -> None:
        """Close the listener and remove the socket file, if it is still ours."""
        self._listener.close()
        self._wakeup.close()
        try:
            now = os.lstat(self.path)
        except OSError:
            return
        if (now.st_dev, now.st_ino) == self._identity:
            try:
                os.unlink(self.path)
            except OSError:
                pass

    def __repr__(self) -> str:
        return f"<Console {self.path!r}>"


def _refusal(client: socket.socket, served: int) -> str | None:
    """Why ``client`` is not served, or None."""
    if served >= MAX_CLIENTS:
        return f"the console serves at most {MAX_CLIENTS} clients at once; try again later"
    peercred = getattr(socket, "SO_PEERCRED", None)
    if peercred is None:
        return None
    try:
        creds = client.getsockopt(socket.SOL_SOCKET, peercred, 12)
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)  # struct ucred, in the host's order
    if uid not in (os.getuid(), 0):
        return "the console serves only the user running the program"
    return None


def _send(client: socket.socket, answer: dict[str, Any]) -> bool:
    """Send one answer line; False if the client is gone or does not read."""
    try:
        text = json.dumps(answer, separators=(",", ":"), allow_nan=False)
    except ValueError:  # a NaN or an infinity somewhere: JSON has neither
        text = json.dumps(_finite(answer), separators=(",", ":"))
    try:
        client.sendall(text.encode() + b"\n")
    except OSError:
        return False
    return True


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None."""
    if isinstance(value, float):
        return value if value - value == 0.0 else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


# -- making the socket ----------------------------------------------------------------


def _bind(path: str) -> tuple[socket.socket, tuple[int, int]]:
    """Make the listening socket at ``path``, mode 0600; returns it and its file's identity."""
    if len(os.fsencode(path)) > MAX_PATH:
        raise ValueError(
            f"console path {path!r} is {len(os.fsencode(path))} bytes long, and a Unix "
            f"socket's path takes at most {MAX_PATH}; choose a shorter path"
        )
    _clear_stale(path)
    try:
        private = tempfile.mkdtemp(prefix=".", dir=os.path.dirname(path))  # mode 0700
    except OSError as exc:
        raise type(exc)(
            f"cannot make the console socket {path!r}: {exc.strerror or exc}; "
            "choose a path in a directory that exists and that you may write to"
        ) from None
    temp = os.path.join(private, "s")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            listener.bind(temp)
        except OSError as exc:
            raise type(exc)(
                f"cannot make the console socket {path!r}: {exc.strerror or exc} (it is "
                "bound in a directory made beside it first, 12 bytes longer); choose a "
                "shorter path"
            ) from None
        os.chmod(temp, 0o600)
        listener.listen(MAX_CLIENTS)
        listener.setblocking(False)
        _publish(temp, path)
        made = os.lstat(path)
    except BaseException:
        listener.close()
        raise
    finally:
        for remove in (os.unlink, os.rmdir):
            try:
                remove(temp if remove is os.unlink else private)
            except OSError:
                pass
    return listener, (made.st_dev, made.st_ino)


def _publish(temp: str, path: str) -> None:
    """Give the socket bound at ``temp`` its name ``path``, never replacing a file."""
    try:
        os.link(temp, path)
    except FileExistsError:
        raise _exists(path, "appeared while the console was being made") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        # A file system without hard links: rename, which is as atomic.
        if os.path.lexists(path):
            raise _exists(path, "appeared while the console was being made") from None
        os.rename(temp, path)


def _clear_stale(path: str) -> None:
    """Remove a stale socket at ``path``; raise if anything else is there."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(found.st_mode):
        raise _exists(path, "is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        os.unlink(path)  # nobody listens: left by a process that ended
        return
    except OSError as exc:
        raise _exists(path, f"is a socket that cannot be checked ({exc.strerror})") from None
    finally:
        probe.close()
    raise _exists(path, "is the socket of a program that is serving on it")


def _exists(path: str, why: str) -> FileExistsError:
    return FileExistsError(
        f"cannot make the console socket {path!r}: the path {why}; choose another "
        "path, or remove it if nothing uses it",
    )
