"""The base of every runtime: what an operation node reads and calls on it, in C.

The operations package sits below the runtime and imports nothing of it, so
a node knows its runtime (``op.runtime``) only as the :class:`RuntimeHooks`
protocol (``_hooks.py``). Read through a protocol, every call a node makes
on its runtime is a Python attribute lookup and a call: that costs every
operation several hundred instructions in each call it makes in its life:
the runtime making it (``spawn``), ending it (``_try_finalize_locked``) and,
if it is cancelled, waking its task (the cancel walk, ``_cancel.py``).

:class:`RuntimeBase` declares those calls and the fields they read here, in
the operations package, and the runtime's kernel extends it (its
``KernelFields``, ``runtime/_core/_fields.py``). Compiled (see
``hatch_build.py``), it is an extension type (``_owner.pxd``): a node's
``runtime`` is typed with it, so a node reads the lock and the clock as C
struct members, and ``_new_operation``, ``_on_final_locked`` and
``_on_cancel_running_locked`` are C methods that the runtime's core
overrides (``runtime/_core/_spawn.py``), so a node calls them through the
type's table of methods without naming the runtime's types. Run as
Python, it is a plain class with ``__slots__``, and the runtime's methods
override these as any subclass's do.

It holds declarations only: the runtime sets both fields in
``Kernel.__init__`` and says what they are there; the calls are described
on :class:`RuntimeHooks`, the protocol that types them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # (From its own module: compiled, _owner.pxd cimports it, and Cython
    # takes a Python import of a cimported type only from that module.)
    from ..platform._lock import RecursiveLock
    from ._hooks import After
    from ._node import AsyncOperation
    from ._state import OpKind

__all__ = ["RuntimeBase"]


# Compiled, an extension type (see _owner.pxd) that the runtime's KernelFields extends.
class RuntimeBase:
    """The runtime's fields and calls that an operation node uses: the base of every runtime."""

    __slots__ = ("_lock", "_stamp")

    _lock: RecursiveLock
    _stamp: Callable[[], float]

    def _new_operation(
        self,
        fn: Callable[..., Any] | None,
        args: tuple[Any, ...],
        parent: AsyncOperation | None,
        name: str | None,
        submit: bool = False,
        supervise: bool = False,
        kind: OpKind | None = None,
        shield: bool = False,
        seed_shape: bool = False,
        task: Any = None,
    ) -> AsyncOperation:
        """Make an operation and link it; the runtime's core implements it."""
        raise NotImplementedError

    def _on_final_locked(self, op: AsyncOperation, after: After, at: float | None = None) -> None:
        """The runtime's part of an operation's end; the runtime's core implements it."""
        raise NotImplementedError

    def _on_cancel_running_locked(self, op: AsyncOperation, after: After) -> bool:
        """The runtime's part of a cancel of unended work; the runtime's core implements it."""
        raise NotImplementedError
