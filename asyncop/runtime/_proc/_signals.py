"""Signals as an async iterator: ``with open_signal_receiver(SIGTERM) as signals``.

Why it looks like this
----------------------
Python runs signal handlers only in the main thread, between two bytecodes
of whatever that thread is doing, and only the main thread may install
them. asyncop's tasks run on worker threads, so the handlers are installed
(and restored) by the main thread: directly when the receiver is opened
there (typically around ``runtime.run(...)``), or, when a task opens it,
by handing the installation to the main thread while it waits in asyncop
(``runtime.run()``, ``op.wait()``...), which runs it within 50 ms
(``asyncop.platform.call_on_main_thread``; the task's worker blocks
meanwhile). The receiver is iterated where the work is (any task). Opening
one where neither works (a plain thread, while the main thread computes or
waits outside asyncop) raises RuntimeError, after a quarter second in which
the main thread may still begin its wait, rather than failing
inside ``signal.signal``.

A handler can interrupt the main thread anywhere, including while it holds
one of the runtime's locks, so the handler installed here takes no lock and
touches no runtime structure. It does two things that are safe at any
point: it records the signal number in a dict (one atomic store; a signal
that arrives again before it is read is coalesced into the pending one, as
in trio), and it writes one byte to a non-blocking pipe. The iterating task
waits on the read end of that pipe with ``readable()``, like any
descriptor, so the wake-up reaches it through the reactor. ``signal.
set_wakeup_fd`` is not used: there is one per process, and it may already
belong to someone else.

States
------
``NEW`` (made, handlers not installed) -> ``OPEN`` (inside the ``with``:
our handlers installed) -> ``CLOSED`` (previous handlers restored), each
once, by the receiver's two transitions: entering a receiver a second time
is refused, and leaving it twice does nothing. The thread that runs the
``with`` changes the state; the handlers are swapped
on the main thread, and that thread waits for the swap. On the way to
``CLOSED`` the previous handlers come back first, then the signals that
arrived but were not read are re-raised (``signal.raise_signal``) so that
those handlers get them: leaving the block loses no signal. An ``async
for`` over a closed receiver ends.

Closing the pipe races with a task that may be about to wait on it. The
task holds ``_iterating`` while it is inside ``__anext__``; whoever finds
the receiver closed and gets ``_iterating`` free closes the pipe, so a task
never registers a descriptor number that was already closed (and maybe
reused).
"""

from __future__ import annotations

import enum
import functools
import os
import signal
import threading
from collections.abc import AsyncIterator, Iterable
from types import FrameType, TracebackType
from typing import Any, final

from ...operations import BusyResourceError, ClosedResourceError
from ...platform import call_on_main_thread, can_call_on_main_thread
from .. import checkpoint, readable
from .._net._streams import close_fd

__all__ = ["SignalReceiver", "open_signal_receiver"]

_MISSING: Any = object()
# The kernel delivers these to the process itself: no handler can be installed.
_UNCATCHABLE = {signal.SIGKILL, signal.SIGSTOP}


class ReceiverState(enum.Enum):
    """Where a ``SignalReceiver`` is in its life; see the module docstring."""

    NEW = "new"
    OPEN = "open"
    CLOSED = "closed"


@final
class SignalReceiver:
    """The signals that arrived while the ``with`` block of ``open_signal_receiver`` ran.

    ``async for signum in receiver`` gives each signal number (a
    ``signal.Signals``) once, in arrival order; a signal that arrives again
    before it was read is given once. The iteration ends when the block is
    left. One task at a time may iterate.
    """

    __slots__ = (
        "_arrived",
        "_fd_lock",
        "_iterating",
        "_previous",
        "_read_fd",
        "_signals",
        "_state",
        "_write_fd",
    )

    def __init__(self, signals: tuple[int, ...]) -> None:
        self._signals = signals
        self._state = ReceiverState.NEW
        # Written by the handler (main thread), popped by the iterating task:
        # each store and pop is one atomic dict operation. Ordered, so the
        # signals come out in the order they first arrived.
        self._arrived: dict[int, None] = {}
        self._previous: dict[int, Any] = {}
        self._read_fd = -1
        self._write_fd = -1
        self._iterating = threading.Lock()
        self._fd_lock = threading.Lock()  # closing the pipe vs. a wake-up write

    def __repr__(self) -> str:
        names = ", ".join(signal.Signals(s).name for s in self._signals)
        return f"<SignalReceiver ({names}) {self._state.value}, {len(self._arrived)} pending>"

    # -- opening and closing (where the with-block runs) --------------------------

    def __enter__(self) -> SignalReceiver:
        _check_can_install()
        if not self._transition_to_open():
            raise RuntimeError(
                f"{self!r} was already entered; call open_signal_receiver() again for a new one"
            )
        try:
            self._read_fd, self._write_fd = os.pipe()
            os.set_blocking(self._read_fd, False)
            os.set_blocking(self._write_fd, False)
            call_on_main_thread(self._install, f"{self!r} could not install its handlers: {_WHY}")
        except BaseException:
            self._close()
            raise
        return self

    def _transition_to_open(self) -> bool:
        """NEW -> OPEN: the with-block is entered; False if it was entered before."""
        if self._state is not ReceiverState.NEW:
            return False
        self._state = ReceiverState.OPEN
        return True

    def _transition_to_closed(self) -> bool:
        """OPEN -> CLOSED: the with-block is left; False if it was closed already."""
        if self._state is not ReceiverState.OPEN:
            return False
        self._state = ReceiverState.CLOSED
        return True

    def _install(self) -> None:
        """On the main thread: our handler for each signal; the previous ones are kept."""
        for signum in self._signals:
            self._previous[signum] = signal.signal(signum, self._handler)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._close()

    def _close(self) -> None:
        """Restore the previous handlers, re-raise unread signals, end the iteration."""
        try:
            if self._previous:
                call_on_main_thread(
                    functools.partial(_restore, self._previous),
                    f"{self!r} could not restore the previous handlers: {_WHY}",
                )
        finally:
            # After the restore no handler of ours can run again (handlers
            # run on the main thread, which restored them before this line),
            # so the state and the pipe are ours.
            if self._transition_to_closed():
                try:
                    _redeliver(self._pop_all())
                finally:
                    self._wake()  # a parked task wakes, sees CLOSED, and ends
                    if self._iterating.acquire(False):  # no task inside: close it here
                        self._close_pipe()

    def _closed(self) -> bool:
        # A method, not an inline test: the state changes under a running task
        # (on the main thread), which a type checker's narrowing cannot see.
        return self._state is ReceiverState.CLOSED

    def _pop_all(self) -> list[int]:
        return [s for s in list(self._arrived) if self._arrived.pop(s, _MISSING) is not _MISSING]

    def _close_pipe(self) -> None:
        with self._fd_lock:
            read_fd, write_fd = self._read_fd, self._write_fd
            self._read_fd = self._write_fd = -1
        if read_fd >= 0:
            close_fd(read_fd)  # a task may wait on it
            os.close(write_fd)

    def _wake(self) -> None:
        with self._fd_lock:
            if self._write_fd >= 0:
                try:
                    os.write(self._write_fd, b"\0")
                except BlockingIOError:
                    pass  # the pipe is full of wake-ups already

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        # Runs on the main thread at any bytecode, maybe inside a runtime
        # lock: no lock here, only a dict store and a write that cannot block.
        self._arrived[signum] = None
        try:
            os.write(self._write_fd, b"\0")
        except OSError:
            pass  # full: a wake-up is pending anyway

    # -- iterating (any task) ---------------------------------------------------

    def __aiter__(self) -> AsyncIterator[signal.Signals]:
        return self

    async def __anext__(self) -> signal.Signals:
        """Wait for the next signal; a cancellation point.

        Raises:
            StopAsyncIteration: the ``with`` block was left.
            BusyResourceError: another task is iterating this receiver.
            RuntimeError: the receiver was never entered with ``with``.
        """
        if self._state is ReceiverState.NEW:
            raise RuntimeError(
                f"{self!r} is not open; write 'with open_signal_receiver(...) as signals:' "
                "and iterate inside the block"
            )
        if not self._iterating.acquire(False):
            if self._closed():
                raise StopAsyncIteration
            raise BusyResourceError(
                f"another task is already iterating {self!r}; let one task receive the "
                "signals and hand them on over a Channel"
            )
        try:
            await checkpoint()
            while True:
                self._drain()
                for signum in list(self._arrived):
                    if self._arrived.pop(signum, _MISSING) is not _MISSING:
                        return signal.Signals(signum)
                if self._closed():
                    raise StopAsyncIteration
                try:
                    await readable(self._read_fd)
                except ClosedResourceError:
                    if self._closed():
                        raise StopAsyncIteration from None
                    raise
        finally:
            self._iterating.release()
            if self._closed() and self._iterating.acquire(False):
                self._close_pipe()

    def _drain(self) -> None:
        """Empty the wake-up pipe; the dict, read after this, says what came."""
        try:
            while os.read(self._read_fd, 4096):
                pass
        except BlockingIOError:
            pass

    def __del__(self) -> None:
        # A receiver dropped while a task was inside __anext__ and never resumed.
        for fd in (getattr(self, "_read_fd", -1), getattr(self, "_write_fd", -1)):
            if fd >= 0:
                os.close(fd)


# Why a receiver cannot be opened (or closed) on a thread, and what to do.
_WHY = (
    "Python installs signal handlers only on the main thread, which is not waiting in "
    "asyncop now (runtime.run(), op.wait()) to do it for this thread; open the receiver "
    "on the main thread (around runtime.run(...)) and pass it to the task that iterates it"
)


def _check_can_install() -> None:
    """Refuse where no handler could be installed (see the module docstring)."""
    if not can_call_on_main_thread():
        thread = threading.current_thread().name
        raise RuntimeError(f"open_signal_receiver() was called on thread {thread!r}, but {_WHY}")


def _restore(previous: dict[int, Any]) -> None:
    """Put the previous handlers back, every one even if one fails."""
    items = list(previous.items())
    previous.clear()

    def restore_from(index: int) -> None:
        if index < len(items):
            signum, handler = items[index]
            try:
                # None: a handler installed outside Python, which cannot be
                # reinstalled from here; the default is the closest.
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)
            finally:
                restore_from(index + 1)

    restore_from(0)


def _redeliver(signums: list[int]) -> None:
    """Raise each signal again for the restored handlers, even if one raises."""
    if signums:
        try:
            signal.raise_signal(signums[0])
        finally:
            _redeliver(signums[1:])


def _check_signals(signals: Iterable[object]) -> tuple[int, ...]:
    checked: list[int] = []
    for signum in signals:
        if isinstance(signum, bool) or not isinstance(signum, int):
            raise TypeError(
                f"open_signal_receiver() needs signal numbers, got {signum!r}; "
                "pass e.g. signal.SIGTERM"
            )
        if signum not in signal.valid_signals():
            raise ValueError(
                f"open_signal_receiver() got {signum}, which is not a signal on this "
                "system; pass a member of signal.Signals"
            )
        if signum in _UNCATCHABLE:
            raise ValueError(
                f"open_signal_receiver() got {signal.Signals(signum).name}, which no "
                "program can catch; choose one that can be handled, such as SIGTERM"
            )
        if signum not in checked:
            checked.append(signum)
    if not checked:
        raise TypeError(
            "No signals were provided to open_signal_receiver(); pass e.g. signal.SIGTERM"
        )
    return tuple(checked)


def open_signal_receiver(*signals: int) -> SignalReceiver:
    """Catch ``signals`` while a ``with`` block runs, as an async iterator.

    ::

        with open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as received:
            runtime.run(main, received)   # main: async for signum in received: ...

    Python installs signal handlers only on the main thread. Open the
    receiver there, or in a task while the main thread waits in asyncop
    (``runtime.run()``, ``op.wait()``): entering and leaving the block then
    hand the handlers to the main thread, and block the task's worker until
    it has swapped them (within 50 ms). Any task may iterate the receiver.
    While the block runs, the
    signals go to the receiver instead of their previous handlers (SIGINT
    no longer raises KeyboardInterrupt). Leaving the block restores the
    previous handlers, hands them the signals that arrived but were not
    read, and ends the iteration. Not a cancellation point.

    Raises:
        RuntimeError: called (or entered) off the main thread while the
            main thread does not wait in asyncop.
        TypeError: no signal, or something that is not a signal number.
        ValueError: a number that is not a signal here, or SIGKILL/SIGSTOP.
    """
    checked = _check_signals(signals)
    _check_can_install()
    return SignalReceiver(checked)
