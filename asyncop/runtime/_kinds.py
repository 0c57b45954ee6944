"""What kind of operation a function makes: the checks ``spawn`` and ``create`` run first.

An ``async def`` function makes a coroutine task, and so does what calls
one: a ``functools.partial`` of it, a method, an object whose ``__call__``
is one (``code_of_call``). Anything else callable runs on a worker thread.
A refused object (a coroutine, an asyncop awaitable) is let go of, so it
does not warn "never awaited" besides the ``TypeError``.
"""

from __future__ import annotations

import functools
import inspect
from types import CoroutineType
from typing import Any

from ..operations import OpKind, describe_fn, safe_repr
from ._core._awaitables import TASK_MAKERS
from ._core._waker import WaitEvent, describe_event, let_go

__all__ = ["code_of_call", "describe_fn", "kind_of"]


def _async_generator_refused(fn: object) -> TypeError:
    return TypeError(
        f"cannot make an operation from async generator function {describe_fn(fn)!r}: it "
        "would only make a generator and never run its body; spawn an async def function "
        "that iterates it with 'async for'"
    )


def kind_of(fn: Any, name: str | None, seed_shape: bool) -> tuple[OpKind, str | None]:
    """What kind of operation ``fn`` makes, and its name (``name``, as given).

    ``new_operation`` reads the code flags of a plain ``def`` or ``async
    def`` function itself, and asks here about anything else.

    Raises:
        TypeError: ``fn`` is not callable, is a coroutine object (a call already
            made), or is an async generator function.
    """
    if not callable(fn):
        what = "callback" if seed_shape else "function"
        label = f"operation {name!r}" if isinstance(name, str) else "an operation"
        let_go((fn,))  # refused: it must not warn "never awaited" besides
        if isinstance(fn, CoroutineType):
            # run(main()) or spawn(fetch(x)), the asyncio habit.
            raise TypeError(
                f"cannot make {label} from coroutine object {fn.__qualname__}(), "
                f"a call already made; pass the async def function itself, as in "
                f"run({fn.__name__}) or spawn({fn.__name__}, arg), instead of "
                f"{fn.__name__}(...)"
            )
        if isinstance(fn, WaitEvent):
            raise TypeError(
                f"cannot make {label} from asyncop awaitable {describe_event(fn)}, which is "
                "not a function; await it in a task instead, or spawn an async def "
                "function that awaits it"
            )
        raise TypeError(
            f"cannot make {label} from {safe_repr(fn)}: the {what} is not callable; "
            "pass a function (def or async def)"
        )
    else:
        body = code_of_call(fn)
        if inspect.iscoroutinefunction(body) or _makes_a_task(body):
            kind = OpKind.CORO
        elif inspect.isasyncgenfunction(body):
            raise _async_generator_refused(fn)
        else:
            kind = OpKind.SYNC
    return kind, name


def _makes_a_task(body: object) -> bool:
    """Whether ``body`` (or the function of a bound method) is one of ``TASK_MAKERS``.

    Compared by identity: ``==`` and hashing are a user object's to define,
    and may raise.
    """
    func = getattr(body, "__func__", body) if inspect.ismethod(body) else body
    return any(func is maker for maker in TASK_MAKERS)


def code_of_call(fn: object) -> object:
    """What runs when ``fn`` is called, to tell an async one apart; never raises.

    A ``functools.partial`` runs the function it wraps, and an object with a
    ``__call__`` of its own runs that method: an instance whose ``__call__``
    is an ``async def`` makes a coroutine task, as trio would run it.
    """
    try:
        while isinstance(fn, functools.partial):  # (a partial's func exists before it)
            fn = fn.func
        if callable(fn) and not inspect.isroutine(fn) and not isinstance(fn, type):
            call = inspect.getattr_static(type(fn), "__call__", None)
            if inspect.isfunction(call):
                return call
    except Exception:  # a __getattr__ that raises
        pass
    return fn
