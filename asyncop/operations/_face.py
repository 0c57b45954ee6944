"""What an operation knows of its runtime: the public face, as a protocol.

The operations package sits below the runtime in the import order and names
nothing of it, not even for type hints. ``AsyncOperation.runtime`` is typed
with :class:`RuntimeFace` instead: the public calls of ``asyncop.Runtime``
(which implements it), so that ``op.runtime.spawn(fn)``, ``op.runtime.dump()``
and the rest type-check as they do on a ``Runtime``, and the calls the node
itself makes into its runtime (:class:`~asyncop.operations._hooks.RuntimeHooks`).

The signatures here are those of ``Runtime``, overloads included; a test
compares the two, so that neither drifts from the other.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import TYPE_CHECKING, Any, Never, Protocol, overload

from ._hooks import RuntimeHooks
from ._typing import C, R, Ts

if TYPE_CHECKING:
    from ._node import AsyncOperation

__all__ = ["RuntimeFace", "ScopeFace"]


class ScopeFace(Protocol):
    """What ``runtime.scope()`` returns: a ``with`` and ``async with`` block."""

    def start(
        self, fn: Callable[..., Any], *args: Any, name: str | None = None, **keywords: Never
    ) -> Any: ...

    def __enter__(self) -> AsyncOperation[None]: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...

    async def __aenter__(self) -> AsyncOperation[None]: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...


class RuntimeFace(RuntimeHooks, Protocol):
    """The runtime an operation belongs to, as ``op.runtime`` gives it.

    ``asyncop.Runtime`` is the one implementation; see its methods for what
    each call does.
    """

    name: str

    @property
    def workers(self) -> int: ...

    @overload
    def create(
        self,
        callback: Callable[[AsyncOperation[Any], C], Coroutine[Any, Any, R]],
        context: C,
        *,
        parent: AsyncOperation[Any] | None = None,
        name: str | None = None,
    ) -> AsyncOperation[R]: ...

    @overload
    def create(
        self,
        callback: Callable[[AsyncOperation[Any], None], Coroutine[Any, Any, R]],
        *,
        parent: AsyncOperation[Any] | None = None,
        name: str | None = None,
    ) -> AsyncOperation[R]: ...

    @overload
    def create(
        self,
        callback: Callable[[AsyncOperation[Any], C], R],
        context: C,
        *,
        parent: AsyncOperation[Any] | None = None,
        name: str | None = None,
    ) -> AsyncOperation[R]: ...

    @overload
    def create(
        self,
        callback: Callable[[AsyncOperation[Any], None], R],
        *,
        parent: AsyncOperation[Any] | None = None,
        name: str | None = None,
    ) -> AsyncOperation[R]: ...

    def submit(self, op: AsyncOperation[R]) -> AsyncOperation[R]: ...

    @overload
    def spawn(
        self,
        fn: Callable[[*Ts], Coroutine[Any, Any, R]],
        *args: *Ts,
        name: str | None = None,
        supervise: bool = False,
        executor: object = None,
        abandon: bool = False,
    ) -> AsyncOperation[R]: ...

    @overload
    def spawn(
        self,
        fn: Callable[[*Ts], R],
        *args: *Ts,
        name: str | None = None,
        supervise: bool = False,
        executor: object = None,
        abandon: bool = False,
    ) -> AsyncOperation[R]: ...

    @overload
    def run(self, fn: Callable[[*Ts], Coroutine[Any, Any, R]], *args: *Ts) -> R: ...

    @overload
    def run(self, fn: Callable[[*Ts], R], *args: *Ts) -> R: ...

    def scope(
        self,
        *,
        name: str | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        shield: bool = False,
        supervise: bool = False,
    ) -> ScopeFace: ...

    def registrations(self) -> int: ...

    def snapshot(self) -> dict[str, Any]: ...

    def dump(self) -> str: ...

    def shutdown(
        self, cancel: bool = True, timeout: float | None = None, *, grace: float | None = None
    ) -> bool: ...

    def at_shutdown(self, callback: Callable[[*Ts], object], *args: *Ts) -> None: ...

    def add_instrument(self, obj: object) -> None: ...

    def remove_instrument(self, obj: object) -> None: ...
