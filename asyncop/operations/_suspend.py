"""The one object every asyncop awaitable suspends its task in.

``await event`` calls ``event.__await__()``, which returns
``suspend(yielded)``: a :class:`Suspension`, the iterator the task's
coroutine awaits. It yields ``yielded`` (the event itself, or
``CHECKPOINT``) to the worker stepping the task, and returns what the worker
sends back once the wait is over. A wait that ends with an error is sent
``RAISE`` instead, and the error (in the worker's
``thread_state().thrown_in``) is raised here, in the innermost call of the
task: there it chains to the exception being handled where the task waits,
as in trio. A ``coro.throw()`` would set the context again in every frame it
passes, and end with the outermost one. The worker recognises a
``Suspension`` by its type before it sends ``RAISE``.

Why an iterator of its own, not a generator: a parked task keeps what it
awaits alive for as long as it waits, and a generator is a frame (about
250 bytes, a quarter of what a parked task costs), where a ``Suspension``
is two fields. It behaves as the generator did: ``send``, ``throw`` and
``close``, in the same order and with the same errors.

Compiled, ``Suspension`` is an extension type (``_suspend.pxd``), and
asyncop's own ``async def`` functions make Cython's coroutines (and its
other generators Cython's generators): ``OWN_GENERATOR`` and
``OWN_COROUTINE`` are the types of asyncop's own generators and coroutines
either way, for the worker's walk down a task's await chain.

The same object refuses another event loop: asyncio and trio throw an
error back at an object they cannot run, which becomes a TypeError naming
the awaitable and ``asyncop.anyio``.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from ._current import RAISE, _thread_local, thread_state
from ._foreign import awaited_outside_error

__all__ = ["OWN_COROUTINE", "OWN_GENERATOR", "Suspension", "suspend"]

# Where a Suspension is: before its one yield, waiting after it, or over.
_FRESH = 0
_WAITING = 1
_OVER = 2


# Final: an extension type when compiled (see _suspend.pxd), which no class extends.
class Suspension:
    """The iterator one ``await`` of an asyncop awaitable suspends its task in."""

    # The mark typing.final leaves, which an extension type cannot take as a decorator.
    __final__ = True

    __slots__ = ("_at", "_yielded")

    def __init__(self, yielded: Any) -> None:
        # What the task awaits (or the CHECKPOINT a checkpoint() yields),
        # described (``_await_description()``) when a foreign loop refuses it.
        self._yielded = yielded
        self._at = _FRESH

    def __iter__(self) -> Suspension:
        return self

    def __next__(self) -> Any:
        # What a wait that ends with None resumes through. (Compiled, this
        # StopIteration is no object: the slot returns empty-handed.)
        if self._at == _FRESH:
            self._at = _WAITING
            return self._yielded
        self._at = _OVER
        raise StopIteration

    def send(self, value: Any) -> Any:
        """Yield once; then return ``value`` (raise the error, for ``RAISE``).

        Raises:
            BaseException: the error the wait ended with.
            StopIteration: the wait is over, with its value.
        """
        if value is None:
            return self.__next__()
        at = self._at
        if at == _FRESH:
            raise TypeError(
                f"{self!r} was sent {value!r} before it started; "
                "send None first, as to a just-started generator"
            )
        self._at = _OVER
        if at == _OVER:
            raise StopIteration
        if value is RAISE:
            state = _thread_local.state  # (the worker that sent RAISE set it)
            error = state.thrown_in
            state.thrown_in = None
            try:
                raise error
            finally:
                del error, state
        raise StopIteration(value)

    def throw(self, kind: Any, error: Any = None, traceback: Any = None) -> Any:
        """Raise an error thrown in, as a generator does at its yield.

        Raises:
            BaseException: the error thrown in.
            TypeError: awaited outside an asyncop task.
        """
        exc = _thrown(kind, error, traceback)
        at = self._at
        self._at = _OVER
        # What asyncio ("Task got bad yield") and trio ("unrecognized yield
        # message") throw back at an object they cannot run. An asyncop task
        # is stepped with thread_state().task set.
        if (
            at == _WAITING
            and isinstance(exc, (RuntimeError, TypeError))
            and thread_state().task is None
        ):
            raise awaited_outside_error(self._yielded._await_description(), exc) from None
        raise exc

    def close(self) -> None:
        """End the wait, as a generator's ``close()`` does."""
        self._at = _OVER

    def __repr__(self) -> str:
        return f"<Suspension in {self._yielded!r}>"


def _thrown(kind: Any, error: Any, traceback: Any) -> BaseException:
    """The exception ``throw(kind, error, traceback)`` raises, as a generator's does."""
    if isinstance(kind, BaseException):
        exc = kind
    elif error is None:
        exc = kind()
    elif isinstance(error, BaseException):
        exc = error
    else:
        exc = kind(error)
    if traceback is not None:
        exc = exc.with_traceback(traceback)
    return exc


# ``suspend(yielded)``: the iterator that yields ``yielded`` to the stepping
# worker; the class itself, with no call between.
suspend = Suspension


def _own_generator() -> Generator[None, None, None]:
    """Never run: its generator's type is that of asyncop's own generators."""
    yield


async def _own_coroutine() -> None:
    """Never run: its coroutine's type is that of asyncop's own coroutines."""


def _own_types() -> tuple[type, type]:
    generator = _own_generator()
    coroutine = _own_coroutine()
    try:
        return type(generator), type(coroutine)
    finally:
        generator.close()
        coroutine.close()


# types.GeneratorType and types.CoroutineType, or Cython's when compiled.
OWN_GENERATOR, OWN_COROUTINE = _own_types()
