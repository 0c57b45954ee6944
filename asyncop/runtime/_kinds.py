"""What kind of operation a function makes: the checks ``spawn`` and ``create`` run first."""

from __future__ import annotations

import inspect
from inspect import CO_ASYNC_GENERATOR, CO_COROUTINE
from types import CoroutineType, FunctionType
from typing import Any

from ..operations import OpKind

__all__ = ["kind_of", "describe_fn"]

_CORO = OpKind.CORO
_SYNC = OpKind.SYNC


def _async_generator_refused(fn: object) -> TypeError:
    return TypeError(
        f"cannot make an operation from async generator function {describe_fn(fn)!r}: it "
        "would only make a generator and never run its body; spawn an async def function "
        "that iterates it with 'async for'"
    )


def describe_fn(fn: object) -> str:
    """A function's name for messages: its qualified name, or its repr."""
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def kind_of(fn: Any, name: str | None, seed_shape: bool) -> tuple[OpKind, str | None]:
    """What kind of operation ``fn`` makes, and its name when it is a plain function.

    Raises:
        TypeError: ``fn`` is not callable, is a coroutine object (a call already
            made), or is an async generator function.
    """
    if type(fn) is FunctionType:  # fast path: read the code flags
        flags = fn.__code__.co_flags
        if flags & CO_COROUTINE:
            kind = _CORO
        elif flags & CO_ASYNC_GENERATOR:
            raise _async_generator_refused(fn)
        else:
            kind = _SYNC
        if name is None:
            name = fn.__qualname__
    elif not callable(fn):
        what = "callback" if seed_shape else "function"
        label = f"operation {name!r}" if isinstance(name, str) else "an operation"
        if isinstance(fn, CoroutineType):
            # run(main()) or spawn(fetch(x)), the asyncio habit.
            fn.close()
            raise TypeError(
                f"cannot make {label} from coroutine object {fn.__qualname__}(), "
                f"a call already made; pass the async def function itself, as in "
                f"run({fn.__name__}) or spawn({fn.__name__}, arg), instead of "
                f"{fn.__name__}(...)"
            )
        raise TypeError(
            f"cannot make {label} from {fn!r}: the {what} is not callable; "
            "pass a function (def or async def)"
        )
    elif inspect.iscoroutinefunction(fn):
        kind = _CORO
    elif inspect.isasyncgenfunction(fn):
        raise _async_generator_refused(fn)
    else:
        kind = _SYNC
    return kind, name
