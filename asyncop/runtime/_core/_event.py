"""``WaitEvent``: the base of the runtime's awaitables, an event a task can wait on.

A task waits on an event through its waker (``_waker.py``): ``await event``
yields the event to the worker stepping the task, which subscribes the
task's waker to it (``_arm``) and suspends the task until the event fires.
See ``_waker.py`` for the protocol an event follows.

Never awaited
-------------
A ``WaitEvent`` carries one flag, ``_awaited``, set when it is awaited or
handed over (to ``select``, ``race``, ``resume_when``). It is left unset at
creation, which costs nothing; ``__del__`` (its base ``Watched``'s, compiled a
C finalizer) warns, through ``_never_awaited``, about an event collected
without it, as Python warns about a coroutine never awaited. The location
is the innermost frame outside asyncop when the event is collected: for a
forgotten ``await`` (``ch.send_async(x)`` as a statement) that is the line
that made it, without paying for a frame lookup on every event made. One
collected by asyncop's own code (a task's locals, freed as its coroutine
ends) names the operation running there, and where that was made (the
warning is ``_never_awaited.py``'s).

A call that refuses its arguments lets go of every awaitable it was handed
(``let_go``, in ``_waker.py``).
"""

from __future__ import annotations

from collections.abc import Generator
from types import GenericAlias
from typing import TYPE_CHECKING, Any

from ...operations import SuspendsItself, T, suspend
from ._never_awaited import describe_event, warn_never_awaited

try:
    import cython  # pyright: ignore[reportMissingImports]
except ImportError:  # run as Python, without Cython installed
    from ...platform import pure_cython as cython

# (Compiled, _event.pxd cimports it: WaitEvent's C base, from the module that defines it.)
if TYPE_CHECKING or not cython.compiled:
    from ...operations._suspend import Watched

if TYPE_CHECKING:
    from ._waker import Subscription

__all__ = ["SelfSuspendedEvent", "WaitEvent"]

# Compiled, WaitEvent is an extension type (see _event.pxd), which cannot
# extend typing.Generic: its parameters (``WaitEvent[int]``, in a
# subclass's bases or an annotation) come from a base of no fields instead.
if TYPE_CHECKING or not cython.compiled:
    from typing import Generic
else:

    class Generic:
        """Take a class's type parameters, as ``typing.Generic`` does, and drop them."""

        __slots__ = ()

        @classmethod
        def __class_getitem__(cls, params: Any) -> Any:
            # (Its own, in WaitEvent's bases, adds nothing to them.)
            return cls if cls is Generic else GenericAlias(cls, params)


class WaitEvent(Watched, Generic[T]):
    """Base of the runtime's awaitables: an event a task can wait on.

    ``await event`` yields the event to the worker stepping the task, which
    checks for cancellation, subscribes the task's waker and suspends the
    task until the event fires. Subclasses implement ``_arm``/``_disarm``.

    An event that is collected without having been awaited (or handed to
    ``select``, ``resume_when``...) emits ``RuntimeWarning: asyncop
    awaitable ... was never awaited``, as a coroutine does: the ``await``
    was forgotten, and what the event stood for (a send, a sleep) never
    happened.
    """

    # Compiled, an extension type (_event.pxd): the runtime's own events
    # extend it in C, and are made without a call of their class.

    # _awaited (Awaited's): set (to True) once the event is awaited or
    # otherwise used. It is left unset at creation, so making an event costs
    # nothing more; only __del__ (Watched's) reads it, and only an unused
    # event misses it.
    __slots__ = ()

    #: A cancel of the waiting task wakes it with ``Cancelled``. False for
    #: waits that must run to the end (a blocking call in another thread).
    cancellable = True
    #: An already-cancelled task raises ``Cancelled`` here instead of waiting.
    #: False only for a scope's wait for its children, which must happen.
    entry_checked = True
    #: The event arms with ``_arm_locked(sub)``, under the runtime lock, which
    #: the stepper then holds to arm and suspend the task in one go: no event
    #: can fire between the two. ``_arm`` stays for other callers.
    arms_locked = False

    def __await__(self) -> Generator[Any, Any, T]:
        self._awaited = True
        return suspend(self)

    def _await_description(self) -> str:
        return _describe_safely(self)

    def _never_awaited(self) -> None:
        # (Called by Watched.__del__, for an event neither awaited nor handed over.)
        warn_never_awaited(self)

    def _arm(self, sub: Subscription) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} does not implement _arm(); "
            "define _arm(sub) in the subclass: register sub and fire it when ready"
        )

    def _arm_locked(self, sub: Subscription) -> None:
        """Arm with the runtime lock held; called only when ``arms_locked`` is true."""
        self._arm(sub)

    def _disarm(self, sub: Subscription) -> None:
        """Take back a subscription; the default has nothing to take back."""

    def _describe(self) -> str:
        return type(self).__name__


# An event that, compiled, is its own Suspension: a task parked in it keeps
# one object alive, not two. As Python, any event (see SuspendsItself).
if TYPE_CHECKING or not cython.compiled:
    SelfSuspendedEvent = WaitEvent
else:

    class SelfSuspendedEvent(WaitEvent, SuspendsItself):
        """A ``WaitEvent`` that yields itself when awaited."""

        __slots__ = ()
        # (WaitEvent's comes first in the MRO: this one, the C slot's.)
        __await__ = SuspendsItself.__await__


_describe_safely = describe_event
