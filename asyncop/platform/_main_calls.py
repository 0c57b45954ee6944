"""Calls handed to the main thread while it waits in asyncop.

Some things only the main thread may do: Python installs signal handlers
there and nowhere else. asyncop's tasks run on worker threads, while the
main thread typically waits for them (``runtime.run()``, ``op.wait()``, a
scope's exit). Every such wait goes through ``acquire_for``, which on the
main thread waits in slices of ``MAIN_SLICE`` seconds (so that a Ctrl-C is
noticed); between two slices it also runs the calls other threads
handed it (:func:`call_on_main_thread`). A call is therefore run within one
slice, 50 ms at most, and the calling thread blocks until it has run.

A call is refused, with the caller's message, when the main thread is not
waiting in asyncop: it may be computing, or waiting elsewhere, and nobody
could say when it would look. ``_serving`` holds a mark for each of the
main thread's waits that look between slices (a signal handler may wait
too, inside a wait); a call is queued only while one is there, and a wait
that ends runs what is queued on its way out, so a queued call is never
stranded by the end of a wait. A wait puts its mark in inside its ``try``
and takes it out in its ``finally``, with one C call that a Ctrl-C cannot
cut: none is ever left behind by an interrupt. The main thread may be on
its way into a wait for the very task that hands it a call
(``op = runtime.spawn(main); op.wait()``): a caller that finds it not
serving gives it ``_GRACE`` seconds to start before the refusal.
``Runtime.run()`` leaves no such gap: it serves from before it starts the
work (:func:`serving`).

States of a call
----------------
``PENDING`` (queued) -> ``RUNNING`` -> ``DONE`` (run on the main thread,
its value or error kept, the caller released); or ``PENDING``/``RUNNING``
-> ``REFUSED``, when no wait of the main thread looks any more and the call
has not finished (a Ctrl-C escaped the wait first). The main thread moves
a call to ``RUNNING`` and ``DONE``, the caller to ``REFUSED``; every move
is made under ``_lock``. A Ctrl-C can also cut a wait's last look short;
so the main thread also counts its looks at the queue (``_looks``), and a
queued call it has not looked at for ``_STALL`` seconds is refused too.

A Ctrl-C belongs to the main thread: a KeyboardInterrupt raised while a
call runs goes on up the main thread's wait, as any Ctrl-C there does,
and the caller gets a RuntimeError that says so.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar, final

__all__ = [
    "call_on_main_thread",
    "can_call_on_main_thread",
    "end_serving",
    "serve_main_calls",
    "serving",
    "start_serving",
]

T = TypeVar("T")

_main_thread: Final = threading.main_thread()
# How often a caller looks whether its call was stranded (a Ctrl-C that
# escaped the main thread's wait before it ran the call).
_RECHECK: Final = 0.1
# How long a caller gives the main thread to begin a wait before a refusal.
_GRACE: Final = 0.25
# How long the main thread may go without a look at the queue, while it
# counts as serving, before a caller gives up on it (see call_on_main_thread).
_STALL: Final = 2.0


class CallState(enum.Enum):
    """Where a call handed to the main thread is; see the module docstring."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    REFUSED = "refused"


@final
class _Call:
    """One call for the main thread, and its outcome."""

    __slots__ = ("done", "error", "fn", "state", "value")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        # Changed under _lock only; see the module docstring.
        self.state = CallState.PENDING
        self.value: Any = None
        self.error: BaseException | None = None
        # Held until the call is DONE: the caller waits on it.
        self.done = threading.Lock()
        self.done.acquire()

    def run(self) -> None:
        """On the main thread: run the call once, keep its outcome, release the caller."""
        with _lock:
            if self.state is not CallState.PENDING:
                return  # run already (by an outer wait), or refused
            self.state = CallState.RUNNING
        self.error = RuntimeError(
            "the main thread was interrupted (Ctrl-C) while it ran the call handed to it"
        )
        try:
            self.value = self.fn()
            self.error = None
        except KeyboardInterrupt:
            raise  # the main thread's own: the caller gets the RuntimeError above
        except BaseException as exc:
            self.error = exc
        finally:
            with _lock:
                self.state = CallState.DONE
            self.done.release()


_lock = threading.Lock()
# Notified when the main thread begins to serve (under _lock).
_began = threading.Condition(_lock)
# The calls queued for the main thread, oldest first; a call leaves once it
# has run (or was refused).
_pending: list[_Call] = []
# The marks of the main thread's waits that serve (a signal handler may
# wait inside a wait). Invariant: a call is queued only while one is there,
# and a wait that ends runs the queue before it takes its mark out.
_serving: set[object] = set()
# How many times the main thread has looked at the queue: a caller that
# sees it stand still knows the main thread is not looking.
_looks = 0


def start_serving(mark: object) -> None:
    """The main thread begins a wait that runs handed calls between its slices.

    Call it inside the ``try`` whose ``finally`` calls ``end_serving(mark)``:
    wherever a Ctrl-C lands, the mark then goes (taking a mark out twice is
    harmless).
    """
    with _lock:
        _serving.add(mark)
        _began.notify_all()


def end_serving(mark: object) -> None:
    """The main thread ends such a wait: run what is queued, then stop looking."""
    try:
        serve_main_calls()
    finally:
        _serving.discard(mark)  # (one C call: done, wherever a Ctrl-C lands)


def serve_main_calls() -> None:
    """On the main thread: run the calls handed to it, in order.

    A call leaves the queue only after it has run, so that a Ctrl-C landing
    between two steps leaves it for the next look, not lost.
    """
    global _looks
    _looks += 1  # (only the main thread writes it)
    while _pending:
        with _lock:
            if not _pending:
                return
            call = _pending[0]
        call.run()
        with _lock:
            if _pending and _pending[0] is call:
                del _pending[0]


@contextmanager
def serving() -> Iterator[None]:
    """On the main thread, serve handed calls from now until the block ends.

    For a wait whose work starts before the wait does (``Runtime.run()``):
    a call handed meanwhile is queued and run by the wait. Elsewhere it
    does nothing.
    """
    if threading.current_thread() is not _main_thread:
        yield
        return
    mark = object()
    try:
        start_serving(mark)
        yield
    finally:
        try:
            serve_main_calls()
        finally:
            _serving.discard(mark)


def can_call_on_main_thread() -> bool:
    """Whether :func:`call_on_main_thread` would take a call.

    True on the main thread, and while the main thread waits in asyncop, or
    begins to within a short grace (the caller blocks that long at most). A
    hint for an early error: the main thread may stop waiting right after.
    """
    if threading.current_thread() is _main_thread:
        return True
    with _lock:
        return _began.wait_for(_is_serving, _GRACE)


def _is_serving() -> bool:
    return bool(_serving)


def call_on_main_thread(fn: Callable[[], T], refused: str) -> T:
    """Run ``fn()`` on the main thread, and return its value or raise its error.

    On the main thread it is a plain call. From another thread the call is
    handed to the main thread, which runs it within 50 ms while it waits in
    asyncop (see the module docstring); the calling thread blocks until
    then, without checking for a cancel: keep ``fn`` short.

    Raises:
        RuntimeError: ``refused``, when the main thread is not waiting in
            asyncop; or the main thread was interrupted before it ran ``fn``.
        BaseException: what ``fn`` raised.
    """
    if threading.current_thread() is _main_thread:
        return fn()
    call = _Call(fn)
    with _lock:
        if not _began.wait_for(_is_serving, _GRACE):
            raise RuntimeError(refused)
        _pending.append(call)
    looks, since = _looks, time.monotonic()
    while not call.done.acquire(True, _RECHECK):
        if _looks != looks:
            looks, since = _looks, time.monotonic()
        stalled = time.monotonic() - since > _STALL
        with _lock:
            if call.state is CallState.PENDING and (not _serving or stalled):
                # Stranded: a Ctrl-C escaped the wait before it ran the call
                # (or cut a wait short before it could count itself out).
                call.state = CallState.REFUSED
                _pending.remove(call)
                raise RuntimeError(refused)
            if call.state is CallState.RUNNING and not _serving:
                call.state = CallState.REFUSED  # interrupted while it ran
                raise RuntimeError(refused)
    error = call.error
    if error is not None:
        call.error = None
        try:
            raise error
        finally:
            del error
    value: T = call.value
    return value
