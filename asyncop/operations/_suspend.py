"""The one object every asyncop awaitable suspends its task in.

``await event`` calls ``event.__await__()``, which returns
``suspend(yielded)``: what the task's coroutine awaits. It yields
``yielded`` (the event itself, or ``CHECKPOINT``) to the worker stepping
the task, and returns what the worker sends back once the wait is over. A
wait that ends with an error is sent ``RAISE`` instead, and the error (in
the worker's ``thread_state().thrown_in``) is raised here, in the innermost
call of the task: there it chains to the exception being handled where the
task waits, as in trio. A ``coro.throw()`` would set the context again in
every frame it passes, and end with the outermost one.

What ``suspend`` returns depends on the form, each the cheaper in its own:

- Compiled, a :class:`Suspension`: an iterator of C fields, stepped
  through C slots. A parked task keeps what it awaits alive for as long as
  it waits, and a generator is a frame (about 250 bytes, a quarter of what
  a parked task costs).
- As Python, a generator (``_suspend_in_frame``). CPython resumes a
  generator without a call and ends it without raising, where a Python
  ``Suspension`` ends every wait in a call that raises ``StopIteration``.

Both behave alike: ``send``, ``throw`` and ``close``, in the same order and
with the same errors (the two share ``_raise_thrown_in`` and
``_refuse_foreign``). The worker recognises either, by the type or by the
generator's code object (``SUSPEND_CODE``), before it sends ``RAISE``.

Compiled, an awaitable may also be its own suspension
(:class:`SuspendsItself`): it yields itself, and a task parked in it keeps
one object alive instead of two. Both kinds step by one copy of the
iterator protocol, that of their base :class:`Suspends`, which tells by
the type what to yield (``_yielded_by``). ``Awaited``, the base of every
runtime event and of ``Suspends``, holds the field a suspension steps by
beside the event's ``_awaited`` flag, in room the flag left unused; an
``Awaited`` alone is no iterator.

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
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # (the stand-in's signatures, for cython.compiled below)
    from ..platform import pure_cython as cython
else:
    try:
        import cython
    except ImportError:  # run as Python, without Cython installed
        from ..platform import pure_cython as cython

from ..platform import _gc
from ._current import RAISE, _thread_local, thread_state
from ._foreign import awaited_outside_error

__all__ = [
    "OWN_COROUTINE",
    "OWN_GENERATOR",
    "SUSPEND_CODE",
    "Awaited",
    "Suspends",
    "Suspension",
    "SuspendsItself",
    "Watched",
    "suspend",
    "suspend_on_constant",
]

# Where a Suspension is: before its one yield, waiting after it, or over.
# (0, a C field's first value: an awaitable that is its own Suspension and
# was never awaited, see SuspendsItself.)
_FRESH = 1
_WAITING = 2
_OVER = 3


class Awaited:
    """The base of asyncop's awaitable events: whether one was awaited.

    ``_awaited`` is the flag ``WaitEvent`` warns by (see its module,
    ``_waker.py``). Compiled, the 4-byte flag leaves room beside it for a
    :class:`Suspends`'s ``_at``: an event that is its own suspension keeps
    the size the flag alone gives every event.
    """

    # (As Python only the flag, left unset at creation: see _waker.py.)
    __slots__ = ("_awaited",)


class Watched(Awaited):
    """An ``Awaited`` that warns when collected unawaited: ``WaitEvent``'s base.

    Compiled, an extension type whose ``__del__`` is the C finalizer every
    event inherits: one that was awaited, as nearly every one is, goes
    without a Python call, and only one neither awaited nor handed over
    calls ``_never_awaited`` (which ``WaitEvent`` defines: see
    ``_waker.py``). A :class:`Suspends` is an ``Awaited`` but no
    ``Watched``: the iterator of one await has no finalizer to run.
    """

    __slots__ = ()

    def __del__(self) -> None:
        try:
            if self._awaited:  # type: ignore[attr-defined]
                return
        except AttributeError:  # (as Python: the flag is unset until awaited)
            pass
        self._never_awaited()

    def _never_awaited(self) -> None:
        """Collected without being awaited or handed over; ``WaitEvent`` warns."""


class Suspends(Awaited):
    """The iterator protocol of one wait, which both kinds of suspension step by.

    A :class:`Suspension` yields the awaitable it was made for; a
    :class:`SuspendsItself` yields itself (``_yielded_by``). The methods
    are here once, and an error they raise has them as its innermost
    traceback entry: a helper function between would take one more entry,
    which, compiled, costs a frame object on every cancel of a waiting task.
    (An ``Awaited`` is no iterator: the protocol begins here, below it.)
    """

    # (As Python; compiled, _at is Awaited's C field, beside _awaited.)
    __slots__ = ("_at",)

    def __iter__(self) -> Suspends:
        return self

    def __next__(self) -> Any:
        # What a wait that ends with None resumes through. (Compiled, this
        # StopIteration is no object: the slot returns empty-handed.)
        if self._at == _FRESH:
            self._at: int = _WAITING  # (a C int compiled)
            return _yielded_by(self)
        if not self._at:
            # A SuspendsItself never awaited, stepped as a coroutine (by
            # asyncio.create_task(event.wait_async()), say): refuse it.
            raise awaited_outside_error(_yielded_by(self)._await_description())
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
            raise _sent_before_start(self, value)
        self._at = _OVER
        if at == _OVER:
            raise StopIteration
        if value is RAISE:
            _raise_thrown_in()
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
        if at == _WAITING and isinstance(exc, (RuntimeError, TypeError)):
            _refuse_foreign(exc, _yielded_by(self))
        raise exc

    def close(self) -> None:
        """End the wait, as a generator's ``close()`` does."""
        self._at = _OVER


# Final: an extension type when compiled (see _suspend.pxd), which no class extends.
class Suspension(Suspends):
    """The iterator one ``await`` of an asyncop awaitable suspends its task in."""

    # The mark typing.final leaves, which an extension type cannot take as a decorator.
    __final__ = True

    __slots__ = ("_yielded",)

    def __init__(self, yielded: Any) -> None:
        # What the task awaits (or the CHECKPOINT a checkpoint() yields),
        # described (``_await_description()``) when a foreign loop refuses it.
        self._yielded = yielded
        self._at = _FRESH

    def __repr__(self) -> str:
        return f"<Suspension in {self._yielded!r}>"


class SuspendsItself(Suspends):
    """An awaitable that is its own :class:`Suspension`: it yields itself.

    A task parked in one keeps one object alive where a ``WaitEvent`` and
    the ``Suspension`` its ``__await__`` made are two. Compiled only: as
    Python, a generator is the cheaper suspension (see the module's
    essay), and nothing extends this class. Awaited a second time, before
    or after the first wait ended, it suspends in a ``Suspension`` of its
    own, as any event does.
    """

    __slots__ = ()

    def __await__(self) -> Any:
        self._awaited = True
        if self._at:
            return Suspension(self)
        self._at = _FRESH
        return self


def _yielded_by(suspension: Suspends) -> Any:
    """What ``suspension`` yields: a ``Suspension``'s awaitable, or the awaitable itself.

    (Compiled, a C function that cannot raise, which no traceback names.)
    """
    if type(suspension) is Suspension:
        return cython.cast(Suspension, suspension)._yielded
    return suspension


def _sent_before_start(suspension: object, value: Any) -> TypeError:
    """The error a suspension sent ``value`` before its one yield raises."""
    return TypeError(
        f"{suspension!r} was sent {value!r} before it started; "
        "send None first, as to a just-started generator"
    )


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


def _raise_thrown_in() -> NoReturn:
    """Raise the error a wait ended with, which the worker that sent ``RAISE`` left."""
    state = _thread_local.state
    error = state.thrown_in
    state.thrown_in = None
    try:
        raise error
    finally:
        del error, state


def _refuse_foreign(exc: BaseException, yielded: Any) -> None:
    """Raise the TypeError naming ``yielded`` if a foreign loop threw ``exc`` back.

    What asyncio ("Task got bad yield") and trio ("unrecognized yield
    message") throw back at an object they cannot run. An asyncop task is
    stepped with ``thread_state().task`` set; outside one, this raises.
    """
    if thread_state().task is None:
        raise awaited_outside_error(yielded._await_description(), exc) from None


def _suspend_in_frame(yielded: Any) -> Generator[Any, Any, Any]:
    """``suspend(yielded)`` as Python: a generator, with a ``Suspension``'s behaviour.

    Raises:
        BaseException: the error the wait ended with.
        TypeError: awaited outside an asyncop task.
    """
    try:
        value = yield yielded
    except (RuntimeError, TypeError) as exc:
        _refuse_foreign(exc, yielded)
        raise
    if value is RAISE:
        _raise_thrown_in()
    return value


# (As Python, the code the worker tells this generator by: see _hand_in in
# asyncop/runtime/_core/_task.py.)
SUSPEND_CODE = _suspend_in_frame.__code__

# ``suspend(yielded)``, in each form the cheaper (see the module's essay):
# compiled, the class itself, with no call between; as Python, the generator.
# (Type checkers see the generator, whose behaviour a Suspension has.)
if TYPE_CHECKING:
    suspend = _suspend_in_frame
else:
    suspend = Suspension if cython.compiled else _suspend_in_frame


def suspend_on_constant(yielded: Any) -> Generator[Any, Any, Any]:
    """``suspend(yielded)`` for a ``yielded`` that lives as long as its module (``CHECKPOINT``).

    Compiled, the ``Suspension`` is taken off the cyclic collector's lists
    (``platform/_gc.py``): its one reference leads to an object that is
    never garbage, so no garbage cycle can pass through it, and while tasks
    wait in checkpoints a collection has one object fewer per task to count
    and visit. As Python, ``suspend``'s generator, tracked as any frame is.
    """
    if cython.compiled:
        return _gc.untrack(Suspension(yielded))
    return _suspend_in_frame(yielded)


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
