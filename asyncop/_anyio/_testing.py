"""anyio's test runner on asyncop: what ``anyio_backend = "asyncop"`` runs tests with.

anyio's pytest plugin makes one runner per test (fixtures of wider scope
keep theirs) and calls it from pytest's thread for each async fixture, each
``yield`` fixture's two halves and the test. As trio's runner does, every
call runs in one long-lived *runner task* of one runtime, awaited in turn:
a context variable a fixture sets is seen by the test, and an async
generator fixture is resumed in the task that started it. The calls reach
the runner task through an asyncop ``Channel``, which a plain thread can
send on; the thread then steps the runtime's tasks until the call is done,
as the thread of ``anyio.run()`` does (``runtime/_home.py``): the test runs
on pytest's thread, which also does what another thread hands the main
thread meanwhile, such as installing the handlers of a signal receiver.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Coroutine, Iterable
from types import TracebackType
from typing import Any, TypeVar

from anyio.abc import TestRunner as BaseTestRunner

from .. import lowlevel
from ..operations import AsyncOperation, EndOfChannel
from ..platform import WakeEvent, serving
from ..runtime import Channel, Runtime, drive_home
from ._options import runtime_for

__all__ = ["TestRunner"]

T = TypeVar("T")


class _Call:
    """One call for the runner task, and its outcome once done."""

    __slots__ = ("args", "done", "error", "fn", "kwargs", "value")

    def __init__(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        # Waited for in asyncop's slices: the main thread, waiting here, does
        # what a task hands it (installing a signal receiver's handlers).
        self.done = WakeEvent()
        self.value: Any = None
        self.error: BaseException | None = None

    def outcome(self) -> Any:
        error = self.error
        if error is not None:
            self.error = None
            try:
                raise error
            finally:
                del error
        return self.value


class TestRunner(BaseTestRunner):
    """Runs a test's async fixtures and the test in one asyncop task; see the module docstring."""

    __test__ = False  # (not a test class, for pytest)

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._runtime: Runtime | None = None
        self._made = False
        self._calls: Channel[_Call] | None = None
        self._task: AsyncOperation[None] | None = None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        runtime, calls, task = self._runtime, self._calls, self._task
        self._runtime = self._calls = self._task = None
        if runtime is None:
            return
        try:
            if calls is not None:
                calls.close()
            if task is not None:
                task.wait()
        finally:
            if self._made:
                runtime.shutdown()

    def is_running(self) -> bool:
        """Whether the caller runs in the runner task (a fixture asking for another)."""
        task = self._task
        return task is not None and lowlevel.current_task() is task

    def _start(self) -> Channel[_Call]:
        runtime, self._made = runtime_for(dict(self._options))
        self._runtime = runtime
        # One call at a time, sent without waiting: the thread that sends
        # it then steps the runner task (runtime/_home.py).
        calls: Channel[_Call] = Channel(1)
        self._calls = calls
        self._task = runtime.spawn(_serve, calls, name="anyio test runner")
        return calls

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        calls = self._calls if self._calls is not None else self._start()
        call = _Call(fn, args, kwargs)
        runtime = self._runtime
        assert runtime is not None
        with serving():  # (from the send on: the test may hand the main thread work)
            # This thread steps the runner task until the call is done, as the
            # thread of anyio.run() does its tasks; a Ctrl-C gets out at once.
            if drive_home(runtime, call.done.is_set, lambda: calls.try_send(call)):
                raise KeyboardInterrupt  # (a Ctrl-C stopped it)
            call.done.wait()
        return call.outcome()

    def run_asyncgen_fixture(
        self,
        fixture_func: Callable[..., AsyncGenerator[T, Any]],
        kwargs: dict[str, Any],
    ) -> Iterable[T]:
        asyncgen = fixture_func(**kwargs)
        value: T = self._call(asyncgen.asend, None)
        yield value
        try:
            self._call(asyncgen.asend, None)
        except StopAsyncIteration:
            pass
        else:
            self._call(asyncgen.aclose)
            raise RuntimeError(
                "Async generator fixture did not stop; yield once, then let it return"
            )

    def run_fixture(
        self,
        fixture_func: Callable[..., Coroutine[Any, Any, T]],
        kwargs: dict[str, Any],
    ) -> T:
        value: T = self._call(fixture_func, **kwargs)
        return value

    def run_test(
        self, test_func: Callable[..., Coroutine[Any, Any, Any]], kwargs: dict[str, Any]
    ) -> None:
        self._call(test_func, **kwargs)


async def _serve(calls: Channel[_Call]) -> None:
    """The runner task: await each call in turn, in this one task."""
    while True:
        try:
            call = await calls.recv_async()
        except EndOfChannel:
            return
        try:
            call.value = await call.fn(*call.args, **call.kwargs)
        except BaseException as exc:  # handed to the caller's thread, raised there
            call.error = exc
        finally:
            call.done.set()
            del call
