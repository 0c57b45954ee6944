"""The public ``Runtime``: the kernel, its threads, and the user's calls.

``Runtime`` builds on :class:`~asyncop.runtime._core._kernel.Kernel`, which holds
the state every part of the runtime shares (the lock, the ready queues, the
timer heap, the workers) and the calls the modules below it use. This
module adds what a user meets: starting and stopping the threads, making
and running operations (``create``, ``submit``, ``spawn``, ``run``,
``scope``), ``shutdown`` (and the callbacks of ``at_shutdown``),
``snapshot`` and ``dump`` (read in ``_snapshot.py``), the live console
a runtime may serve (``_console.py``), and the async generator hooks of its
worker threads (``_asyncgens.py``). The work cycle is in ``_worker.py``
and ``_monitor.py``.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Literal, overload

from ..operations import (
    SPAWN_KEYWORDS,
    AsyncOperation,
    C,
    OperationState,
    R,
    Ts,
    check_flag,
    keywords_refused,
    run_isolated,
    safe_repr,
    spawn_remote,
    thread_state,
)
from ..platform import check_timeout, cpu_count, serving
from ._asyncgens import AsyncGenerators
from ._console import Console, attach, console_path
from ._core._abandon import abandon_open_blocks
from ._core._clock import VirtualClock
from ._core._kernel import DEFAULT_EXTRA_THREADS, Kernel
from ._core._scope import Scope
from ._core._waker import let_go
from ._core._worker import Worker, join_by, monotonic, worker_main
from ._deadlock import check_deadlock_args
from ._executors._remote import RemoteExecutor
from ._interrupt import cancel_roots, shut_down, wait_for_tree
from ._shutdown_wait import (
    ask_roots,
    check_shutdown_grace,
    refuse_shutdown_from_inside,
    wait_for_roots,
)
from ._snapshot import render_dump, take_snapshot

if TYPE_CHECKING:
    import asyncio

    from ._asyncio_host import AsyncioHost

__all__ = ["Runtime"]

logger = logging.getLogger("asyncop")

# How long interpreter exit waits for cancelled work before abandoning it.
EXIT_GRACE = 1.0
# The most worker threads a Runtime takes, far more than any CPU count: a larger
# number is a mistake (tasks, not threads) that would start threads until the OS refuses.
MAX_WORKERS = 1024
_INF = float("inf")

_live_runtimes: weakref.WeakSet[Runtime] = weakref.WeakSet()


def _shutdown_all_at_exit() -> None:
    # The script may end inside a scope's block that the main thread entered
    # and never left (rt.scope().__enter__()): that block ends here, so that
    # shutdown() does not refuse to wait for it, and its tree is cancelled.
    abandon_open_blocks(thread_state(), "the interpreter is exiting")
    # One grace period for every runtime together: exit must stay prompt
    # however many runtimes were left running.
    end = time.monotonic() + EXIT_GRACE
    for runtime in list(_live_runtimes):
        try:
            runtime.shutdown(cancel=True, timeout=max(0.0, end - time.monotonic()))
        except Exception:  # pragma: no cover - exit must not fail
            logger.exception("asyncop: shutting down %r at exit failed", runtime)


atexit.register(_shutdown_all_at_exit)


def live_runtimes() -> list[Runtime]:
    """The runtimes not yet shut down."""
    return list(_live_runtimes)


def _check_workers(workers: object) -> int:
    """The number of worker threads: ``workers``, or the CPU count for None."""
    if workers is None:
        return cpu_count()
    if isinstance(workers, bool) or not isinstance(workers, int):
        raise TypeError(
            f"Runtime(workers=...) needs an int, got {type(workers).__name__}; "
            "pass a positive number of threads, or None for the CPU count"
        )
    if workers < 1:
        raise ValueError(
            f"Runtime(workers={workers}) needs at least one worker thread; "
            "pass a positive number, or None for the CPU count"
        )
    if workers > MAX_WORKERS:
        raise ValueError(
            f"Runtime(workers={workers}) asks for more than {MAX_WORKERS} worker "
            "threads; pass a smaller number (blocking calls belong in "
            "spawn_blocking, not in extra workers)"
        )
    return workers


def _check_max_threads(max_threads: object, workers: int) -> int:
    """The worker-thread cap: ``max_threads``, or the default for ``workers``."""
    if max_threads is None:
        return workers + DEFAULT_EXTRA_THREADS
    if isinstance(max_threads, bool) or not isinstance(max_threads, int):
        raise TypeError(
            f"Runtime(max_threads=...) needs an int, got {type(max_threads).__name__}; "
            "pass a number of threads at least as large as workers, or None"
        )
    if max_threads < workers:
        raise ValueError(
            f"Runtime(max_threads={max_threads}) is below workers={workers}: the cap "
            "counts the regular workers too; pass at least the number of workers, or None"
        )
    return max_threads


def _check_loop_factory(factory: object) -> None:
    """Refuse an ``asyncio_loop_factory`` that is neither callable nor None."""
    if factory is None or callable(factory):
        return
    got = (
        "an event loop, not the function that makes one"
        if hasattr(factory, "run_until_complete")
        else f"{type(factory).__name__} {safe_repr(factory)}, which is not callable"
    )
    raise TypeError(
        f"Runtime(asyncio_loop_factory=...) got {got}; pass a function that returns a new "
        "event loop, such as uvloop.new_event_loop, or None for asyncio.new_event_loop"
    )


class Runtime(Kernel):
    """An asyncop runtime: worker threads, a ready queue and a timer heap.

    Args:
        workers: the number of worker threads; defaults to the CPU count.
            At most this many sync callbacks run at once.
        name: shown in thread names and ``repr``.
        clock: a clock with ``now()``; ``asyncop.testing.VirtualClock`` for
            tests. Defaults to the monotonic clock.
        parallel: let coroutine steps run on several workers at once (for
            free-threaded CPython). By default no two steps of the runtime
            overlap: the code of a task between two awaits is atomic with
            respect to every other task, as in asyncio and trio.
        max_threads: the most worker threads that run sync callbacks,
            regular and replacement ones (started while workers are held by
            long work); defaults to ``workers + 8``. At the cap, callbacks
            wait and one WARNING says so. Tasks never wait for a callback:
            while every worker runs one, a single thread past the cap steps
            the tasks, and leaves once a worker is free again.
        asyncio_loop_factory: a function that returns a new asyncio event
            loop, for the host loop that ``asyncop.asyncio_bridge`` runs
            asyncio code on (``uvloop.new_event_loop``, say); called on the
            loop's own thread when the first bridge call starts it. Defaults
            to ``asyncio.new_event_loop``.
        console: the path of a Unix socket on which to serve read-only
            snapshots of the runtime, for ``python -m asyncop ps|tree|top
            PATH``; made with mode 0600, removed at shutdown. Defaults to
            the environment variable ``ASYNCOP_CONSOLE``, if set. Runtimes
            of one process given the same path share its socket.
        deadlock: when every task waits and nothing can wake one for
            ``deadlock_after`` seconds (0 or more; at once on an autojumping
            clock): ``"warn"`` logs the wait-for graph once, ``"raise"``
            cancels the tree and ``run()`` raises ``DeadlockError``, ``"off"``
            neither, nor the lock-cycle check (see ``_deadlock.py``).

    Raises:
        ValueError: ``workers`` is less than 1 or more than ``MAX_WORKERS``
            (1024), ``max_threads`` is below ``workers``, ``deadlock`` is
            not a mode, or ``deadlock_after`` is negative or NaN.
        TypeError: ``workers`` or ``max_threads`` is not an integer,
            ``parallel`` is not a bool, ``asyncio_loop_factory`` is not
            callable, ``deadlock`` is not a str or ``deadlock_after`` not a
            number.
        RuntimeError: the OS refused to start a thread; the threads already
            started are stopped first.
        FileExistsError: the ``console`` path exists and is not a stale
            socket (one nobody serves on any more, which is replaced).
        OSError: the console socket cannot be made there.
        ValueError, TypeError: (also) ``console`` is empty, too long for a
            Unix socket, or not a str or ``os.PathLike`` path.

    Use it as a context manager: leaving the block calls ``shutdown()``.
    With ``ASYNCOP_DYNAMIC_WORKERS=1`` in the environment, workers start on
    demand up to ``workers``, and those idle for a while retire.
    """

    def __init__(
        self,
        workers: int | None = None,
        *,
        name: str | None = None,
        clock: Any = None,
        parallel: bool = False,
        max_threads: int | None = None,
        asyncio_loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
        console: str | os.PathLike[str] | None = None,
        deadlock: Literal["warn", "raise", "off"] = "warn",
        deadlock_after: float = 1.0,
    ) -> None:
        workers = _check_workers(workers)
        console_at = console_path(console, "Runtime")
        _check_loop_factory(asyncio_loop_factory)
        mode, after = check_deadlock_args(deadlock, deadlock_after)
        if not isinstance(parallel, bool):
            raise TypeError(
                f"Runtime(parallel=...) needs True or False, got {type(parallel).__name__}; "
                "pass parallel=True to let coroutine steps overlap, or leave it out"
            )
        Kernel.__init__(
            self,
            workers,
            name=name if name is not None else f"asyncop-{id(self):x}",
            clock=clock,
            parallel=parallel,
            max_threads=_check_max_threads(max_threads, workers),
            deadlock=mode,
            deadlock_after=after,
        )
        self._asyncio_loop_factory = asyncio_loop_factory
        # The host loop of asyncop.asyncio_bridge, made by its first call
        # (_asyncio_host.py), and closed by shutdown() once the tree has ended.
        self._asyncio_host: AsyncioHost | None = None
        # The async generators its tasks iterate, closed when dropped or at
        # shutdown (_asyncgens.py); its hooks are on every worker thread.
        self._asyncgens = AsyncGenerators(self)
        if isinstance(self._clock, VirtualClock):
            self._clock._subscribe(self)
        self._console: Console | None = None
        try:
            with self._lock:
                for _ in range(1 if self._dynamic else workers):
                    self._start_worker_locked(extra=False)
                self._monitor.start()
            if console_at is not None:
                self._console = attach(self, console_at)
        except BaseException:
            # Half built (the OS refused a thread, or a Ctrl-C): nobody can
            # reach this runtime to shut it down, so stop what did start.
            self.shutdown(timeout=EXIT_GRACE)
            raise
        _live_runtimes.add(self)

    @property
    def workers(self) -> int:
        """The target number of worker threads."""
        return self._target

    # The callback gets the operation and the context; without a context it
    # gets None. An async def callback gives its coroutine's value.

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

    def create(
        self,
        callback: Callable[..., Any],
        context: Any = None,
        *,
        parent: AsyncOperation | None = None,
        name: str | None = None,
    ) -> AsyncOperation[Any]:
        """Make an operation that will run ``callback(operation, context)``.

        The operation is CREATED: nothing runs until ``submit(op)``. With a
        ``parent``, it is linked under it at once, so cancelling the parent
        cancels it even before it is submitted.

        Raises:
            TypeError: ``callback`` is not callable.
            RuntimeError: ``parent`` has ended or belongs to another runtime.
        """
        op = self._new_operation(callback, (), parent=parent, name=name, seed_shape=True)
        if op._outcome is None:
            op._args = (op, context)
        return op

    def submit(self, op: AsyncOperation[R]) -> AsyncOperation[R]:
        """Queue a CREATED operation for a worker; returns it.

        Raises:
            RuntimeError: the operation was already submitted, was cancelled,
                has ended, is a scope, belongs to another runtime, or the
                runtime is shut down.
        """
        self._submit(op)
        return op

    # As AsyncOperation.spawn: *args checked against fn, AsyncOperation[R]
    # for a function or an async def returning R.

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

    def spawn(
        self,
        fn: Callable[[*Ts], Any],
        *args: *Ts,
        name: str | None = None,
        supervise: bool = False,
        executor: object = None,
        abandon: bool = False,
        **keywords: Any,
    ) -> AsyncOperation[Any]:
        """Make and submit a top-level operation that runs ``fn(*args)``.

        A plain function runs on a worker thread; an ``async def`` function
        runs as a coroutine task. Inside an operation's code, spawn children
        with ``op.spawn`` (or ``current_operation().spawn``) instead, so that
        they belong to the tree. With ``executor`` (and ``abandon``), ``fn``
        runs there; see ``AsyncOperation.spawn``. Keyword arguments for
        ``fn`` go through ``functools.partial(fn, key=value)``.

        Raises:
            TypeError: ``fn`` is not callable, a keyword argument is meant
                for ``fn``, ``supervise`` is not a bool, or (with an
                executor) ``fn`` or an argument cannot be pickled.
            RuntimeError: the runtime is shut down.
        """
        if keywords and callable(fn):  # (else refused below, for what fn is)
            raise keywords_refused("spawn", fn, keywords, SPAWN_KEYWORDS)
        if supervise is not False and supervise is not True:
            check_flag(supervise, "Runtime.spawn(supervise=...)")
        if isinstance(executor, RemoteExecutor):  # (spawn_remote's common case, one call less)
            return executor._spawn_into(
                self, None, fn, args, name=name, supervise=supervise, abandon=abandon
            )
        if executor is not None or abandon:
            return spawn_remote(
                self,
                None,
                fn,
                args,
                name=name,
                supervise=supervise,
                executor=executor,
                abandon=abandon,
            )
        return self._new_operation(
            fn, args, parent=None, name=name, submit=True, supervise=supervise
        )

    @overload
    def run(self, fn: Callable[[*Ts], Coroutine[Any, Any, R]], *args: *Ts) -> R: ...

    @overload
    def run(self, fn: Callable[[*Ts], R], *args: *Ts) -> R: ...

    def run(self, fn: Callable[[*Ts], Any], *args: *Ts, **keywords: Any) -> Any:
        """Run ``fn(*args)`` as a root operation, wait, and return its value.

        Like ``trio.run``: the call blocks until the operation and all its
        children have ended. A KeyboardInterrupt while waiting cancels the
        tree, waits for it to end, and is re-raised; a second one gets out
        at once, giving up on the runtime (see ``shutdown``). Keyword
        arguments for ``fn`` go through ``functools.partial(fn, key=value)``.

        Raises:
            BaseException: the operation's failure.
            CancellationError: the operation was cancelled.
            DeadlockError: with ``deadlock="raise"``, the runtime was stuck
                and the tree was cancelled (bare, never in a group).
            KeyboardInterrupt: a Ctrl-C, with a note (PEP 678) that shows
                the tree as it was when it arrived.
            TypeError: ``fn`` is not callable, or a keyword argument is
                meant for ``fn``.
        """
        if keywords and callable(fn):  # (else refused by spawn(), for what fn is)
            raise keywords_refused("run", fn, keywords, ())
        if thread_state().task is not None:
            let_go((fn,))  # refused: it must not warn "never awaited" besides
            raise RuntimeError(
                f"Runtime {self.name!r}.run() would block a worker inside a coroutine; "
                "write 'await runtime.spawn(fn)' instead"
            )
        # On the main thread, calls the work hands it (installing signal
        # handlers) are taken from the start, and run by the wait.
        with serving():
            op = self.spawn(fn, *args)
            self._deadlocks.claim(op)  # stuck before the wait below: still ours to raise
            op._check_can_block("Runtime.run()")
            wait_for_tree(op)
        deadlock = self._deadlocks.take_error(op)
        if deadlock is not None:
            raise deadlock from (op.error if op.state is OperationState.FAILED else None)
        return op.result()

    def scope(
        self,
        *,
        name: str | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        shield: bool = False,
        supervise: bool = False,
    ) -> Scope:
        """Open a nursery-style block: ``with runtime.scope() as root:``.

        The block is the scope operation's own work; children spawned with
        ``root.spawn`` run concurrently, and the block's exit waits for all
        of them. See the scopes section of the concepts guide for every rule.

        Args:
            name: the scope operation's name.
            timeout: seconds from now after which the scope is cancelled.
            deadline: an absolute time (``runtime.now()`` clock) for the same.
            shield: a cancel from above does not enter the scope.
            supervise: a failing child neither cancels its siblings nor makes
                the block raise; its error stays on the child. Both flags
                take True or False only (else TypeError).
        """
        return Scope(
            self,
            name=name,
            timeout=timeout,
            deadline=deadline,
            shield=shield,
            supervise=supervise,
        )

    def registrations(self) -> int:
        """Count the live wake-up registrations: armed timers, I/O waits, parked wakers."""
        with self._lock:
            return len(self._timers) + self._extra_registrations_locked()

    def snapshot(self) -> dict[str, Any]:
        """Return the runtime and its live operations as plain data.

        A dict of the runtime's fields (``name``, ``now``, ``threads``,
        ``warnings``...) whose ``operations`` is a list of dicts, one per
        live operation, pre-order: ``id``, ``parent``, ``name``, ``kind``,
        ``state``, ``waiting_on``, ``steps``, ``busy_s``, ``cpu_s``,
        ``age_s``, its deadline and cancel reason, and more. Every value is
        a str, number, bool, None, list or dict, ready for ``json.dumps``;
        the how-to on the console lists every field. Read in one walk under
        the runtime lock, so the rows agree with each other; never raises.
        Not a cancellation point.
        """
        return take_snapshot(self)

    def dump(self) -> str:
        """Return the live operation tree as indented text, one node per line.

        The text of ``snapshot()``: each operation with its state, where it
        was made, its cancel, deadline and what it waits on; a
        ``spawn_blocking`` call in flight under the task awaiting it; the
        runtime's warnings; and last the thread counts. Each level indents
        by two spaces, up to ``DUMP_INDENT`` (32) levels; a node deeper than that
        shows its depth instead (``(depth 153)``), so the text stays linear
        in the size of the tree however deep it is. A cancel reason or a
        wait whose ``str()`` raises is shown by its type. Never raises.
        """
        return render_dump(take_snapshot(self))

    def shutdown(
        self, cancel: bool = True, timeout: float | None = None, *, grace: float | None = None
    ) -> bool:
        """Stop the runtime: cancel live work, wait for it, join the threads.

        Not a cancellation point. Callable again: a second call waits for
        what the first left running. With ``grace``, the live work is first
        asked to stop, as by ``op.cancel(grace=...)`` on every root: it
        sees ``asyncop.stop_requested()`` and may end by itself, COMPLETED;
        what still runs when the grace runs out (on the runtime's clock)
        is cancelled. Once the work has ended, the async generators its
        tasks left unfinished are closed, their ``finally`` run to its end
        in tasks of the runtime, before the threads stop. A wait that lasts
        logs what it waits for (WARNING lines on the ``asyncop`` logger,
        every few seconds), and so does a timeout that passes first.

        A KeyboardInterrupt while it waits cancels everything again and is
        raised once the shutdown is done. A second one (or a first while
        one is handled, as in the exit of ``with Runtime()`` it leaves)
        gives up: the runtime stops without waiting, and the threads still
        running operation code are abandoned and named in a WARNING. Later
        calls wait for them only as long as an explicit ``timeout`` says.

        Args:
            cancel: cancel every live operation first; with False, wait for
                the work to end by itself.
            timeout: seconds to wait at most, for the work and the threads
                together; None, ``inf`` or a value of 1e9 or more waits as
                long as it takes, and 0 or less does not wait. Work only
                asked to stop when it passes is cancelled then.
            grace: seconds the live work has to stop by itself before it is
                cancelled; None (the default) or 0 cancel at once, and
                ``inf`` only asks. Needs ``cancel=True``.

        Returns:
            True if every operation ended and every thread was joined; False
            if the timeout passed first (the remaining threads are daemon
            threads and never keep the interpreter alive).

        Raises:
            TypeError: ``timeout`` or ``grace`` is not a number or None.
            ValueError: ``timeout`` is NaN, ``grace`` is NaN or negative,
                or ``grace`` comes with ``cancel=False``.
            RuntimeError: called from inside this runtime: one of its worker
                or blocking-call threads, or the block of one of its scopes,
                each of which the call would wait for forever.
        """
        limit = check_timeout(timeout, f"Runtime {self.name!r}.shutdown(timeout=...)")
        seconds = check_shutdown_grace(self.name, cancel, grace)
        refuse_shutdown_from_inside(self)
        return shut_down(self, cancel, limit, seconds)

    def at_shutdown(self, callback: Callable[[*Ts], object], *args: *Ts) -> None:
        """Call ``callback(*args)`` when the runtime shuts down.

        For libraries that keep something per runtime and must release it
        with the runtime (a pool of worker processes, say). The callbacks
        run once, at the start of ``shutdown()`` (the one that leaving
        ``with Runtime()`` makes, too), on the thread that calls it, before
        the live operations are cancelled, the last registered first. They
        are sync, and the shutdown waits for them: keep them short. One that
        raises is logged on the ``asyncop`` logger, and the others still
        run. Not a cancellation point.

        Raises:
            TypeError: ``callback`` is not callable.
            RuntimeError: the runtime is shutting down or shut down.
        """
        if not callable(callback):
            raise TypeError(
                f"Runtime {self.name!r}.at_shutdown() needs a callable, got "
                f"{type(callback).__name__}; pass the function to call at shutdown"
            )
        with self._lock:
            if self._closing:
                raise RuntimeError(
                    f"Runtime {self.name!r}.at_shutdown() was called during or after its "
                    "shutdown, whose callbacks have run; release the resource now instead"
                )
            self._at_shutdown.append(functools.partial(callback, *args))

    def _shutdown(self, cancel: bool, limit: float | None, grace: float | None = None) -> bool:
        """One pass of ``shutdown()``; a KeyboardInterrupt stops it where it lands."""
        callbacks: list[Callable[[], object]] = []
        with self._lock:
            if self._transition_to_closing_locked():
                # The first pass takes the at_shutdown() callbacks, in the same
                # step (no call in between, where a Ctrl-C could land): none
                # is added once the runtime is CLOSING.
                callbacks, self._at_shutdown = self._at_shutdown[::-1], []
            roots = list(self._roots)
        run_isolated(callbacks, "a Runtime.at_shutdown() callback")
        end = None if limit is None else monotonic() + limit
        if cancel and grace is not None:
            ask_roots(self, roots, grace)
        elif cancel:
            cancel_roots(roots)
        ended = wait_for_roots(self, roots, end)
        if not ended and cancel and grace is not None:
            cancel_roots(roots)  # what was only asked to stop: nothing stays asked
        if ended:  # (a generator still in use by a task is not closed under it)
            ended = self._asyncgens.close_all(end)
        with self._lock:
            self._transition_to_stopped_locked()
            # (Read with the stop: no host is made for a stopped runtime.)
            host = self._asyncio_host
            workers = list(self._workers)
            leaving = list(self._leaving)
            for worker in workers:
                worker.event.set()
            if self._poller is not None and self._reactor is not None:
                self._reactor.wake_poller()
            monitor = self._monitor.stop()
        if host is not None and not host.shutdown(end):
            ended = False
        for handle in leaving:
            if not join_by(handle, end):
                ended = False
        for worker in workers:
            if worker.handle is not None and not join_by(worker.handle, end):
                ended = False
        if monitor is not None and not join_by(monitor, end):
            ended = False
        if not self._blocking.shutdown(end):
            ended = False
        reactor = self._reactor
        if reactor is not None and not reactor.shutdown(end):
            ended = False
        # Last: while the shutdown waits, the console shows what it waits for.
        if self._console is not None and not self._console.detach(self, end):
            ended = False
        if isinstance(self._clock, VirtualClock):
            self._clock._unsubscribe(self)
        _live_runtimes.discard(self)
        return ended

    def _run_worker(self, worker: Worker) -> None:
        """The body of a worker thread, with the async generator hooks installed."""
        with self._asyncgens.installed():
            worker_main(self, worker)

    def __enter__(self) -> Runtime:
        if self._closing:
            raise RuntimeError(
                f"'with' on Runtime {self.name!r}, which is shut down; make a new Runtime"
            )
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        state = self._state.value
        mode = " parallel" if self._parallel else ""
        return f"<Runtime {self.name!r} {state} workers={self._target}{mode}>"
