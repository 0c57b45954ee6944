"""The Ctrl-C rule: a first KeyboardInterrupt cancels and waits, a second one gets out.

::

    with asyncop.Runtime() as runtime:
        runtime.run(main)   # Ctrl-C: main's tree is cancelled, run() waits for it
                            # Ctrl-C again: run() stops waiting and raises at once

The first KeyboardInterrupt that reaches a wait of the runtime (``run()``, a
sync scope's exit, ``shutdown()``, the exit of ``with Runtime()``, a
blocking ``start()``) cancels the tree it waits for and keeps waiting, so
that every ``finally`` and cleanup in the tree runs; the KeyboardInterrupt
is raised once the tree has ended. Code that ignores its cancel token (a
plain function in ``time.sleep(30)``, a busy loop) would make that wait
last as long as it does, so a second KeyboardInterrupt, anywhere in the
wait, *gives up* on the runtime:

- the wait stops at once and the second KeyboardInterrupt propagates (with
  the first as its ``__context__``);
- every live operation is cancelled, the runtime takes no new work and its
  threads are told to stop, without waiting for any of them;
- the threads still running operation code are abandoned: they are daemon
  threads, so interpreter exit does not wait for them, and one WARNING on
  the ``asyncop`` logger names each of them and what it runs;
- every later wait of the runtime (``shutdown()``, ``with Runtime()``'s
  exit, interpreter exit, a scope's exit) returns at once instead of
  waiting for the abandoned work again; only an explicit
  ``shutdown(timeout=...)`` still waits for it, that long at most.

The KeyboardInterrupt that leaves ``run()`` (or a sync scope's exit) carries
a note (PEP 678) with the runtime's ``dump()`` taken when the first one
arrived, before the cancel changed the tree: Ctrl-C on a hang shows where
every task waited (``tree_note``).

Which KeyboardInterrupt is the first
------------------------------------
Each wait counts for itself, plus one case where the first Ctrl-C came
before the wait began: ``shutdown()`` called while a KeyboardInterrupt is
being handled (the exit of ``with Runtime()`` that a Ctrl-C is leaving, or
an ``except``/``finally`` clause it runs) counts that one as the first, so
the next one there gives up. A sync scope's exit does the same for a
KeyboardInterrupt raised by its block. Otherwise a Ctrl-C after an earlier
one was fully handled (its tree ended, the program caught it and carried
on) is a first one again.

Nothing here is lost to a Ctrl-C that lands inside it: a cancel it cuts
short is redone (``again=True``) by the next wait or by giving up, and
giving up finishes all its steps whatever lands meanwhile.
"""

from __future__ import annotations

import logging
import sys
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ..operations import AsyncOperation, OpKind, ThreadState, TreeWait, run_after, state_of
from ._introspect import owner_of

if TYPE_CHECKING:
    from ..operations import After
    from ._scheduler import Runtime

__all__ = [
    "add_tree_note",
    "cancel_roots",
    "gave_up",
    "give_up",
    "interrupt_tree",
    "shut_down",
    "tree_note",
    "wait_after_interrupt",
    "wait_for_tree",
]

logger = logging.getLogger("asyncop")

T = TypeVar("T")
# How often a step of giving up is tried while Ctrl-C keeps landing in it.
_TRIES = 5

# The runtimes a second Ctrl-C gave up on: their waits no longer wait.
_given_up: weakref.WeakSet[Runtime] = weakref.WeakSet()


def gave_up(runtime: Runtime) -> bool:
    """Whether a second Ctrl-C gave up on ``runtime``'s work."""
    return runtime in _given_up


def interrupt_tree(op: AsyncOperation) -> None:
    """Cancel ``op``'s tree for a Ctrl-C, completing any cancel a Ctrl-C tore.

    A Ctrl-C that landed inside an earlier ``cancel()`` can leave nodes
    marked cancelled whose children were never reached; the plain walk
    skips marked nodes, so this one goes everywhere a cancel goes.
    """
    after: After = []
    try:
        with op.runtime._lock:
            op._cancel_locked("KeyboardInterrupt", after, again=True)
    finally:
        run_after(after)


def wait_for_tree(op: AsyncOperation) -> None:
    """Wait until ``op`` and its children have ended (``Runtime.run()``).

    Raises:
        KeyboardInterrupt: a first one once the cancelled tree has ended, or
            a second one at once, which gave up on the runtime; either with
            the note of :func:`tree_note`.
    """
    try:
        op._block_until_final(None, None, TreeWait(op, "run()"))
    except KeyboardInterrupt as first:
        note = tree_note(op)  # before the cancel changes the tree
        try:
            wait_after_interrupt(op)
        except KeyboardInterrupt as second:
            add_tree_note(second, note)
            raise
        add_tree_note(first, note)
        raise


def tree_note(op: AsyncOperation) -> str | None:
    """The note for a KeyboardInterrupt that reached a wait for ``op``'s tree.

    The runtime's ``dump()`` as it is now, when the interrupt arrived: where
    every task waited, so that Ctrl-C on a hang shows where it hung. None if
    the dump failed (a Ctrl-C landing in it is dropped: the next one gets out).
    """
    try:
        dump = op.runtime.dump()
    except BaseException:
        return None
    return f"asyncop: the tree when the KeyboardInterrupt arrived (runtime.dump()):\n{dump}"


def add_tree_note(exc: BaseException, note: str | None) -> None:
    """Add ``note`` to ``exc`` (PEP 678), once."""
    if note is not None and note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)


def cancel_roots(roots: list[AsyncOperation]) -> None:
    """Cancel every root for a shutdown, whatever one of them raises.

    A failing ``on_cancel`` callback must not leave the rest of the tree
    running, nor the threads unjoined: it is logged, and the next root is
    cancelled. A KeyboardInterrupt (a Ctrl-C, or a callback's) is raised
    once every root is cancelled; ``shut_down`` then decides what it means.
    """
    interrupt: KeyboardInterrupt | None = None
    try:
        for root in roots:
            try:
                root.cancel("runtime shut down")
            except KeyboardInterrupt as exc:
                interrupt = interrupt or exc
            except BaseException:
                try:
                    logger.error("asyncop: cancelling %r at shutdown raised", root, exc_info=True)
                except BaseException:  # pragma: no cover - a broken handler or stream
                    pass
        if interrupt is not None:
            raise interrupt
    finally:
        del interrupt  # the traceback holds this frame


def wait_after_interrupt(op: AsyncOperation) -> None:
    """A first Ctrl-C reached a wait for ``op``: cancel its tree and wait for it.

    Raises:
        KeyboardInterrupt: a second one, which gave up on the runtime.
    """
    runtime = owner_of(op)
    if gave_up(runtime):
        return
    try:
        interrupt_tree(op)
        op._block_until_final(None, None, TreeWait(op, "run()"))
    except KeyboardInterrupt:
        give_up(runtime, op)
        raise


def shut_down(
    runtime: Runtime, cancel: bool, limit: float | None, grace: float | None = None
) -> bool:
    """``Runtime.shutdown()`` once its arguments are checked, under the Ctrl-C rule.

    Returns:
        What ``Runtime._shutdown`` returned the last time: whether
        everything ended and every thread was joined.

    Raises:
        KeyboardInterrupt: the first one, once the shutdown has finished,
            or a second one, which gave up on the runtime.
    """
    if gave_up(runtime):
        # No more waiting without limit for the abandoned work; an explicit
        # timeout still bounds a wait for it.
        return runtime._shutdown(True, 0.0 if limit is None else limit)
    end = None if limit is None else time.monotonic() + limit
    # A Ctrl-C already on its way out (the exit of `with Runtime()` it is
    # leaving, a finally clause) was the first: the next one gives up.
    seen = isinstance(sys.exc_info()[1], KeyboardInterrupt)
    first: KeyboardInterrupt | None = None
    try:
        while True:
            try:
                if first is not None:
                    cancel = True
                    for root in _roots(runtime):
                        interrupt_tree(root)
                left = None if end is None else max(0.0, end - time.monotonic())
                # (After a first Ctrl-C the trees are cancelled: no grace left.)
                ended = runtime._shutdown(cancel, left, None if first is not None else grace)
                break
            except KeyboardInterrupt as caught:
                if seen:
                    give_up(runtime)
                    raise
                seen = True
                first = caught
        if first is not None:
            raise first
        return ended
    finally:
        del first  # the traceback holds this frame


def give_up(runtime: Runtime, *trees: AsyncOperation) -> None:
    """A second Ctrl-C: stop waiting for ``runtime``'s work, for good.

    Cancels every live operation (and ``trees``, which a shield may keep
    out of their roots' cancel), names the threads still running operation
    code in one WARNING, and shuts the runtime down without waiting for
    anything. Never raises: a Ctrl-C landing meanwhile is dropped (the
    caller is raising one already), and each step is finished anyway.
    """
    if gave_up(runtime):
        return
    _given_up.add(runtime)
    for tree in trees:
        _finish(interrupt_tree, tree)
    # Named before the threads are told to stop, and once: a Ctrl-C that
    # cuts the warning short is not worth a second one.
    _finish(_warn, runtime, tries=1)
    _finish(_stop_now, runtime)


def _finish(step: Callable[[T], object], arg: T, tries: int = _TRIES) -> None:
    """Run one step of giving up, again if a Ctrl-C cuts it short; never raise."""
    for _ in range(tries):
        try:
            step(arg)
            return
        except KeyboardInterrupt:
            continue  # each step is idempotent
        except Exception:  # pragma: no cover - a bug, or a broken log handler
            try:
                logger.error("asyncop: giving up after a second Ctrl-C failed", exc_info=True)
            except BaseException:
                pass
            return


def _stop_now(runtime: Runtime) -> None:
    runtime._shutdown(True, 0.0)


def _roots(runtime: Runtime) -> list[AsyncOperation]:
    with runtime._lock:
        return list(runtime._roots)


def _warn(runtime: Runtime) -> None:
    """Log the one WARNING of giving up: the threads abandoned, and what they run."""
    threads = _stuck_threads(runtime)
    if threads:
        what = "; ".join(f"thread {name!r} running {work}" for name, work in threads)
        logger.warning(
            "asyncop: a second KeyboardInterrupt stopped the wait for runtime %r; "
            "abandoning %s still running operation code: %s. Daemon threads "
            "do not hold up interpreter exit; code that checks op.token, or waits "
            "with op.token.wait(), ends when cancelled",
            runtime.name,
            "1 thread" if len(threads) == 1 else f"{len(threads)} threads",
            what,
        )
        return
    live = [root for root in _roots(runtime) if not root.done]
    if live:
        logger.warning(
            "asyncop: a second KeyboardInterrupt stopped the wait for runtime %r; "
            "abandoning operations that have not ended: %s",
            runtime.name,
            ", ".join(_label(op) for op in live),
        )


def _stuck_threads(runtime: Runtime) -> list[tuple[str, str]]:
    """(thread name, what it runs) for each thread of ``runtime`` running work."""
    found: list[tuple[str, str]] = []
    with runtime._lock:
        handles = [worker.handle for worker in runtime._workers]
    for handle in handles:
        if handle is None or not handle.is_alive():
            continue
        state = state_of(handle.ident)
        work = None if state is None else _running(state)
        if work is not None:
            found.append((handle.name, work))
    found.extend(runtime._blocking.busy())
    return found


def _running(state: ThreadState) -> str | None:
    """What a worker thread runs now, read from another thread; None if nothing."""
    task = state.task
    if task is not None:
        return f"a step of task {_label(task.task)}"
    op = state.op
    if op is None:
        return None
    # A scope opened inside the callback: name the callback.
    while op._kind is OpKind.SCOPE and op.parent is not None:
        op = op.parent
    return f"operation {_label(op)}"


def _label(op: AsyncOperation) -> str:
    return f"{op.name!r} (spawned at {op.filename}:{op.lineno})"
