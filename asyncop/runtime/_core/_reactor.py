"""The reactor: the parking table of socket waits, and the I/O multiplexer.

A task that finds a non-blocking socket not ready awaits ``readable(fd)`` or
``writable(fd)`` (see ``_io_wait.py``). That parks its waker in the
*parking table*, keyed by ``(fd, direction)``, and arms the fd in the OS
multiplexer. Whoever polls the multiplexer looks each ready fd up in the
table and fires the waker it finds, which queues the task. The multiplexer
itself holds no wakers.

Who polls
---------
On epoll (Linux), the workers drive the multiplexer themselves; there is
no reactor thread:

- a worker with nothing to run parks *in* ``epoll_wait`` (one at a time:
  the runtime's *poller*), with the next timer deadline as its timeout; a
  push wakes it through the wake-up channel. A readiness then reaches its
  task on the thread that steps it, without crossing threads;
- a busy worker polls with a zero timeout once per round of its loop, so
  readiness is taken between batches of steps;
- while every worker is held by long work, the monitor thread polls once
  per tick (``_monitor.py``).

Elsewhere (kqueue, poll, select) one reactor thread per runtime, started
on the first wait, owns a ``selectors`` object and blocks in it; a
registration wakes it through the platform's ``WakeupChannel`` to re-read
the table. A worker about to park polls small tables itself first.

Rules:

- One waiter per key: a second task waiting on the same ``(fd, direction)``
  gets ``BusyResourceError``.
- Registration is one-shot per wait: firing removes the entry, and the
  task re-registers for its next wait.
- A readiness that came between the task's failed attempt and the
  registration is not missed: epoll reports an fd that is ready when it is
  armed, and the other backends poll the fd once more after registering.
- Wakes may be spurious (an error or hang-up wakes both directions):
  callers retry the operation.
- ``notify_closing(fd)`` wakes the waiters with ``ClosedResourceError``.
- A socket closed *without* ``notify_closing`` while a task waits on it is
  found out too, although epoll drops a closed fd without a word: each wait
  remembers what it waits on (the socket object, or for a bare int the
  fd's device and inode), and an entry whose fd no longer is that object
  is *stale*. A new wait on the same number evicts stale entries instead of
  getting ``BusyResourceError``, and the reactor sweeps the table every
  ``SWEEP_EVERY`` seconds while waits are parked; both wake the stale
  waiter with ``ClosedResourceError``.
- An error from the multiplexer about one fd (``EPERM`` for a regular file
  that reused a closed socket's number, ``EBADF``) fails the waits on that
  fd, with an error naming it; it never reaches the reactor thread, which
  outlives any error (logged on the ``asyncop`` logger).

Backends
--------
On epoll the fd is armed with ``EPOLLONESHOT`` straight from the worker
thread: ``epoll_ctl`` is safe to call while another thread is blocked in
``epoll_wait``, and one-shot arming hands each readiness to exactly one of
the threads that poll. An fd stays known to epoll (disarmed) after its
wait, so the next wait is one ``EPOLL_CTL_MOD``, and a wait that fires
costs no ``epoll_ctl`` at all: the one-shot event already disarmed the fd,
and it is re-armed only for a direction that still waits. An event for an
fd added to epoll after its poll began is re-checked before it wakes
anyone: it may be a closed file's, whose number a new socket took before
the poller locked. A wait taken back before it fired (a cancel) takes its
fd out of epoll instead, once no direction waits: epoll reports a hang-up
or an error whatever the mask, so an fd left armed with an empty mask whose
peer hung up would end every ``epoll_wait`` at once (a spinning poller) and
could hand a later wait on the same number a readiness of the file that had
it before. A fired wait leaves the table with its subscription's handle
cleared, so the task's ``_disarm`` has nothing to take back and skips the
reactor's lock.

Lock order: the reactor's own lock is taken before a waker's runtime lock
(``fire`` runs after the reactor lock is released, in fact), never inside it.
"""

from __future__ import annotations

import errno
import logging
import os
import select
import selectors
import time
from typing import TYPE_CHECKING, Any

from ...operations import BusyResourceError
from ...platform import (
    ThreadHandle,
    WakeupChannel,
    choose_selector,
    join_by,
    selector_name,
    start_thread,
)

# (From its own module: compiled, _reactor.pxd cimports it, and Cython
# takes a Python import of a cimported type only from that module.)
from ...platform._lock import RecursiveLock
from ._io_wait import (
    _NAMES,
    READ,
    WRITE,
    IoWait,
    _add_ready,
    _closed_error,
    _deliver,
    _epoll_mask_now,
    _is_stale,
    _ready_now,
    _refused_error,
    fileno_of,
)
from ._waker import Subscription

if TYPE_CHECKING:
    from ._kernel import Kernel

__all__ = ["READ", "WRITE", "IoWait", "Reactor", "fileno_of"]

# A worker about to park polls the parked fds itself when there are at most
# this many (see Reactor.poll_ready); 0 turns that off.
POLL_LIMIT = int(os.environ.get("ASYNCOP_WORKER_POLL_LIMIT", "16"))
# While waits are parked, the reactor looks this often for waits on an fd
# that was closed under them (epoll reports nothing for those).
SWEEP_EVERY = 0.5
_SWEEP_LOOK_EVERY = 64  # busy polls between two looks at the clock for it
# How long the reactor thread pauses after an unexpected error.
_RECOVER_PAUSE = 0.01

logger = logging.getLogger("asyncop")

_EPOLLIN = getattr(select, "EPOLLIN", 1)
_EPOLLOUT = getattr(select, "EPOLLOUT", 4)
_EPOLLERR = getattr(select, "EPOLLERR", 8)
_EPOLLHUP = getattr(select, "EPOLLHUP", 16)
_EPOLLONESHOT = getattr(select, "EPOLLONESHOT", 1 << 30)
_TO_EPOLL = {0: 0, READ: _EPOLLIN, WRITE: _EPOLLOUT, READ | WRITE: _EPOLLIN | _EPOLLOUT}
# The epoll events that wake a reader, and a writer: an error or hang-up wakes both.
_READ_READY = _EPOLLIN | _EPOLLERR | _EPOLLHUP
_WRITE_READY = _EPOLLOUT | _EPOLLERR | _EPOLLHUP


# A wake to deliver once the reactor lock is released: the subscription and
# the error to fail it with (None: the fd is ready).
_Wake = tuple[Subscription, BaseException | None]
# What a poll collected: the waits to fire, and the waits to fail.
Collected = tuple[list[Subscription], list[_Wake]]


class Reactor:
    """The readiness thread of one runtime; see the module docstring."""

    def __init__(self, runtime: Kernel, backend: str | None = None) -> None:
        self._runtime = runtime
        self._lock = RecursiveLock()  # (its acquire/release are C calls, compiled)
        self._table: dict[tuple[int, int], Subscription] = {}
        self._armed: dict[int, int] = {}  # fd -> directions armed in the multiplexer
        self._known: set[int] = set()  # fds epoll knows about (epoll only)
        # epoll.register() calls (a new int each: compared by identity); each fd's latest.
        self._adds = 0
        self._added: dict[int, int] = {}
        self.backend = selector_name(backend)
        # On epoll the workers wait in the multiplexer themselves (one at a
        # time, the *poller*), and no reactor thread is started.
        self.drives_epoll = self.backend == "epoll"
        # Whether any wait was ever registered (the workers start polling then).
        self._used = False
        self._wakeup = WakeupChannel()
        self._wake_fd = self._wakeup.fileno()
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
        # The sweep for closed fds: when it last ran, when the table was last
        # seen non-empty, and whether the thread now blocks without a timeout
        # (then the next registration must wake it, or no sweep would come).
        self._swept = 0.0
        self._sweep_looks = 0
        self._busy_at = 0.0
        self._registered = False  # a wait registered since the thread last looked
        self._forever = False

    # -- the table ------------------------------------------------------------

    def waits(self) -> int:
        """The number of parked I/O waits."""
        return len(self._table)

    def register(self, fd: int, direction: int, sub: Subscription) -> None:
        """Park ``sub`` on ``(fd, direction)`` and arm the fd.

        Raises:
            BusyResourceError: another task already waits on that key.
            ClosedResourceError: the fd is closed.
            OSError: the multiplexer refused the fd (a regular file, say).
            RuntimeError: the reactor was shut down.
        """
        key = (fd, direction)
        wakes: list[_Wake] = []
        wake_thread = False
        try:
            # (acquire/release: C calls on the compiled lock, and this runs
            # on a worker thread, which never runs signal handlers.)
            self._lock.acquire()
            try:
                if self._stopping:
                    raise RuntimeError(
                        f"the reactor of runtime {self._runtime.name!r} is shut down; "
                        "do I/O before shutting the runtime down"
                    )
                table = self._table
                if (fd, READ) in table or (fd, WRITE) in table:
                    # A waiter left behind by a socket closed without
                    # notify_closing() must not block the fd's next owner.
                    self._evict_stale_locked(fd, wakes)
                    if key in table:
                        raise BusyResourceError(
                            f"another task is already waiting until fd {fd} is "
                            f"{_NAMES[direction]}; only one task may wait per socket "
                            "and direction"
                        )
                table[key] = sub
                self._used = True
                self._registered = True
                directions = self._armed.get(fd, 0) | direction
                epoll = self._epoll
                if epoll is not None and fd in self._known:
                    # An fd that waited before (_arm_locked, inline): one MOD.
                    self._armed[fd] = directions
                    try:
                        epoll.modify(fd, _TO_EPOLL[directions] | _EPOLLONESHOT)
                        return
                    except OSError:
                        pass  # _arm_locked sorts it out
                self._arm_locked(fd, directions, wakes)
                for i, (failed, error) in enumerate(wakes):
                    if failed is sub:
                        # Refused: this wait raises here instead.
                        del wakes[i]
                        assert error is not None
                        raise error
                if self.drives_epoll:
                    # epoll reports an fd that is ready when it is armed: no
                    # re-check needed. The worker that registered polls before
                    # it parks, or parks in the multiplexer itself.
                    return
                if self._thread is None:
                    self._thread = start_thread(
                        self._main, None, name=f"{self._runtime.name}-reactor"
                    )
                elif self._forever:
                    self._forever = False
                    wake_thread = True
            finally:
                self._lock.release()
        finally:
            if wakes:
                _deliver(wakes)
        if wake_thread:
            self._wakeup.wake()  # so that it polls with a timeout, and sweeps
        # The re-check: readiness that arrived before the fd was armed.
        try:
            mask = _ready_now(fd, direction)
        except (OSError, ValueError):
            mask = select.POLLERR  # let the caller retry and see the real error
        if mask:
            # Or the socket was closed meanwhile (poll calls that ready, as
            # it does a new socket that took the number since).
            sock = sub.event.sock
            if mask & select.POLLNVAL or (
                sock.fileno() != fd if sock is not None else _is_stale(sub, fd)
            ):
                self._fire(key, sub, _closed_error(fd, direction))
            else:
                self._fire(key, sub, None)

    def unregister(self, fd: int, direction: int, sub: Subscription) -> None:
        """Take ``sub`` back from ``(fd, direction)``, if it is still parked there."""
        wakes: list[_Wake] = []
        with self._lock:
            if self._table.get((fd, direction)) is not sub:
                return
            del self._table[(fd, direction)]
            self._arm_locked(fd, self._armed.get(fd, 0) & ~direction, wakes)
        if wakes:
            _deliver(wakes)

    def _fire(self, key: tuple[int, int], sub: Subscription, error: BaseException | None) -> None:
        wakes: list[_Wake] = []
        with self._lock:
            if self._table.get(key) is not sub:
                return
            del self._table[key]
            fd, direction = key
            self._arm_locked(fd, self._armed.get(fd, 0) & ~direction, wakes)
        sub.fire(None, error)
        if wakes:
            _deliver(wakes)

    def _arm_locked(self, fd: int, directions: int, wakes: list[_Wake]) -> None:
        """Arm ``fd`` in the multiplexer for ``directions`` (0: disarm).

        Should the multiplexer refuse the fd, every wait on it is taken out
        of the table and appended to ``wakes`` with an error naming the fd.
        """
        if directions:
            self._armed[fd] = directions
        else:
            self._armed.pop(fd, None)
        if self._epoll is None:
            self._wakeup.wake()  # the reactor thread re-reads _armed
            return
        epoll = self._epoll
        if not directions:
            # Taken out, not armed with an empty mask: see the module
            # docstring (a hang-up is reported whatever the mask).
            if fd in self._known:
                self._known.discard(fd)
                try:
                    epoll.unregister(fd)
                except OSError:
                    pass  # closed, or its number reused: epoll dropped it already
            return
        mask = _TO_EPOLL[directions] | _EPOLLONESHOT
        try:
            if fd in self._known:
                try:
                    epoll.modify(fd, mask)
                except FileNotFoundError:
                    # The fd was closed and its number reused: epoll
                    # dropped the old one, so register the new one.
                    epoll.register(fd, mask)
                    self._added[fd] = self._adds = self._adds + 1
            else:
                try:
                    epoll.register(fd, mask)
                except FileExistsError:
                    epoll.modify(fd, mask)
                self._known.add(fd)
                self._added[fd] = self._adds = self._adds + 1
        except OSError as exc:
            # About this fd alone (EBADF: closed; EPERM: the number now
            # names a regular file): fail its waits, never the caller.
            self._known.discard(fd)
            self._fail_fd_locked(fd, exc, wakes)

    def _fail_fd_locked(self, fd: int, exc: OSError, wakes: list[_Wake]) -> None:
        """Take every wait on ``fd`` out; each fails with why the fd was refused.

        A wait whose socket was closed under it gets ``ClosedResourceError``:
        the refusal is about the file that took over the number.
        """
        self._armed.pop(fd, None)
        for direction in (READ, WRITE):
            sub = self._table.pop((fd, direction), None)
            if sub is not None:
                if _is_stale(sub, fd):
                    wakes.append((sub, _closed_error(fd, direction)))
                else:
                    wakes.append((sub, _refused_error(fd, direction, exc)))

    def _evict_stale_locked(self, fd: int, wakes: list[_Wake]) -> None:
        """Fail the waits on ``fd`` whose socket was closed under them."""
        for direction in (READ, WRITE):
            sub = self._table.get((fd, direction))
            if sub is not None and _is_stale(sub, fd):
                del self._table[(fd, direction)]
                wakes.append((sub, _closed_error(fd, direction)))
                armed = self._armed.get(fd, 0) & ~direction
                if armed:
                    self._armed[fd] = armed
                else:
                    self._armed.pop(fd, None)

    def _sweep_locked(self, wakes: list[_Wake]) -> None:
        """Fail every wait whose fd was closed under it (epoll would never say)."""
        self._swept = time.monotonic()
        for fd in {fd for fd, _ in self._table}:
            self._evict_stale_locked(fd, wakes)

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
        if self.drives_epoll:
            collected = self._collect_epoll(0.0, False)
            if collected is not None:
                self.deliver(collected)
            return collected is not None
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
        wakes: list[_Wake] = []
        with self._lock:
            for fd, mask in events:
                if mask & select.POLLNVAL:
                    self._evict_stale_locked(fd, wakes)  # closed under its waiters
                    continue
                ready = 0
                if mask & (select.POLLIN | select.POLLERR | select.POLLHUP):
                    ready |= READ
                if mask & (select.POLLOUT | select.POLLERR | select.POLLHUP):
                    ready |= WRITE
                taken = self._take_ready_locked(fd, ready)
                if taken:
                    for sub in taken:
                        # poll() sees whatever file now has the number: a
                        # wait whose socket was closed fails instead.
                        sock = sub.event.sock
                        if sock.fileno() != fd if sock is not None else _is_stale(sub, fd):
                            wakes.append((sub, _closed_error(fd, sub.event.direction)))
                        else:
                            fired.append(sub)
                    self._arm_locked(fd, self._armed.get(fd, 0), wakes)
        for sub in fired:
            sub.fire(None)
        if wakes:
            _deliver(wakes)
        return bool(fired or wakes)

    def notify_closing(self, fd: int) -> None:
        """Wake the waiters on ``fd`` with ``ClosedResourceError`` and forget it."""
        wakes: list[_Wake] = []
        with self._lock:
            for direction in (READ, WRITE):
                sub = self._table.pop((fd, direction), None)
                if sub is not None:
                    wakes.append((sub, _closed_error(fd, direction)))
            self._arm_locked(fd, 0, wakes)  # (taken out of epoll)
        _deliver(wakes)

    # -- the thread -----------------------------------------------------------

    def _main(self, _: object) -> None:
        self._run_selector()

    def _recover(self) -> None:
        """Log what escaped a round of the thread's loop; nothing ends the thread.

        A dead reactor would leave every later I/O wait hanging.
        """
        try:
            logger.error("asyncop: the reactor hit an error; it carries on", exc_info=True)
        except BaseException:  # pragma: no cover - a broken log handler
            pass
        time.sleep(_RECOVER_PAUSE)

    def _poll_timeout_locked(self) -> float | None:
        """How long the thread may block: until the next sweep while waits are parked.

        It blocks without a timeout only once no wait was parked for a
        while; the next registration then wakes it (``_forever``). A table
        that empties and fills at every round trip never costs that wake.
        """
        now = time.monotonic()
        if self._table or self._registered:
            self._registered = False
            self._busy_at = now
        if self._table:
            return max(0.0, self._swept + SWEEP_EVERY - now)
        if now - self._busy_at < 4 * SWEEP_EVERY:
            return SWEEP_EVERY
        self._forever = True
        return None

    # -- the workers' side (epoll) ---------------------------------------------

    def wait_ready(self, timeout: float | None) -> Collected | None:
        """Block in the multiplexer up to ``timeout`` (None: no limit): the poller's park.

        Returns what became ready, to hand to :meth:`deliver` once the
        caller is busy again, or None. A :meth:`wake_poller` ends the wait.
        """
        return self._collect_epoll(timeout, True)

    def wake_poller(self) -> None:
        """End the poller's :meth:`wait_ready` (a push has work for it)."""
        self._wakeup.wake()

    def deliver(self, collected: Collected) -> None:
        """Fire the wakes :meth:`wait_ready` collected."""
        fired, wakes = collected
        for sub in fired:
            sub.fire(None)
        if wakes:
            _deliver(wakes)

    def _collect_epoll(self, timeout: float | None, drain: bool) -> Collected | None:
        """Poll epoll once; take the waits that became ready out of the table.

        Only the poller (``drain``) empties the wake-up channel: a zero-
        timeout poll by a busy worker must not eat the poller's wake-up.
        While waits are parked, the wait is cut at the next sweep for fds
        closed under their waiters (epoll reports nothing for those).
        A busy worker's poll (every round of its loop: a hot path) reads the
        clock for the sweep once in ``_SWEEP_LOOK_EVERY``, and takes no lock
        when it finds nothing.
        """
        table = self._table
        wait = -1.0 if timeout is None else timeout
        if wait != 0.0 and table:
            until_sweep = max(0.0, self._swept + SWEEP_EVERY - time.monotonic())
            wait = until_sweep if wait < 0 else min(wait, until_sweep)
        adds = self._adds
        try:
            events = self._epoll.poll(wait)
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            events = []
        sweep_due = False
        if table:
            self._sweep_looks -= 1
            if drain or self._sweep_looks <= 0:
                self._sweep_looks = _SWEEP_LOOK_EVERY
                sweep_due = time.monotonic() - self._swept >= SWEEP_EVERY
        if not events and not sweep_due:
            return None
        wake_fd = self._wake_fd
        fired: list[Subscription] = []
        wakes: list[_Wake] = []
        armed_fds = self._armed
        self._lock.acquire()  # (see register)
        try:
            for fd, mask in events:
                if fd == wake_fd:
                    if drain:
                        self._wakeup.drain()
                    continue
                if self._adds is not adds and self._added.get(fd, 0) > adds:
                    mask = _epoll_mask_now(fd)  # maybe the file's before (module docstring)
                armed = armed_fds.pop(fd, 0)
                if mask & _READ_READY:
                    sub = table.pop((fd, READ), None)
                    if sub is not None:
                        sub.handle = None  # taken: its _disarm has nothing to undo
                        fired.append(sub)
                    armed &= ~READ
                if mask & _WRITE_READY:
                    sub = table.pop((fd, WRITE), None)
                    if sub is not None:
                        sub.handle = None
                        fired.append(sub)
                    armed &= ~WRITE
                if armed:
                    # ONESHOT disarmed the whole fd: re-arm what still waits
                    # (else it stays disarmed, known: the next wait modifies it).
                    self._arm_locked(fd, armed, wakes)
            if sweep_due and table:
                self._sweep_locked(wakes)
        finally:
            self._lock.release()
        if fired or wakes:
            return fired, wakes
        return None

    def _take_ready_locked(self, fd: int, ready: int) -> list[Subscription]:
        """Pop the waiters of ``fd`` whose direction is in ``ready``."""
        taken: list[Subscription] = []
        armed = self._armed.get(fd, 0)
        for direction in (READ, WRITE):
            if ready & direction:
                sub = self._table.pop((fd, direction), None)
                if sub is not None:
                    sub.handle = None  # taken: its _disarm has nothing to undo
                    taken.append(sub)
                armed &= ~direction
        if armed:
            self._armed[fd] = armed
        else:
            self._armed.pop(fd, None)
        return taken

    def _run_selector(self) -> None:
        registered: dict[int, int] = {}  # what the selector holds: fd -> events
        while not self._stopping:
            try:
                self._selector_round(registered)
            except BaseException:
                if self._stopping:
                    return
                self._recover()

    def _selector_round(self, registered: dict[int, int]) -> None:
        selector = self._selector
        assert selector is not None
        wake_fd = self._wakeup.fileno()
        wakes: list[_Wake] = []
        with self._lock:
            wanted = dict(self._armed)
            timeout = self._poll_timeout_locked()
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
            except (KeyError, ValueError, OSError) as exc:
                # A closed or refused fd: fail its waits, not the thread.
                error = exc if isinstance(exc, OSError) else OSError(errno.EBADF, str(exc))
                registered.pop(fd, None)
                with self._lock:
                    self._fail_fd_locked(fd, error, wakes)
        _deliver(wakes)
        wakes = []
        try:
            ready = selector.select(timeout)
        except (OSError, ValueError):
            # select() refuses the whole set for one closed fd: forget the
            # selector's view, so the next round registers afresh and fails
            # only the fd at fault; the sweep finds waits closed meanwhile.
            for fd in list(registered):
                try:
                    selector.unregister(fd)
                except (KeyError, ValueError, OSError):
                    pass
            registered.clear()
            ready = []
            with self._lock:
                self._sweep_locked(wakes)
        with self._lock:
            for key, mask in ready:
                fd = int(key.fd)
                if fd == wake_fd:
                    self._wakeup.drain()
                    continue
                bits = (READ if mask & selectors.EVENT_READ else 0) | (
                    WRITE if mask & selectors.EVENT_WRITE else 0
                )
                _add_ready(fd, self._take_ready_locked(fd, bits), wakes)
            self._forever = False
            if self._table and time.monotonic() - self._swept >= SWEEP_EVERY:
                self._sweep_locked(wakes)
        _deliver(wakes)

    def shutdown(self, end: float | None) -> bool:
        """Stop the thread, wake every waiter (with ``ClosedResourceError``), close.

        Args:
            end: the ``time.monotonic()`` reading by which to give up on the
                thread (None: no limit).
        """
        with self._lock:
            self._stopping = True
            fds = {fd for fd, _ in self._table}
            thread = self._thread
        for fd in fds:
            self.notify_closing(fd)
        self._wakeup.wake()
        ended = join_by(thread, end) if thread is not None else True
        if ended:
            if self._epoll is not None:
                self._epoll.close()
            if self._selector is not None:
                self._selector.close()
            self._wakeup.close()
        return ended
