"""Parking a thread in a blocking call so that its operation's cancel wakes it.

asyncop's blocking calls (``Channel.recv``, ``Lock.acquire``, ``op.wait``,
``token.wait`` ...) are cancellation points when the calling thread runs an
operation: a plain function running as an operation, or the block of a sync
``with runtime.scope()``. From any other thread they only block.

The protocol every blocking call follows::

    op = thread_state().op           # None: a plain thread, which only blocks
    ... return at once if the call can complete without waiting
    ... queue a waiter whose `lock` is held; whoever resolves the wait
    ... marks it done under the primitive's mutex, then releases `lock`
    park(lock, timeout, op, what)    # returns when released, timed out or cancelled
    ... under the mutex: done? take the result; else give up (remove it)
    ... gave up and op cancelled? raise Cancelled; else it timed out

:func:`park` registers ``lock`` with the operation's token for the length
of the wait: the cancel walk releases it (under the runtime lock, so a
Ctrl-C that interrupts ``cancel()`` cannot lose the wake-up; a later
``cancel()`` redoes the walk). The lock may thus be released twice, by the
resolver and by the cancel: both release it quietly (a lock already free is
left alone, see :func:`release_quietly`), and the waiter
decides what happened under the primitive's mutex, never from how it woke.
That keeps the value-kept rule: a result handed over before the cancel is
returned, and the next call that has to wait raises ``Cancelled`` at once
(``park`` returns at once under a cancelled token). A call that completes
without waiting (a free lock, an item ready, an operation already ended)
completes even in a cancelled operation, so cleanup code keeps working.

``what`` says what the thread waits on (a primitive's waiter, a token, a
``TreeWait``), kept in ``ThreadState.waits_on`` while it waits: ``dump()``,
the runtime's deadlock watch and the lock-cycle check read it from other
threads. Any other blocking wait of the runtime can reuse :func:`park` with its own
lock and resolver; a wait for an operation to end (a sync scope's exit, say)
is ``AsyncOperation._block_until_final(timeout, caller)``, which ends early
when ``caller`` is cancelled.
"""

from __future__ import annotations

import _thread
from typing import TYPE_CHECKING

from ..platform import acquire_for
from ._current import ThreadState, thread_state
from ._errors import Cancelled, cancelled_for

if TYPE_CHECKING:
    from ._node import AsyncOperation

__all__ = ["cancelled_error", "park", "release_quietly"]


def release_quietly(lock: _thread.LockType) -> None:
    """Release ``lock`` unless it is free already: a parked thread has two wakers."""
    try:
        lock.release()
    except RuntimeError:
        pass


def cancelled_error(op: AsyncOperation) -> Cancelled:
    """The ``Cancelled`` a blocking call raises in cancelled operation ``op``."""
    return cancelled_for(op.name, op.cancel_reason)


def park(
    lock: _thread.LockType,
    timeout: float | None,
    op: AsyncOperation | None,
    what: object = None,
) -> bool:
    """Block until ``lock`` is released, ``op`` is cancelled, or ``timeout`` passes.

    ``lock`` is held by the caller's waiter and released by whoever resolves
    the wait. ``timeout`` went through ``check_timeout`` (None: no limit).
    The main thread waits in slices, so a Ctrl-C reaches it promptly; the
    KeyboardInterrupt propagates and the caller must then remove its waiter.
    ``what`` is what the thread waits on, kept in ``ThreadState.waits_on``
    for the length of the wait (the runtime's deadlock watch and report
    read it from other threads).

    Returns:
        True if woken (resolved or cancelled: the caller finds out which
        under its mutex), False if the timeout passed.
    """
    # While it waits, a worker's sync callback gives up its sync slot: a
    # callback waiting for another callback must not hold the pool.
    state = thread_state()
    if state.blocked:
        return _park(lock, timeout, op, None)
    state.blocked = True
    state.waits_on = what
    # Asleep from here, as far as a worker deciding whether anything still
    # runs can tell: set before on_blocked(), whose parked worker looks.
    state.parked_on = lock
    worker = state.worker
    if worker is not None:
        worker.on_blocked()  # the runtime may hand the freed slot on at once
    try:
        return _park(lock, timeout, op, state)
    finally:
        state.blocked = False
        state.parked_on = None
        state.waits_on = None


def _sleep(lock: _thread.LockType, timeout: float | None, state: ThreadState | None) -> bool:
    """Wait for ``lock``; then the thread no longer counts as asleep."""
    try:
        return acquire_for(lock, timeout)
    finally:
        # At once, before the clean-up that may wait for the runtime lock:
        # a worker parking meanwhile must not take this thread for asleep.
        if state is not None:
            state.parked_on = None


def _park(
    lock: _thread.LockType,
    timeout: float | None,
    op: AsyncOperation | None,
    state: ThreadState | None,
) -> bool:
    if op is None:
        return _sleep(lock, timeout, state)
    token = op.token
    runtime_lock = token._lock
    # Registered inside the try: on the main thread a Ctrl-C can land as the
    # append returns, and the lock must not stay on the token's list.
    try:
        # A with-statement, not acquire() then try: on the main thread a
        # Ctrl-C landing as acquire() returns would leave the runtime lock held.
        with runtime_lock:
            if token._cancelled:
                if state is not None:
                    state.parked_on = None  # it goes on without sleeping
                return True
            waiters = token._waiters
            if waiters is None:
                token._waiters = [lock]
            else:
                waiters.append(lock)
        return _sleep(lock, timeout, state)
    finally:
        with runtime_lock:
            waiters = token._waiters
            if waiters is not None:
                try:
                    waiters.remove(lock)
                except ValueError:
                    pass
