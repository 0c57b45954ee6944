"""The compiled core and its fallback: which form runs, and how to pick the source.

An install with a C compiler runs the core modules compiled; the same
``.py`` files run under ``ASYNCOP_NO_EXTENSIONS=1``, and an editable
install runs a module from its source once the source changed since it was
compiled. ``asyncop.lowlevel.is_compiled()`` says which form runs, and the
``cython`` names the core modules use exist in the pure-Python stand-in.
"""

from __future__ import annotations

import ast
import contextvars
import gc
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import types
import weakref
from pathlib import Path
from typing import Any

import pytest

import asyncop
import asyncop.lowlevel
from asyncop import _compiled
from asyncop._compiled import SourceFinder
from asyncop.platform import pure_cython

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[1]
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def test_is_compiled_says_whether_the_core_runs_as_extension_modules() -> None:
    kernel = sys.modules["asyncop.runtime._core._kernel"]
    assert kernel.__file__ is not None
    assert asyncop.lowlevel.is_compiled() is (not kernel.__file__.endswith(".py"))


def test_compiled_an_operations_fields_are_the_members_of_an_extension_type() -> None:
    base = asyncop.AsyncOperation.__mro__[1]
    heap = bool(base.__flags__ & (1 << 9))  # Py_TPFLAGS_HEAPTYPE: a class made by Python code
    assert heap is not asyncop.lowlevel.is_compiled()


async def _one_step() -> None:
    await asyncop.checkpoint()


def test_compiled_the_kernels_and_a_workers_fields_are_the_members_of_extension_types() -> None:
    from asyncop.runtime._core._fields import KernelFields, WorkerFields
    from asyncop.runtime._core._worker import Worker

    assert KernelFields in asyncop.Runtime.__mro__
    assert Worker.__mro__[1] is WorkerFields
    for base in (KernelFields, WorkerFields):
        heap = bool(base.__flags__ & (1 << 9))  # Py_TPFLAGS_HEAPTYPE
        assert heap is not asyncop.lowlevel.is_compiled()
    with asyncop.Runtime(workers=1, name="fields") as rt:
        # The runtime stays a plain object: weak references, any attribute.
        assert weakref.ref(rt)() is rt
        rt.user_note = "kept"  # type: ignore[attr-defined]
        assert rt.user_note == "kept"  # type: ignore[attr-defined]
        assert rt.run(_one_step) is None
        worker = rt._workers[0]
        assert isinstance(worker, WorkerFields) and worker.runtime is rt
        assert not hasattr(worker, "__dict__")
        assert repr(worker).startswith(f"<Worker {worker.index} base ")


def test_compiled_the_runtimes_lock_is_an_extension_type_and_python_a_threading_rlock() -> None:
    import _thread

    from asyncop.platform import RecursiveLock

    source = sys.modules["asyncop.platform._lock"].__file__
    assert source is not None
    compiled = not source.endswith(".py")
    # A compiled core compiles its lock; a free-threaded build compiles the
    # lock alone (the only module declared free-threading compatible).
    assert compiled or not asyncop.lowlevel.is_compiled()
    # Compiled, the core takes it with C calls; as Python, it is RLock's C code.
    assert bool(RecursiveLock.__flags__ & (1 << 9)) is not compiled  # Py_TPFLAGS_HEAPTYPE
    assert issubclass(RecursiveLock, _thread.RLock) is not compiled
    with asyncop.Runtime(workers=1, name="locked") as rt:
        assert type(rt._lock) is RecursiveLock
        assert rt.run(_one_step) is None  # its workers took it, from their threads
        with rt._lock, rt._lock:
            assert rt._lock.owned()
        assert not rt._lock.owned()


@pytest.mark.skipif(
    not sysconfig.get_config_var("Py_GIL_DISABLED"), reason="needs a free-threaded build"
)
def test_on_a_free_threaded_build_importing_and_running_asyncop_keeps_the_gil_off() -> None:
    # No -X gil=0 here: a compiled module that did not declare itself
    # compatible would turn the GIL back on as it loads, with a warning.
    code = (
        "import sys, warnings; warnings.simplefilter('error')\n"
        "import asyncop\n"
        "async def main():\n"
        "    await asyncop.sleep(0)\n"
        "with asyncop.Runtime(workers=2) as rt:\n"
        "    rt.run(main)\n"
        "print(sys._is_gil_enabled())\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHON_GIL"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_compiled_a_task_waiting_in_a_checkpoint_adds_no_object_to_the_collectors_passes() -> None:
    # What a checkpoint suspends in holds nothing but the checkpoint constant,
    # so no garbage cycle can pass through it: compiled, the collector skips
    # it (as Python it is a generator, which the collector tracks).
    seen: list[bool] = []

    async def main() -> None:
        suspension = asyncop.checkpoint().__await__()
        seen.append(gc.is_tracked(suspension))
        suspension.close()

    with asyncop.Runtime(1) as runtime:
        runtime.run(main)
    assert seen == [not asyncop.lowlevel.is_compiled()]


def test_compiled_a_tasks_state_adds_no_object_to_the_collectors_passes() -> None:
    # A task's state (its waker too) is never garbage while its task lives,
    # and its one cycle, through its operation, goes as the operation
    # becomes final: compiled, the collector skips it (as Python it is an
    # object with slots, which the collector tracks).
    seen: list[bool] = []

    async def main() -> None:
        op = asyncop.current_operation(require=True)
        seen.append(gc.is_tracked(op._task))

    with asyncop.Runtime(1) as runtime:
        runtime.run(main)
    assert seen == [not asyncop.lowlevel.is_compiled()]


async def _returns() -> object:
    await asyncop.checkpoint()
    return object()


async def _parks(event: asyncop.Event) -> None:
    await event.wait_async()


async def _fails(event: asyncop.Event) -> None:
    await asyncop.checkpoint()
    raise ValueError(event)


def test_a_task_that_ended_in_any_way_leaves_its_operation_to_be_freed() -> None:
    # The task state the collector skips (compiled) keeps nothing of an
    # ended task alive: each operation goes, its task state with it.
    refs: list[weakref.ref[asyncop.AsyncOperation[Any]]] = []

    async def main() -> None:
        event = asyncop.Event()
        async with asyncop.scope() as s:
            refs.append(weakref.ref(s.spawn(_returns)))
            refs.append(weakref.ref(s.spawn(_parks, event)))  # cancelled while parked
            await asyncop.checkpoint()
            s.cancel()
        async with asyncop.scope() as s:
            refs.append(weakref.ref(s.spawn(_returns)))  # cancelled before its first step
            s.cancel()
        async with asyncop.scope() as s:
            refs.append(weakref.ref(s.spawn(_parks, event)))  # woken
            await asyncop.checkpoint()
            event.set()

    with asyncop.Runtime(1) as runtime:
        runtime.run(main)
        failed = runtime.spawn(_fails, asyncop.Event())
        assert isinstance(failed.wait(5).error, ValueError)
        refs.append(weakref.ref(failed))
        del failed
    gc.collect()
    assert [ref() for ref in refs] == [None] * 5


class _Holder:
    """What a garbage cycle through an operation passes: it holds the operation."""

    op: asyncop.AsyncOperation[Any] | None = None


async def _returns_itself() -> object:
    # The value holds the operation, and itself.
    value: list[object] = [asyncop.current_operation(require=True)]
    value.append(value)
    await asyncop.checkpoint()
    return value


async def _fails_holding_itself() -> None:
    op = asyncop.current_operation(require=True)  # in the traceback's frame
    await asyncop.checkpoint()
    raise ValueError(op)


async def _parks_holding(holder: _Holder, event: asyncop.Event) -> None:
    holder.op = asyncop.current_operation(require=True)
    await event.wait_async()


def _ends_in_a_garbage_cycle(way: str) -> weakref.ref[asyncop.AsyncOperation[Any]]:
    """Run a task that ends in ``way`` in a cycle through its operation; a reference to it."""
    refs: list[weakref.ref[asyncop.AsyncOperation[Any]]] = []

    async def main() -> None:
        holder = _Holder()
        event = asyncop.Event()
        async with asyncop.scope(supervise=True) as s:
            if way == "returned":
                op = s.spawn(_returns_itself)
            elif way == "raised":
                op = s.spawn(_fails_holding_itself)
            elif way == "cancelled while parked":
                op = s.spawn(_parks_holding, holder, event)
                await asyncop.checkpoint()
                op.cancel(holder)  # the reason holds the operation
            else:  # failed before its first step: called with an argument too many
                op = s.spawn(_returns, holder)
                holder.op = op
            await asyncop.checkpoint()
        if way in ("raised", "failed before its first step"):
            assert op.error is not None  # observed
        refs.append(weakref.ref(op))

    with asyncop.Runtime(1) as runtime:
        runtime.run(main)
    return refs[0]


@pytest.mark.parametrize(
    "way", ["returned", "raised", "cancelled while parked", "failed before its first step"]
)
def test_a_task_that_ended_in_a_garbage_cycle_is_collected(way: str) -> None:
    # Compiled, a task's operation is off the collector's lists while it
    # runs: it goes back on them as its work ends, so a cycle through its
    # outcome, its cancel reason or its traceback is still collected.
    ref = _ends_in_a_garbage_cycle(way)
    gc.collect()
    assert ref() is None


def test_compiled_a_parked_tasks_operation_adds_no_object_to_the_collectors_passes() -> None:
    # A task's operation is reached through the runtime until it is final:
    # compiled, the collector skips it until its work ends (as Python it
    # is an object with slots, which the collector tracks).
    seen: list[bool] = []

    async def main() -> None:
        event = asyncop.Event()
        async with asyncop.scope() as s:
            op = s.spawn(_parks, event)
            await asyncop.checkpoint()
            seen.append(gc.is_tracked(op))
            event.set()
        seen.append(gc.is_tracked(op))

    with asyncop.Runtime(1) as runtime:
        runtime.run(main)
    assert seen == [not asyncop.lowlevel.is_compiled(), True]


def test_a_task_refused_by_an_ended_scope_is_freed() -> None:
    # The task state the collector skips (compiled) must not keep a task
    # that was never linked alive: its function goes with it.
    async def work() -> None:
        await asyncop.checkpoint()

    works = [work]
    ref = weakref.ref(work)
    del work

    async def main() -> None:
        async with asyncop.scope() as s:
            pass
        with pytest.raises(RuntimeError, match="cannot spawn into scope"):
            s.spawn(works.pop())

    with asyncop.Runtime(1) as runtime:
        runtime.run(main)
    gc.collect()
    assert ref() is None


def test_a_task_made_and_never_started_is_freed() -> None:
    # Made by create() and dropped unstarted, in a cycle through its
    # arguments: linked nowhere, it stays on the collector's lists (compiled),
    # its task state too, and the collector frees both.
    async def work(op: asyncop.AsyncOperation[Any], context: None) -> None:
        await asyncop.checkpoint()

    with asyncop.Runtime(1) as runtime:
        ref = weakref.ref(runtime.create(work))
        gc.collect()
        assert ref() is None


_CARRIED: contextvars.ContextVar[object] = contextvars.ContextVar("_CARRIED")


class _Cycle:
    """An object in a garbage cycle of its own: only the collector frees it."""

    def __init__(self) -> None:
        self.me = self
        self.frame: types.FrameType | None = None


async def _parks_and_sets(marker: _Cycle, event: asyncop.Event) -> None:
    _CARRIED.set(marker)
    await event.wait_async()


def test_compiled_a_parked_tasks_coroutine_and_context_add_no_object_to_the_collectors_passes() -> (
    None
):
    # A task is reached through the runtime until it ends: compiled, the
    # collector skips its coroutine and its context until then (as Python
    # both are on the collector's lists, as any coroutine and context are).
    marker = _Cycle()
    seen: list[tuple[bool, bool]] = []

    def visited() -> tuple[bool, bool]:
        code = _parks_and_sets.__code__
        objs = gc.get_objects()
        coro = any(type(o) is types.CoroutineType and o.cr_code is code for o in objs)
        ctx = any(type(o) is contextvars.Context and o.get(_CARRIED) is marker for o in objs)
        return coro, ctx

    async def main() -> None:
        event = asyncop.Event()
        async with asyncop.scope() as s:
            s.spawn(_parks_and_sets, marker, event)
            await asyncop.checkpoint()
            seen.append(visited())
            event.set()
        seen.append(visited())

    with asyncop.Runtime(1) as runtime:
        runtime.run(main)
    python = not asyncop.lowlevel.is_compiled()
    assert seen == [(python, python), (False, False)]


async def _ends_in_a_frame_cycle(
    way: str, event: asyncop.Event, made: list[weakref.ref[_Cycle]]
) -> None:
    # A garbage cycle through the coroutine's frame and its locals, which
    # outlives the coroutine: the frame object keeps its locals once it ends.
    cycle = _Cycle()
    cycle.frame = sys._getframe()
    made.append(weakref.ref(cycle))
    _CARRIED.set(cycle)  # and one through the task's context
    if way == "raised":
        await asyncop.checkpoint()
        raise ValueError(cycle)
    if way == "cancelled while parked":
        await event.wait_async()
    await asyncop.checkpoint()


_WAYS = [
    "returned",
    "raised",
    "cancelled while parked",
    "cancelled before its first step",
    "failed before its first step",
    "refused by an ended scope",
]


def _cycles_of_task_ending(way: str) -> list[weakref.ref[_Cycle]]:
    """Run a task that ends in ``way``; references to the garbage cycles it made or was given."""
    given = _Cycle()
    refs = [weakref.ref(given)]
    event = asyncop.Event()

    def spawn(s: asyncop.AsyncOperation[Any]) -> asyncop.AsyncOperation[None]:
        # The given cycle rides in the task's context alone: the spawner's drops it.
        token = _CARRIED.set(given)
        try:
            if way == "failed before its first step":  # called with an argument too many
                return s.spawn(_ends_in_a_frame_cycle, way, event, refs, None)  # type: ignore[call-arg]
            return s.spawn(_ends_in_a_frame_cycle, way, event, refs)
        finally:
            _CARRIED.reset(token)

    async def main() -> None:
        async with asyncop.scope(supervise=True) as s:
            if way == "cancelled before its first step":
                spawn(s)
                s.cancel()
            elif way != "refused by an ended scope":
                op = spawn(s)
                await asyncop.checkpoint()  # the task's first step
                if way == "cancelled while parked":
                    op.cancel()
                await asyncop.checkpoint()
                if way in ("raised", "failed before its first step"):
                    assert op.error is not None  # observed
        if way == "refused by an ended scope":
            with pytest.raises(RuntimeError, match="cannot spawn into scope"):
                spawn(s)

    with asyncop.Runtime(1) as runtime:
        runtime.run(main)
    return refs


@pytest.mark.parametrize("way", _WAYS)
def test_a_garbage_cycle_through_an_ended_tasks_frame_or_context_is_collected(way: str) -> None:
    # Compiled, a linked task's coroutine and context are off the collector's
    # lists while it runs; they go back on them as it ends, however it ends,
    # before the runtime lets go of them: its cycles are then collected (and
    # freeing either while off the lists would crash the interpreter).
    refs = _cycles_of_task_ending(way)
    started = way in ("returned", "raised", "cancelled while parked")
    assert len(refs) == (2 if started else 1)
    gc.collect()
    assert [ref() for ref in refs] == [None] * len(refs)


def test_the_calls_every_operation_makes_on_its_runtime_are_methods_of_its_c_bases() -> None:
    from asyncop.operations import RuntimeBase
    from asyncop.runtime._core._spawn import NodeHooks

    mro = asyncop.Runtime.__mro__
    assert mro.index(RuntimeBase) > mro.index(NodeHooks)
    for base in (RuntimeBase, NodeHooks):
        heap = bool(base.__flags__ & (1 << 9))  # Py_TPFLAGS_HEAPTYPE
        assert heap is not asyncop.lowlevel.is_compiled()
    # NodeHooks alone implements them: a definition in a Python class above it
    # would make every compiled call look it up and call it as Python does.
    for name in ("_new_operation", "_on_final_locked", "_on_cancel_running_locked"):
        assert [cls for cls in mro if name in vars(cls)] == [NodeHooks, RuntimeBase]
    with asyncop.Runtime(workers=1, name="hooks") as rt:
        op = rt.spawn(_one_step)
        op.wait(10)
        assert op.done and op.runtime is rt


def test_no_extensions_at_run_time_imports_every_module_from_its_source() -> None:
    code = (
        "import sys, asyncop, asyncop.lowlevel, asyncop.net\n"
        "print(asyncop.lowlevel.is_compiled())\n"
        "print(sorted(name for name, module in sys.modules.items()\n"
        "    if name.startswith('asyncop.') and getattr(module, '__file__', None)\n"
        "    and not module.__file__.endswith('.py')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "ASYNCOP_NO_EXTENSIONS": "1"},
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["False", "[]"]


def test_the_source_finder_prefers_the_py_file_to_an_extension_module(tmp_path: Path) -> None:
    (tmp_path / "fake.py").write_text("")
    (tmp_path / f"fake{SUFFIX}").write_bytes(b"")
    spec = SourceFinder(None).find_spec("asyncop.fake", [str(tmp_path)])
    assert spec is not None and spec.origin == str(tmp_path / "fake.py")
    assert isinstance(spec.loader, importlib.machinery.SourceFileLoader)
    # Only the modules it was given, only asyncop's, and never a package.
    others = SourceFinder(frozenset({"asyncop.other"}))
    assert others.find_spec("asyncop.fake", [str(tmp_path)]) is None
    assert SourceFinder(None).find_spec("other.fake", [str(tmp_path)]) is None
    assert SourceFinder(None).find_spec("asyncop", None) is None
    assert SourceFinder(None).find_spec("asyncop.missing", [str(tmp_path)]) is None


def test_a_source_edited_since_its_compile_is_stale(tmp_path: Path) -> None:
    package = tmp_path / "asyncop"
    package.mkdir()
    source = package / "_core.py"
    source.write_text("x = 1\n")
    stat = source.stat()
    record = package / f".sources{SUFFIX.removesuffix('.so')}.json"
    record.write_text(json.dumps({"asyncop._core": [stat.st_mtime_ns, stat.st_size]}))
    assert _compiled._stale_modules(str(package)) == frozenset()
    source.write_text("x = 2  # edited\n")
    assert _compiled._stale_modules(str(package)) == {"asyncop._core"}


@pytest.mark.skipif(
    not asyncop.lowlevel.is_compiled()
    or not (ROOT / "asyncop" / f".sources{SUFFIX.removesuffix('.so')}.json").exists(),
    reason="needs an editable install that compiled the core",
)
def test_one_edited_core_source_runs_every_core_module_from_source(tmp_path: Path) -> None:
    # The waker's extension type is cimported by the task module: a compiled
    # task module cannot load beside a waker run from its edited source.
    shutil.copytree(ROOT / "asyncop", tmp_path / "asyncop", ignore=shutil.ignore_patterns("*.c"))
    waker = tmp_path / "asyncop" / "runtime" / "_core" / "_waker.py"
    with open(waker, "a", encoding="utf-8") as file:
        file.write("# edited\n")
    code = (
        "import warnings\n"
        "warnings.simplefilter('ignore')\n"
        "import asyncop, asyncop.lowlevel\n"
        "async def main():\n"
        "    await asyncop.checkpoint()\n"
        "    return 7\n"
        "with asyncop.Runtime(1) as rt:\n"
        "    print(rt.run(main), asyncop.lowlevel.is_compiled())\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", code],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "ASYNCOP_NO_EXTENSIONS"},
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["7", "False"]


def test_a_wheel_without_a_record_of_sources_has_nothing_stale(tmp_path: Path) -> None:
    assert _compiled._stale_modules(str(tmp_path)) == frozenset()


def _cython_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "cython"
    }


def test_the_pure_stand_in_has_every_cython_name_the_core_uses() -> None:
    used = set()
    for path in (ROOT / "asyncop").rglob("*.py"):
        used |= _cython_names(path)
    assert "compiled" in used
    assert sorted(name for name in used if not hasattr(pure_cython, name)) == []
    assert pure_cython.compiled is False
