"""The pytest plugin: run ``async def`` tests and fixtures on a fresh asyncop Runtime.

``pip install asyncop`` registers it (entry point ``pytest11``), as pytest-trio
and anyio do. Mark a test, or turn every async test over to it in the ini
file::

    @pytest.mark.asyncop
    async def test_fetch(autojump_clock):
        await asyncop.sleep(60)          # instant: the clock jumps

    # pytest.ini / pyproject.toml [tool.pytest.ini_options]
    asyncop_mode = "auto"

How a test runs
---------------
Each asyncop test gets its own ``Runtime`` (the ``asyncop_runtime``
fixture, which uses the ``autojump_clock`` fixture's ``VirtualClock`` when
the test requests it). The test function runs as the **root operation** of
that runtime, named after the test; ``current_operation()`` in it is that
root. After the function returns, the root waits for the children the test
spawned on it, as any operation does, and their failures fail the test.

The runtime is made with ``deadlock="raise"``: a test whose tasks all wait
for something nothing can do any more fails with ``DeadlockError`` and the
wait-for graph (after ``deadlock_after``, one second; at once with the
``autojump_clock``), instead of hanging until a timeout. Between the test's
phases (the setup and teardown of its fixtures, which pytest drives from
outside the runtime) the runtime does not count as stuck.

Async fixtures (``async def``, plain or with ``yield``) requested by an
asyncop test run in the same runtime and tree: each is a task started under
the test's root with ``root.start()`` before the test runs, so the fixture's
value is ready when the test starts, and a ``yield`` fixture's task stays
alive (its scopes open) until pytest tears it down, when it resumes after
the ``yield`` in the same task. A fixture whose task fails during the test
fails the test and cancels it; a teardown that the failure cancelled is not
reported twice.

What a test must not leave behind
---------------------------------
When the test and its fixtures are done, the plugin fails the test (as an
error in teardown) if it left behind, naming each:

- a live operation of its runtime (shown with ``dump()``), or a
  registration (timer or I/O wait);
- a failure that nobody observed (logged by the ``asyncop`` logger when its
  operation is collected);
- a thread it started that is still alive.

Then the runtime is shut down.
"""

from __future__ import annotations

import functools
import gc
import inspect
import logging
import threading
import time
from collections.abc import AsyncGenerator, Callable, Coroutine, Generator, Iterator
from typing import Any, final

import pytest

from . import (
    AsyncOperation,
    Cancelled,
    Event,
    OperationState,
    Runtime,
    TaskStatus,
    current_operation,
    race,
)
from .testing import VirtualClock

__all__ = ["asyncop_runtime", "autojump_clock"]

_MARKER = "asyncop"
_RUNTIME_FIXTURE = "asyncop_runtime"
# How long teardown waits for what the test left running before naming it.
_GRACE = 2.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "asyncop_mode",
        "'auto': run every async def test with asyncop; 'strict' (the default): "
        "only those marked @pytest.mark.asyncop",
        default="strict",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{_MARKER}: run this async def test as the root operation of a fresh asyncop Runtime",
    )


# Set on the config of a session whose collected objects the plugin froze.
_FROZEN = pytest.StashKey[bool]()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    # Each asyncop test runs the cyclic garbage collector twice (see
    # asyncop_runtime), whose cost grows with every object alive. What the
    # collection left (modules, test functions, items) lives as long as the
    # session: freeze it, so that those collections scan only what the
    # tests made. An interpreter already frozen by its owner is left alone.
    if gc.get_freeze_count() or not any(
        _RUNTIME_FIXTURE in getattr(item, "fixturenames", ()) for item in session.items
    ):
        return
    gc.collect()
    gc.freeze()
    session.config.stash[_FROZEN] = True


def pytest_sessionfinish(session: pytest.Session) -> None:
    if session.config.stash.get(_FROZEN, False):
        session.config.stash[_FROZEN] = False
        gc.unfreeze()


def _auto(config: pytest.Config) -> bool:
    try:
        mode = config.getini("asyncop_mode")
    except ValueError:  # the option was never added (plugin loaded late)
        return False
    return str(mode).strip().lower() == "auto"


def _is_async_test(obj: object) -> bool:
    return inspect.iscoroutinefunction(obj)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> None:
    # Mark the function itself before pytest makes items of it: the items'
    # fixture closure then includes the runtime.
    if not (collector.istestfunction(obj, name) and _is_async_test(obj)):
        return
    own = getattr(obj, "pytestmark", ())
    if (
        _auto(collector.config)
        or collector.get_closest_marker(_MARKER) is not None
        or any(mark.name == _MARKER for mark in own)
    ):
        if not any(mark.name == _MARKER for mark in own):
            pytest.mark.asyncop(obj)
        pytest.mark.usefixtures(_RUNTIME_FIXTURE)(obj)


# -- the test's tree -------------------------------------------------------------


_TREE = pytest.StashKey["_TestTree"]()


@final
class _TestTree:
    """One test's root operation, its fixture tasks, and what was reported."""

    def __init__(self, name: str, runtime: Runtime) -> None:
        self.runtime = runtime
        self.fn: Callable[..., Coroutine[Any, Any, Any]] | None = None
        self.kwargs: dict[str, Any] = {}
        self.fixtures: list[AsyncOperation[Any]] = []
        self.body_done = threading.Event()
        self.error: BaseException | None = None
        # Errors already raised to pytest, so that teardown does not repeat them.
        self.reported: set[int] = set()
        self.root = runtime.create(_run_test, self, name=name)

    def report(self, error: BaseException) -> BaseException:
        stack = [error]
        while stack:
            exc = stack.pop()
            self.reported.add(id(exc))
            if isinstance(exc, BaseExceptionGroup):
                stack.extend(exc.exceptions)
        return error

    def unreported(self, error: BaseException) -> bool:
        stack = [error]
        while stack:
            exc = stack.pop()
            if isinstance(exc, BaseExceptionGroup):
                stack.extend(exc.exceptions)
            elif id(exc) not in self.reported:
                return True
        return False


async def _run_test(op: AsyncOperation[Any], tree: _TestTree) -> None:
    """The root's own work: the test function, then the children it spawned."""
    assert tree.fn is not None
    errors: list[BaseException] = []
    try:
        await tree.fn(**tree.kwargs)
    except BaseException as exc:
        errors.append(exc)
    try:
        # As any operation, the test ends when its children have; the
        # fixture tasks stay until pytest tears them down.
        while True:
            spawned = [child for child in op.children() if child not in tree.fixtures]
            if not spawned:
                break
            for child in spawned:
                await _ended(child)
    except BaseException as exc:
        errors.append(exc)
    finally:
        with op.runtime._lock:
            failures = list(op._failures or ())
        # A child's failure cancelled the test: report the failure, not the cancel.
        errors = [e for e in errors if not (failures and _is_cancel(e))] + failures
        if len(errors) == 1:
            tree.error = errors[0]
        elif errors:
            tree.error = BaseExceptionGroup(f"test {op.name!r} failed", errors)
        # Before the main thread learns of it: teardown drives the fixtures next.
        tree.runtime._deadlocks.hold(True)
        tree.body_done.set()


def _is_cancel(error: BaseException) -> bool:
    return isinstance(error, Cancelled)


async def _ended(op: AsyncOperation[Any]) -> None:
    await race(op)


def _wait(event: threading.Event) -> None:
    # Short slices: a Ctrl-C reaches the main thread between two of them.
    while not event.wait(0.05):
        pass


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if pyfuncitem.get_closest_marker(_MARKER) is None or not _is_async_test(pyfuncitem.obj):
        return None
    tree = pyfuncitem.stash.get(_TREE, None)
    if tree is None:
        raise RuntimeError(
            f"{pyfuncitem.name} is marked asyncop but has no asyncop_runtime fixture; "
            "let the asyncop plugin collect it (do not call the test from another hook)"
        )
    # A failure's report starts at the test's code, not at this hook.
    __tracebackhide__ = True
    names = pyfuncitem._fixtureinfo.argnames
    tree.fn = pyfuncitem.obj
    tree.kwargs = {name: pyfuncitem.funcargs[name] for name in names}
    root = tree.root
    if root.done:
        # A fixture task failed before the test could start, and cancelled it.
        root.result()
    tree.runtime._deadlocks.claim(root)  # its DeadlockError is raised below
    tree.runtime._deadlocks.hold(False)  # the test runs: a stuck runtime fails it
    tree.runtime.submit(root)
    try:
        _wait(tree.body_done)
    except KeyboardInterrupt:
        root.cancel("KeyboardInterrupt")
        raise
    deadlock = tree.runtime._deadlocks.take_error(root)
    if deadlock is not None:
        raise tree.report(deadlock)
    if tree.error is not None:
        raise tree.report(tree.error)
    return True


# -- async fixtures -----------------------------------------------------------------


async def _plain_fixture(
    fn: Callable[..., Coroutine[Any, Any, Any]],
    kwargs: dict[str, Any],
    *,
    task_status: TaskStatus[Any],
) -> None:
    task_status.started(await fn(**kwargs))


async def _yield_fixture(
    fn: Callable[..., AsyncGenerator[Any, None]],
    kwargs: dict[str, Any],
    teardown: Event,
    *,
    task_status: TaskStatus[tuple[Any, AsyncOperation[Any]]],
) -> None:
    # This task's own operation: once the fixture has entered a scope and
    # yielded, current_operation() is that scope.
    me = current_operation(require=True)
    agen = fn(**kwargs)
    try:
        value = await agen.__anext__()
    except StopAsyncIteration:
        raise RuntimeError(
            f"async fixture {fn.__name__!r} returned without yielding; make it yield its value once"
        ) from None
    task_status.started((value, me))
    try:
        await teardown.wait_async()
    except BaseException:
        await agen.aclose()  # cancelled: run its cleanup, cancelled too
        raise
    try:
        await agen.__anext__()
    except StopAsyncIteration:
        return
    await agen.aclose()
    raise RuntimeError(f"async fixture {fn.__name__!r} yielded twice; make it yield once")


def _fixture_wrapper(
    func: Callable[..., Any], name: str, wants_runtime: bool, wants_request: bool
) -> Callable[..., Any]:
    is_gen = inspect.isasyncgenfunction(func)

    @functools.wraps(func)
    def wrapper(
        asyncop_runtime: Runtime, request: pytest.FixtureRequest, **kwargs: Any
    ) -> Iterator[Any]:
        if wants_runtime:
            kwargs[_RUNTIME_FIXTURE] = asyncop_runtime
        if wants_request:
            kwargs["request"] = request
        local = func
        if request.instance is not None and inspect.ismethod(func):
            local = func.__func__.__get__(request.instance)
        tree = request.node.stash[_TREE]
        task_name = f"fixture {name}"
        if not is_gen:
            yield tree.root.start(_plain_fixture, local, kwargs, name=task_name)
            return
        teardown = Event()
        value, op = tree.root.start(_yield_fixture, local, kwargs, teardown, name=task_name)
        tree.fixtures.append(op)
        try:
            yield value
        finally:
            teardown.set()
            op.wait()
            if op.state is OperationState.FAILED:
                error = op.error
                assert error is not None
                if tree.unreported(error):
                    raise tree.report(error)

    return wrapper


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> Generator[None, Any, Any]:
    func = fixturedef.func
    is_async = inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func)
    if not is_async or _RUNTIME_FIXTURE not in request.fixturenames:
        return (yield)
    if fixturedef.scope != "function":
        raise pytest.UsageError(
            f"async fixture {fixturedef.argname!r} has scope {fixturedef.scope!r}, but asyncop "
            "runs async fixtures in each test's own runtime; give it function scope"
        )
    original = fixturedef.argnames
    wants_runtime = _RUNTIME_FIXTURE in original
    wants_request = "request" in original
    fixturedef.func = _fixture_wrapper(  # type: ignore[misc]
        func, fixturedef.argname, wants_runtime, wants_request
    )
    extra = tuple(n for n in (_RUNTIME_FIXTURE, "request") if n not in original)
    fixturedef.argnames = original + extra  # type: ignore[misc]
    try:
        return (yield)
    finally:
        fixturedef.func = func  # type: ignore[misc]
        fixturedef.argnames = original  # type: ignore[misc]


# -- fixtures -----------------------------------------------------------------------


@pytest.fixture
def autojump_clock() -> VirtualClock:
    """A ``VirtualClock(autojump=True)``; the test's ``asyncop_runtime`` runs on it."""
    return VirtualClock(autojump=True)


@final
class _Unobserved(logging.Handler):
    """Collects the failures nobody observed that the ``asyncop`` logger reports."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "nobody observed" in record.getMessage():
            error = record.exc_info[1] if record.exc_info else None
            self.messages.append(f"{record.getMessage()}: {error!r}")


def _settle(root: AsyncOperation[Any], tree: _TestTree) -> list[str]:
    """Wait for the root to end and say what it left unreported."""
    problems: list[str] = []
    if root.state is OperationState.CREATED:
        root.cancel("the test did not run")
    try:
        root.wait(_GRACE)
    except TimeoutError:
        return problems  # still running: named with the other live operations
    if root.state is OperationState.FAILED:
        error = root.error
        assert error is not None
        if tree.unreported(error):
            problems.append(f"the test's operation failed after the test ended: {error!r}")
    return problems


@pytest.fixture
def asyncop_runtime(request: pytest.FixtureRequest) -> Iterator[Runtime]:
    """A fresh ``Runtime`` for the test, checked for leftovers and shut down after it.

    An asyncop test runs as its root operation. With the ``autojump_clock``
    fixture, the runtime runs on that virtual clock. Teardown fails the test
    if it left a live operation, a registration, an unobserved failure or a
    thread behind.
    """
    clock = (
        request.getfixturevalue("autojump_clock")
        if "autojump_clock" in request.fixturenames
        else None
    )
    gc.collect()  # earlier tests' unobserved failures are not this test's
    handler = _Unobserved()
    logger = logging.getLogger("asyncop")
    logger.addHandler(handler)
    threads_before = set(threading.enumerate())
    runtime = Runtime(name=f"asyncop-test-{request.node.name}", clock=clock, deadlock="raise")
    # Between the test's phases (fixture setup, teardown), pytest drives the
    # fixtures' tasks from outside: the runtime does not count as stuck then.
    runtime._deadlocks.hold(True)
    tree = _TestTree(request.node.name, runtime)
    request.node.stash[_TREE] = tree
    problems: list[str] = []
    try:
        yield runtime
    finally:
        try:
            problems += _settle(tree.root, tree)
            deadline = time.monotonic() + _GRACE
            while "no live operations" not in runtime.dump() and time.monotonic() < deadline:
                time.sleep(0.005)
            if "no live operations" not in runtime.dump():
                problems.append(f"operations left running:\n{runtime.dump()}")
            elif runtime.registrations():
                problems.append(
                    f"{runtime.registrations()} registrations (timers or I/O waits) left armed"
                )
            if not runtime.shutdown(timeout=10):
                problems.append(f"runtime {runtime.name!r} did not shut down within 10 s")
            del tree
            gc.collect()
        finally:
            logger.removeHandler(handler)
        problems += [f"unobserved failure: {message}" for message in handler.messages]
        deadline = time.monotonic() + _GRACE
        for thread in set(threading.enumerate()) - threads_before:
            thread.join(max(0.0, deadline - time.monotonic()))
        left = sorted(t.name for t in set(threading.enumerate()) - threads_before if t.is_alive())
        if left:
            problems.append(f"threads left running: {', '.join(left)}")
        if problems:
            pytest.fail(
                f"{request.node.name} left things behind:\n- " + "\n- ".join(problems),
                pytrace=False,
            )
