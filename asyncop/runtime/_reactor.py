"""The reactor: one thread per runtime that waits for socket readiness.

A task that finds a non-blocking socket not ready awaits ``readable(fd)`` or
``writable(fd)``. That parks its waker in the *parking table*, keyed by
``(fd, direction)``, and arms the fd in the OS multiplexer. The reactor
thread blocks in the multiplexer; when an fd becomes ready it looks the key
up in the table and fires the waker it finds, which queues the task. The
multiplexer itself holds no wakers.

Rules:

- One waiter per key: a second task waiting on the same ``(fd, direction)``
  gets ``BusyResourceError``.
- Registration is one-shot per wait: firing removes the entry, and the
  task re-registers for its next wait.
- After registering, the fd is polled once more with a zero timeout, so a
  readiness edge that came between the task's failed attempt and the
  registration is not missed (and costs no trip through the reactor).
- Wakes may be spurious (an error or hang-up wakes both directions):
  callers retry the operation.
- ``notify_closing(fd)`` wakes the waiters with ``ClosedResourceError``.

Backends
--------
On epoll the fd is armed with ``EPOLLONESHOT`` straight from the worker
thread: ``epoll_ctl`` is safe to call while another thread is blocked in
``epoll_wait``, so registering costs no cross-thread wake-up. An fd stays
known to epoll (disarmed) after its wait, so the next wait is one
``EPOLL_CTL_MOD``. Elsewhere (kqueue, poll, select) the reactor thread owns a
``selectors`` object, and a registration wakes it through the platform's
``WakeupChannel`` to re-read the table.

Lock order: the reactor's own lock is taken before a waker's runtime lock
(``fire`` runs after the reactor lock is released, in fact), never inside it.
"""

from __future__ import annotations

import errno
import os
import select
import selectors
import threading
from typing import TYPE_CHECKING, Any, final

from ..operations import BusyResourceError, ClosedResourceError
from ..platform import ThreadHandle, WakeupChannel, choose_selector, selector_name, start_thread
from ._waker import Subscription, WaitEvent

if TYPE_CHECKING:
    from ._scheduler import Runtime

__all__ = ["READ", "WRITE", "IoWait", "Reactor", "fileno_of"]

READ = 1
WRITE = 2
_NAMES = {READ: "readable", WRITE: "writable"}
# A worker about to park polls the parked fds itself when there are at most
# this many (see Reactor.poll_ready); 0 turns that off.
POLL_LIMIT = int(os.environ.get("ASYNCOP_WORKER_POLL_LIMIT", "16"))

_EPOLLIN = getattr(select, "EPOLLIN", 1)
_EPOLLOUT = getattr(select, "EPOLLOUT", 4)
_EPOLLERR = getattr(select, "EPOLLERR", 8)
_EPOLLHUP = getattr(select, "EPOLLHUP", 16)
_EPOLLONESHOT = getattr(select, "EPOLLONESHOT", 1 << 30)
_TO_EPOLL = {0: 0, READ: _EPOLLIN, WRITE: _EPOLLOUT, READ | WRITE: _EPOLLIN | _EPOLLOUT}


def fileno_of(fd: Any) -> int:
    """The descriptor number of an int or of an object with ``fileno()``.

    Raises:
        ClosedResourceError: the object is closed (its fileno is -1).
        TypeError: it is neither an int nor has ``fileno()``.
    """
    if isinstance(fd, int) and not isinstance(fd, bool):
        number = fd
    else:
        getter = getattr(fd, "fileno", None)
        if getter is None:
            raise TypeError(
                f"expected a file descriptor or an object with fileno(), got "
                f"{type(fd).__name__}; pass a socket or its fileno()"
            )
        number = getter()
    if number < 0:
        raise ClosedResourceError(f"{fd!r} is closed and cannot be waited on; open a new socket")
    return int(number)


def _ready_now(fd: int, direction: int) -> bool:
    """Poll one fd with a zero timeout (the re-check after registering)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN if direction == READ else select.POLLOUT)
    return bool(poller.poll(0))


@final
class IoWait(WaitEvent):
    """``await readable(fd)`` / ``await writable(fd)``: wait for readiness once."""

    __slots__ = ("direction", "fd")

    def __init__(self, fd: Any, direction: int) -> None:
        self.fd = fd
        self.direction = direction

    def _arm(self, sub: Subscription) -> None:
        reactor = sub.waker.runtime._get_reactor()
        fd = fileno_of(self.fd)
        sub.handle = (fd, self.direction)
        reactor.register(fd, self.direction, sub)

    def _disarm(self, sub: Subscription) -> None:
        key = sub.handle
        if key is not None:
            sub.handle = None
            sub.waker.runtime._get_reactor().unregister(key[0], key[1], sub)

    def _describe(self) -> str:
        return f"{_NAMES[self.direction]}({self.fd!r})"


class Reactor:
    """The readiness thread of one runtime; see the module docstring."""

    def __init__(self, runtime: Runtime, backend: str | None = None) -> None:
        self._runtime = runtime
        self._lock = threading.Lock()
        self._table: dict[tuple[int, int], Subscription] = {}
        self._armed: dict[int, int] = {}  # fd -> directions armed in the multiplexer
        self._known: set[int] = set()  # fds epoll knows about (epoll only)
        self.backend = selector_name(backend)
        self._wakeup = WakeupChannel()
        self._epoll: Any = None
        self._selector: selectors.BaseSelector | None = None
        if self.backend == "epoll":
            self._epoll = select.epoll()
            self._epoll.register(self._wakeup.fileno(), _EPOLLIN)
        else:
            self._selector = choose_selector(self.backend)
            self._selector.register(self._wakeup.fileno(), selectors.EVENT_READ)
        self._stopping = False
        self._thread: ThreadHandle | None = None

    # -- the table ------------------------------------------------------------

    def waits(self) -> int:
        """The number of parked I/O waits."""
        return len(self._table)

    def register(self, fd: int, direction: int, sub: Subscription) -> None:
        """Park ``sub`` on ``(fd, direction)`` and arm the fd.

        Raises:
            BusyResourceError: another task already waits on that key.
            RuntimeError: the reactor was shut down.
        """
        key = (fd, direction)
        with self._lock:
            if self._stopping:
                raise RuntimeError(
                    f"the reactor of runtime {self._runtime.name!r} is shut down; "
                    "do I/O before shutting the runtime down"
                )
            if key in self._table:
                raise BusyResourceError(
                    f"another task is already waiting until fd {fd} is {_NAMES[direction]}; "
                    "only one task may wait per socket and direction"
                )
            self._table[key] = sub
            self._arm_locked(fd, self._armed.get(fd, 0) | direction)
            if self._thread is None:
                self._thread = start_thread(self._main, None, name=f"{self._runtime.name}-reactor")
        # The re-check: readiness that arrived before the fd was armed.
        try:
            ready = _ready_now(fd, direction)
        except (OSError, ValueError):
            ready = True  # let the caller retry and see the real error
        if ready:
            self._fire(key, sub, None)

    def unregister(self, fd: int, direction: int, sub: Subscription) -> None:
        """Take ``sub`` back from ``(fd, direction)``, if it is still parked there."""
        with self._lock:
            if self._table.get((fd, direction)) is not sub:
                return
            del self._table[(fd, direction)]
            remaining = self._armed.get(fd, 0) & ~direction
            self._arm_locked(fd, remaining)

    def _fire(self, key: tuple[int, int], sub: Subscription, error: BaseException | None) -> None:
        with self._lock:
            if self._table.get(key) is not sub:
                return
            del self._table[key]
            fd, direction = key
            self._arm_locked(fd, self._armed.get(fd, 0) & ~direction)
        sub.fire(None, error)

    def _arm_locked(self, fd: int, directions: int) -> None:
        if directions:
            self._armed[fd] = directions
        else:
            self._armed.pop(fd, None)
        if self._epoll is not None:
            mask = _TO_EPOLL[directions] | _EPOLLONESHOT if directions else 0
            epoll = self._epoll
            try:
                if fd in self._known:
                    try:
                        epoll.modify(fd, mask)
                    except FileNotFoundError:
                        # The fd was closed and its number reused: epoll
                        # dropped the old one, so register the new one.
                        epoll.register(fd, mask)
                elif directions:
                    try:
                        epoll.register(fd, mask)
                    except FileExistsError:
                        epoll.modify(fd, mask)
                    self._known.add(fd)
            except OSError as exc:
                if exc.errno in (errno.EBADF, errno.ENOENT) and not directions:
                    self._known.discard(fd)
                    return
                raise
        else:
            self._wakeup.wake()  # the reactor thread re-reads _armed

    def poll_ready(self) -> bool:
        """Fire the parked waits whose fd is ready now; called by a worker about to park.

        A readiness that the reactor thread hands to a worker crosses two
        threads (the kernel wakes the reactor, the reactor wakes a worker):
        in a request/response exchange that is most of the round trip. A
        worker that is about to park polls the parked fds itself, with a
        zero timeout, and runs the woken task at once. The reactor may see
        the same readiness too; ``_confirm_locked`` makes that harmless.
        Only done for small tables, where one ``poll`` is cheap.

        Returns:
            True if it woke anything.
        """
        table = self._table
        if not table or len(table) > POLL_LIMIT:
            return False
        with self._lock:
            masks: dict[int, int] = {}
            for fd, direction in table:
                masks[fd] = masks.get(fd, 0) | (
                    select.POLLIN if direction == READ else select.POLLOUT
                )
        poller = select.poll()
        try:
            for fd, mask in masks.items():
                poller.register(fd, mask)
            events = poller.poll(0)
        except (OSError, ValueError):
            return False
        if not events:
            return False
        fired: list[Subscription] = []
        with self._lock:
            for fd, mask in events:
                ready = 0
                if mask & (select.POLLIN | select.POLLERR | select.POLLHUP):
                    ready |= READ
                if mask & (select.POLLOUT | select.POLLERR | select.POLLHUP):
                    ready |= WRITE
                taken = self._take_ready_locked(fd, ready)
                if taken:
                    self._arm_locked(fd, self._armed.get(fd, 0))
                    fired.extend(taken)
        for sub in fired:
            sub.fire(None)
        return bool(fired)

    def notify_closing(self, fd: int) -> None:
        """Wake the waiters on ``fd`` with ``ClosedResourceError`` and forget it."""
        fired: list[Subscription] = []
        with self._lock:
            for direction in (READ, WRITE):
                sub = self._table.pop((fd, direction), None)
                if sub is not None:
                    fired.append(sub)
            self._armed.pop(fd, None)
            if self._epoll is not None and fd in self._known:
                self._known.discard(fd)
                try:
                    self._epoll.unregister(fd)
                except OSError:
                    pass
            elif self._epoll is None:
                self._wakeup.wake()
        for sub in fired:
            sub.fire(
                None,
                ClosedResourceError(
                    f"fd {fd} was closed while a task waited on it; stop using the socket"
                ),
            )

    # -- the thread -----------------------------------------------------------

    def _main(self, _: object) -> None:
        if self._epoll is not None:
            self._run_epoll()
        else:
            self._run_selector()

    def _run_epoll(self) -> None:
        epoll = self._epoll
        wake_fd = self._wakeup.fileno()
        while not self._stopping:
            try:
                events = epoll.poll(-1)
            except InterruptedError:  # pragma: no cover - PEP 475 retries
                continue
            except OSError:
                if self._stopping:
                    return
                raise
            fired: list[Subscription] = []
            with self._lock:
                for fd, mask in events:
                    if fd == wake_fd:
                        self._wakeup.drain()
                        continue
                    ready = 0
                    if mask & (_EPOLLIN | _EPOLLERR | _EPOLLHUP):
                        ready |= READ
                    if mask & (_EPOLLOUT | _EPOLLERR | _EPOLLHUP):
                        ready |= WRITE
                    if not mask & (_EPOLLERR | _EPOLLHUP):
                        ready = self._confirm_locked(fd, ready)
                    fired.extend(self._take_ready_locked(fd, ready))
                    # ONESHOT disarmed the whole fd: re-arm what still waits.
                    self._arm_locked(fd, self._armed.get(fd, 0))
            for sub in fired:
                sub.fire(None)

    def _confirm_locked(self, fd: int, ready: int) -> int:
        """Keep only the directions of ``ready`` that are still ready now.

        An event can be stale: the re-check in ``register`` may already have
        woken the wait it was armed for, and a newer wait on the same fd
        (or on a new socket that reused the number) must not be woken by it.
        One zero-timeout poll here is cheaper than a spurious task step.
        """
        confirmed = 0
        for direction in (READ, WRITE):
            if ready & direction and (fd, direction) in self._table:
                try:
                    if _ready_now(fd, direction):
                        confirmed |= direction
                except (OSError, ValueError):
                    confirmed |= direction  # let the waiter retry and see the error
        return confirmed

    def _take_ready_locked(self, fd: int, ready: int) -> list[Subscription]:
        """Pop the waiters of ``fd`` whose direction is in ``ready``."""
        taken: list[Subscription] = []
        armed = self._armed.get(fd, 0)
        for direction in (READ, WRITE):
            if ready & direction:
                sub = self._table.pop((fd, direction), None)
                if sub is not None:
                    taken.append(sub)
                armed &= ~direction
        if armed:
            self._armed[fd] = armed
        else:
            self._armed.pop(fd, None)
        return taken

    def _run_selector(self) -> None:
        selector = self._selector
        assert selector is not None
        wake_fd = self._wakeup.fileno()
        registered: dict[int, int] = {}
        while not self._stopping:
            with self._lock:
                wanted = dict(self._armed)
            for fd in list(registered):
                if fd not in wanted:
                    try:
                        selector.unregister(fd)
                    except (KeyError, ValueError, OSError):
                        pass
                    del registered[fd]
            for fd, directions in wanted.items():
                events = (selectors.EVENT_READ if directions & READ else 0) | (
                    selectors.EVENT_WRITE if directions & WRITE else 0
                )
                try:
                    if fd not in registered:
                        selector.register(fd, events)
                    elif registered[fd] != events:
                        selector.modify(fd, events)
                    registered[fd] = events
                except (KeyError, ValueError, OSError):
                    # A closed fd: wake its waiters so that they retry and
                    # see the error themselves.
                    with self._lock:
                        stale = self._take_ready_locked(fd, READ | WRITE)
                    for sub in stale:
                        sub.fire(None)
            ready = selector.select(None)
            fired: list[Subscription] = []
            with self._lock:
                for key, mask in ready:
                    fd = int(key.fd)
                    if fd == wake_fd:
                        self._wakeup.drain()
                        continue
                    bits = (READ if mask & selectors.EVENT_READ else 0) | (
                        WRITE if mask & selectors.EVENT_WRITE else 0
                    )
                    fired.extend(self._take_ready_locked(fd, bits))
            for sub in fired:
                sub.fire(None)

    def shutdown(self, timeout: float | None) -> bool:
        """Stop the thread, wake every waiter (with ``ClosedResourceError``), close."""
        with self._lock:
            self._stopping = True
            fds = {fd for fd, _ in self._table}
            thread = self._thread
        for fd in fds:
            self.notify_closing(fd)
        self._wakeup.wake()
        ended = thread.join(timeout) if thread is not None else True
        if ended:
            if self._epoll is not None:
                self._epoll.close()
            if self._selector is not None:
                self._selector.close()
            self._wakeup.close()
        return ended
