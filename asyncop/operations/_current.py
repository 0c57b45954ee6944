"""Which operation's code the calling thread is running.

Workers set it around each callback they run and each coroutine step they
take; a sync scope sets it for the duration of its block. It is per thread,
not a context variable: the answer belongs to the thread that is executing,
and an operation's context variables are copied to its children, which must
not inherit the parent as "current".

Each thread has one :class:`ThreadState`, reached with :func:`thread_state`.
It is a plain slotted object kept in a ``threading.local``: reading a
``threading.local`` attribute costs some hundreds of instructions, reading
a slot almost nothing, so a hot path fetches the state once and then reads
and writes its slots (a worker fetches it once, when its thread starts).
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, Literal, final, overload

if TYPE_CHECKING:
    from ._node import AsyncOperation

__all__ = [
    "RAISE",
    "ThreadState",
    "current_operation",
    "every_thread_state",
    "state_of",
    "thread_state",
]


@final
class ThreadState:
    """One thread's view of what it is running."""

    __slots__ = (
        "__weakref__",
        "blocked",
        "op",
        "parked_on",
        "task",
        "thrown_in",
        "waits_on",
        "worker",
    )

    def __init__(self) -> None:
        # The sync callback or sync scope the thread is running, if any.
        self.op: AsyncOperation | None = None
        # The coroutine task being stepped (a runtime TaskState), or None.
        # While it is set, the current operation is the task's innermost
        # scope, and blocking waits refuse to run (they would block a worker).
        self.task: Any = None
        # The runtime Worker whose thread this is, or None on any other thread.
        self.worker: Any = None
        # True while the thread waits inside one of asyncop's blocking calls.
        self.blocked = False
        # The lock it is parked on in that call, until it wakes: the lock is
        # released by whoever wakes it, so a thread whose lock is still held
        # is still asleep (see waits_in_asyncop()).
        self.parked_on: Any = None
        # What it waits on in that call (an object with ``_describe()``: a
        # primitive's waiter, or a ``TreeWait``), for dump() and the
        # deadlock report; None when the call did not say.
        self.waits_on: Any = None
        # The error a worker hands the awaitable its task is suspended in,
        # which raises it there (see RAISE).
        self.thrown_in: BaseException | None = None

    def waits_in_asyncop(self) -> bool:
        """Whether the thread sleeps in one of asyncop's blocking calls right now.

        Unlike ``blocked``, this turns False as soon as a waker releases the
        thread, before the thread itself gets to run again: another thread
        may rely on it to tell that nothing more will come from this one
        until something inside asyncop wakes it.
        """
        lock = self.parked_on
        return lock is not None and lock.locked()

    def running(self) -> AsyncOperation | None:
        """The operation whose code this thread runs: see current_operation()."""
        task = self.task
        if task is not None:
            op: AsyncOperation = task.current
            return op
        return self.op

    def __repr__(self) -> str:
        return f"<ThreadState op={self.op!r} task={self.task!r} worker={self.worker!r}>"


# (The runtime's hottest paths read ``_thread_local.state`` themselves, falling
# back on thread_state() when it is not made yet: a call less.)
_thread_local = threading.local()
# Every live thread's state by thread id, so that one thread can tell what
# another is running (a second Ctrl-C names the threads it abandons). Weak:
# a thread's state goes with the thread.
_by_thread: weakref.WeakValueDictionary[int, ThreadState] = weakref.WeakValueDictionary()


def thread_state() -> ThreadState:
    """Return the calling thread's state, making it on first use."""
    try:
        state: ThreadState = _thread_local.state
    except AttributeError:
        state = _thread_local.state = ThreadState()
        _by_thread[threading.get_ident()] = state
    return state


def state_of(ident: int | None) -> ThreadState | None:
    """The state of the live thread ``ident``, if it ever made one; read-only use."""
    return None if ident is None else _by_thread.get(ident)


def every_thread_state() -> list[tuple[int, ThreadState]]:
    """``(thread id, state)`` of every live thread that made one; read-only use.

    For the runtime's deadlock watch, which looks at what the threads
    outside it wait on. A thread that starts or ends meanwhile may be
    missed; the list is never torn.
    """
    while True:
        try:
            return list(_by_thread.items())
        except RuntimeError:  # the dictionary changed size under the copy: again
            continue


class _Raise:
    """The type of ``RAISE``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "asyncop.RAISE"


# What a worker sends into a task, instead of a value, to make the awaitable
# the task is suspended in raise the worker's ``thread_state().thrown_in``. Raised there,
# in the innermost frame, an error chains to the exception being handled
# where the task waits, as trio's do; thrown in with ``coro.throw()``, it
# would chain to one handled further out, since throw() sets the context
# again in every frame it passes.
RAISE: Any = _Raise()


@overload
def current_operation(*, require: Literal[True]) -> AsyncOperation[Any]: ...


@overload
def current_operation(*, require: bool = False) -> AsyncOperation[Any] | None: ...


def current_operation(*, require: bool = False) -> AsyncOperation[Any] | None:
    """Return the operation whose code the calling thread is running.

    Inside a sync callback, a coroutine operation or a scope's block, that is
    the operation itself; anywhere else it is None. Inside operation code,
    ``current_operation(require=True)`` is typed ``AsyncOperation`` (no
    ``None`` to check) and raises instead of returning None.

    Raises:
        RuntimeError: ``require=True`` and the thread runs no operation.
    """
    op = thread_state().running()
    if op is None and require:
        raise RuntimeError(
            "current_operation(require=True) was called from a thread that runs no "
            "asyncop operation; call it from an operation's code, or check "
            "current_operation() for None"
        )
    return op
