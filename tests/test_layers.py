"""asyncop's shape: layers, one face per package, no cycles, modest sizes.

The package is three layers and the modules on top of them::

    asyncop, asyncop.net, .testing, ...   the façade users import
    asyncop.runtime                        workers, timers, reactor, scopes
    asyncop.operations                     the operation tree
    asyncop.platform                       the OS primitives

Imports flow down only. ``platform`` uses the standard library alone, so
that porting asyncop means porting it; ``operations`` adds ``attrs`` and
``platform``. Both use ``cython`` too, for their compiled form (the
platform's for its lock). Each of the three
packages has one face, its ``__init__.py``:
code outside a package imports the package, never one of its ``_`` modules,
so a package can move its insides around without touching its users.
Modules import each other at the top (not inside functions, where an import
hides a dependency and costs a lookup per call), and their top-level
imports form no cycle.

Inside the runtime, the compiled core (``runtime/_core/``) is exactly the
runtime's part of the compiled module set, and the network, process and
executor packages (``runtime/_net/``, ``_proc/``, ``_executors/``) use the
core and the primitives (``runtime/_primitives/``) only through the
runtime's public names, as a library built on asyncop would.

The runtime's face loads its network, process and signal names on first
use, so that ``import asyncop`` does not load ssl; the last tests check
that part in a fresh interpreter. Everything else here reads the source
with ``ast`` and imports nothing.

Each state machine (an operation's state and outcome, a waker's status, a
timer's, a worker's, the runtime's...) has one owner: the module whose
transitions write its field. A transition is a function named
``_transition_to_...`` that says whether it happened, and its callers use
that answer; nothing else writes the field, and no module keeps an alias of
an enum member (``_RUNNING = OperationState.RUNNING``) for a reader to
mistake for another state of the same name. (A hot function may take the
members it tests as default arguments: named in its own signature, they
read as locals where the class attribute costs ten times that on CPython
3.11.) The allowlists below name every known
exception with its reason, and each test also fails on an entry that no
longer matches anything, so the lists only shrink.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "asyncop"

#: The layers, bottom up; every other module of asyncop sits on top of them.
LAYERS = ("asyncop.platform", "asyncop.operations", "asyncop.runtime")
TOP = len(LAYERS)

#: The third-party packages a layer may use besides the standard library
#: (the façade may use anything: its optional integrations guard their imports).
#: ``cython`` is Cython's pure-Python mode in the compiled core modules: compiled,
#: it is no import at all, and run as Python it falls back to
#: ``asyncop.platform.pure_cython`` when Cython is not installed.
THIRD_PARTY = {
    "asyncop.platform": frozenset({"cython"}),
    "asyncop.operations": frozenset({"attrs", "cython"}),
}

SCHEDULER = "asyncop.runtime._scheduler"

# Each allowlist maps a known exception to why it stands, or to the fix it
# still waits for.

#: (importing module, imported module) -> why it may use another package's insides.
FACE_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("asyncop.runtime._core._fields", "asyncop.operations._owner"): (
        "KernelFields extends RuntimeBase, an extension type when compiled: Cython "
        "takes a Python import of a cimported base only from the module that defines it"
    ),
    ("asyncop.operations._owner", "asyncop.platform._lock"): (
        "RuntimeBase types the runtime's lock as RecursiveLock, an extension type when "
        "compiled: Cython takes a Python import of a cimported type only from its module"
    ),
    ("asyncop.runtime._core._reactor", "asyncop.platform._lock"): (
        "the reactor types its lock as RecursiveLock, so that compiled its acquire and "
        "release are C calls: Cython takes a Python import of a cimported type only from "
        "its module"
    ),
    ("asyncop.runtime._core._event", "asyncop.operations._suspend"): (
        "WaitEvent extends Watched, an extension type when compiled: Cython takes a Python "
        "import of a cimported base only from the module that defines it"
    ),
    ("asyncop.operations._node", "asyncop.platform._frames"): (
        "_user_frame calls the module's functions, which compiled are the C functions of "
        "_frames.pxd: Cython turns module.name into a C call only for a module it cimports"
    ),
    ("asyncop.operations._suspend", "asyncop.platform._gc"): (
        "suspend_on_constant calls the module's untrack, which compiled is the C function of "
        "_gc.pxd: Cython turns module.name into a C call only for a module it cimports"
    ),
    ("asyncop.runtime._core._spawn", "asyncop.platform._gc"): (
        "link_new_locked calls the module's untrack, which compiled is the C function of "
        "_gc.pxd: Cython turns module.name into a C call only for a module it cimports"
    ),
    ("asyncop.runtime._core._task", "asyncop.platform._gc"): (
        "_first_coroutine and _finish call the module's untrack and track, which compiled are "
        "the C functions of _gc.pxd: Cython turns module.name into a C call only for a module "
        "it cimports"
    ),
    ("asyncop.operations._finalize", "asyncop.platform._gc"): (
        "transition_to_ended calls the module's track, which compiled is the C function of "
        "_gc.pxd: Cython turns module.name into a C call only for a module it cimports"
    ),
    ("asyncop.runtime._core._task", "asyncop.platform._coro"): (
        "step calls the module's send_in, which compiled is the C function of _coro.pxd: "
        "Cython turns module.name into a C call only for a module it cimports"
    ),
    ("asyncop.runtime._core._block", "asyncop.operations._current"): (
        "_running_task calls the module's state_here, which compiled is the C function of "
        "_current.pxd: Cython turns module.name into a C call only for a module it cimports"
    ),
    ("asyncop.runtime._core._scope", "asyncop.operations._current"): (
        "scope() calls the module's state_here, which compiled is the C function of "
        "_current.pxd: Cython turns module.name into a C call only for a module it cimports"
    ),
    ("asyncop.runtime._core._spawn", "asyncop.operations._current"): (
        "_new_operation calls the module's state_here, which compiled is the C function of "
        "_current.pxd: Cython turns module.name into a C call only for a module it cimports"
    ),
    ("asyncop.runtime._core._waker", "asyncop.operations._current"): (
        "push_locked calls the module's state_here, which compiled is the C function of "
        "_current.pxd: Cython turns module.name into a C call only for a module it cimports"
    ),
}

#: (importing module, imported module) -> why a type-only import may point upward.
#: None may: the operations package types ``op.runtime`` with a protocol of its
#: own (``RuntimeFace``), which the runtime implements.
UPWARD_TYPE_IMPORTS: dict[tuple[str, str], str] = {}

#: The target of an import whose module name is computed at run time.
COMPUTED = "(a computed name)"

#: (importing module, imported module) -> why the import must wait for a call.
FUNCTION_IMPORTS: dict[tuple[str, str], str] = {
    ("asyncop._anyio_hook", "asyncop._anyio"): (
        "loads the anyio backend when anyio asks for it, so that import asyncop "
        "does not import anyio"
    ),
    ("asyncop.anyio", "asyncio"): (
        "runs only under an asyncio host loop, which has imported asyncio; "
        "a trio host need not load it"
    ),
    ("asyncop.anyio", "trio"): (
        "runs only under a trio host loop, which has imported trio; "
        "asyncop.anyio does not depend on trio"
    ),
    ("asyncop._console_client", "asyncop._console_draw"): (
        "draws with rich, the optional console extra: python -m asyncop says rich is "
        "missing instead of failing at import, and its dump command needs no rich"
    ),
    ("asyncop.runtime", COMPUTED): (
        "the face loads the network, process and signal modules on first use, "
        "so that import asyncop does not load ssl and subprocess"
    ),
    ("asyncop.runtime._core._awaitables", SCHEDULER): (
        "notify_closing() needs live_runtimes(), and a top-level import would close the "
        "cycle _awaitables -> _scheduler -> _task -> _awaitables; moving live_runtimes "
        "below _awaitables removes it"
    ),
    ("asyncop.runtime._executors._executors", "multiprocessing.forkserver"): (
        "only a fork-server start needs it, and it takes milliseconds to import"
    ),
    ("asyncop.runtime._executors._executors", "pebble"): (
        "only a ProcessExecutor needs it, and it takes tens of milliseconds to import"
    ),
}

#: The modules of an import cycle -> why the cycle is still there.
CYCLES: dict[frozenset[str], str] = {}

MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 80
#: The most lines a function may take in all: its decorators, signature and
#: docstring included.
MAX_FUNCTION_SPAN = 100

#: Modules longer than MAX_MODULE_LINES -> their length now, which they may not exceed.
LONG_MODULES: dict[str, int] = {}

#: "module:qualified.name" of functions longer than MAX_FUNCTION_LINES -> their length now.
LONG_FUNCTIONS: dict[str, int] = {}

#: Every state field, as (the class whose instances hold it, the field) -> the
#: module that owns it. The owner writes it only in its transitions; the
#: holder's ``__init__`` (wherever the class is) sets the first state. A
#: scope's state is read from its operation, and a task's is its waker's: they
#: have no field of their own.
STATE_FIELDS: dict[tuple[str, str], str] = {
    ("OperationFields", "_state"): "asyncop.operations._state",
    ("OperationFields", "_outcome"): "asyncop.operations._finalize",
    ("Waker", "status"): "asyncop.runtime._core._waker",
    ("Timer", "state"): "asyncop.runtime._core._timers",
    ("Worker", "state"): "asyncop.runtime._core._worker",
    ("Kernel", "_state"): "asyncop.runtime._core._kernel",
    ("RemoteJob", "state"): "asyncop.runtime._executors._remote",
    ("SignalReceiver", "_state"): "asyncop.runtime._proc._signals",
    ("_Status", "_state"): "asyncop.runtime._start",
    ("_TaskStatus", "_state"): "asyncop._anyio._tasks",
    ("AsyncioCall", "state"): "asyncop.runtime._asyncio_call",
    ("AsyncioHost", "_state"): "asyncop.runtime._asyncio_host",
    ("TLSStream", "_state"): "asyncop.runtime._net._tls",
    ("_Call", "state"): "asyncop.platform._main_calls",
}

#: "module:function" of a function of a state field's owner that sets a new
#: holder's first state, for the holder's ``__init__`` and a subclass's -> why.
#: Only the owner's own functions count.
FIRST_STATE_SETTERS: dict[str, str] = {
    "asyncop.runtime._core._waker:set_up_waker": (
        "Waker.__init__ and the task state's __init__ both call it: compiled, the task "
        "state's call of it is a C call, where a call of Waker.__init__ is a Python one"
    ),
}

#: State fields whose owner writes them in its plain methods, not in
#: transitions -> why. No other module writes them either.
OWNER_WRITES_INLINE: dict[tuple[str, str], str] = {
    ("AsyncioCall", "state"): (
        "one asyncio call's QUEUED -> RUNNING -> DONE, each step taken where the call "
        "moves (on the host loop or in the waiting task), none of them racing another"
    ),
    ("AsyncioHost", "_state"): (
        "the host loop's thread and its shutdown write it under the host's own lock, "
        "where the loop's life is decided; give it transitions when it next changes"
    ),
    ("TLSStream", "_state"): (
        "OPEN goes to BROKEN, UNWRAPPED or CLOSED from the stream's own methods, "
        "and breaking a stream that is not open is meant to do nothing"
    ),
    ("_Call", "state"): (
        "a call handed to the main thread, in the platform layer, which has no "
        "runtime lock: its run() and its refusal write it under the call's own lock"
    ),
}

#: "module:function field" of a write of a field named like a state field that
#: is no state machine's -> why it stands.
STATE_WRITE_EXCEPTIONS: dict[str, str] = {
    "asyncop.operations._current:thread_state state": (
        "the thread's ThreadState kept on the thread-local: no machine's field"
    ),
}

#: "module: what" of a transition whose answer is dropped -> why it stands.
DROPPED_ANSWERS: dict[str, str] = {
    "asyncop.runtime._scheduler: _transition_to_stopped_locked() called as a statement": (
        "every pass of shutdown() tells the threads to stop, the first and any after "
        "one a Ctrl-C cut short, so a pass that finds the runtime stopped goes on alike"
    ),
}


# ----------------------------------------------------------------------
# Reading the source
# ----------------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    """One module that ``importer`` imports, and where the import stands."""

    importer: str
    target: str
    line: int
    type_only: bool  # under ``if TYPE_CHECKING:``
    in_function: bool

    def __str__(self) -> str:
        return f"{self.importer}:{self.line} imports {self.target}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def sources() -> dict[str, tuple[Path, ast.Module]]:
    """Every module of asyncop by dotted name, with its path and syntax tree."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found[module_name(path)] = (path, ast.parse(path.read_text(encoding="utf-8")))
    return found


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def resolve(importer: str, node: ast.ImportFrom) -> str:
    """The absolute name of the module that ``from ... import`` reads from."""
    return absolute(importer, sources()[importer][0].name == "__init__.py", node)


def absolute(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name of the module that ``from ... import`` in ``importer`` reads from."""
    if not node.level:
        return node.module or ""
    # Level 1 is the importer's own package: the importer itself if it is
    # a package's __init__.py, its parent otherwise.
    base = importer.split(".")
    if not is_package:
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def called_import(node: ast.Call) -> str | None:
    """The module that ``importlib.import_module(...)`` or ``__import__(...)`` imports."""
    func = node.func
    named = (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id in ("import_module", "__import__")
    )
    if not (named and node.args):
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return COMPUTED


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def imports_of(importer: str) -> Iterator[Import]:
    """Every import in ``importer``, wherever it stands."""
    tree = sources()[importer][1]

    def visit(node: ast.AST, type_only: bool, in_function: bool) -> Iterator[Import]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(importer, alias.name, node.lineno, type_only, in_function)
        elif isinstance(node, ast.ImportFrom):
            base = resolve(importer, node)
            for alias in node.names:
                # ``from . import _dns`` imports a module, not a name.
                sub = f"{base}.{alias.name}"
                target = sub if sub in sources() else base
                yield Import(importer, target, node.lineno, type_only, in_function)
        elif isinstance(node, ast.Call) and (called := called_import(node)):
            yield Import(importer, called, node.lineno, type_only, in_function)
        if isinstance(node, ast.If) and is_type_checking(node.test):
            for stmt in node.body:
                yield from visit(stmt, True, in_function)
            for stmt in node.orelse:
                yield from visit(stmt, type_only, in_function)
            return
        nested = in_function or isinstance(node, FUNCTIONS)
        for child in ast.iter_child_nodes(node):
            yield from visit(child, type_only, nested)

    yield from visit(tree, False, False)


def all_imports() -> Iterator[Import]:
    for name in sources():
        yield from imports_of(name)


def layer_of(module: str) -> int:
    """0 for platform, 1 for operations, 2 for runtime, TOP for the rest of asyncop."""
    for rank, package in enumerate(LAYERS):
        if module == package or module.startswith(package + "."):
            return rank
    return TOP


def is_asyncop(module: str) -> bool:
    return module == "asyncop" or module.startswith("asyncop.")


def is_stdlib(module: str) -> bool:
    return module.split(".")[0] in sys.stdlib_module_names


def unexpected(found: dict[str, list[int]], allowed: set[str]) -> list[str]:
    """Describe what ``found`` has beyond ``allowed``, and what ``allowed`` lists in vain."""
    problems = [
        f"{key} (line {', '.join(map(str, lines))})"
        for key, lines in sorted(found.items())
        if key not in allowed
    ]
    problems += [f"stale allowlist entry, remove it: {key}" for key in allowed if key not in found]
    return problems


def require_none(problems: list[str], rule: str) -> None:
    """Fail with every problem on its own line, under the rule they break."""
    if problems:
        pytest.fail(f"{rule}:\n  " + "\n  ".join(problems), pytrace=False)


def keyed(imports: Iterator[Import]) -> dict[str, list[int]]:
    """The imports as ``"importer -> target"``, with the lines they stand on."""
    found: dict[str, list[int]] = {}
    for imp in imports:
        lines = found.setdefault(f"{imp.importer} -> {imp.target}", [])
        if imp.line not in lines:
            lines.append(imp.line)
    return found


def key_of(pairs: dict[tuple[str, str], str]) -> set[str]:
    return {f"{a} -> {b}" for a, b in pairs}


# ----------------------------------------------------------------------
# Layers
# ----------------------------------------------------------------------


def test_reader_sees_the_three_layers_and_their_modules() -> None:
    names = sources()
    assert set(LAYERS) <= set(names)
    assert "asyncop.runtime._core._scope" in names and "asyncop.net" in names
    found = {imp.target for imp in imports_of("asyncop.runtime._net._tcp")}
    assert {"asyncop.runtime._net._dns", "asyncop.operations", "socket"} <= found


@pytest.mark.parametrize("layer", THIRD_PARTY)
def test_low_layers_use_only_the_standard_library_and_their_listed_packages(layer: str) -> None:
    bad = [
        str(imp)
        for imp in all_imports()
        if layer_of(imp.importer) == LAYERS.index(layer)
        and not is_asyncop(imp.target)
        and not is_stdlib(imp.target)
        and imp.target.split(".")[0] not in THIRD_PARTY[layer]
    ]
    require_none(bad, f"{layer} imports a package outside its allowance")


def test_imports_flow_down_the_layers() -> None:
    # Type-only imports count too: the layers below name nothing above them.
    upward = (
        imp
        for imp in all_imports()
        if is_asyncop(imp.target) and layer_of(imp.target) > layer_of(imp.importer)
    )
    problems = unexpected(keyed(upward), key_of(UPWARD_TYPE_IMPORTS))
    require_none(problems, "an import points up the layers")
    for importer, target in UPWARD_TYPE_IMPORTS:
        assert all(imp.type_only for imp in imports_of(importer) if imp.target == target), (
            f"{importer} -> {target} is allowed for type hints only"
        )


def test_each_package_is_used_through_its_face() -> None:
    def crosses(imp: Import) -> bool:
        return any(
            imp.target.startswith(package + ".")
            and not (imp.importer == package or imp.importer.startswith(package + "."))
            for package in LAYERS
        )

    problems = unexpected(keyed(filter(crosses, all_imports())), key_of(FACE_EXCEPTIONS))
    require_none(problems, "an import reaches into a package past its __init__.py")


# ----------------------------------------------------------------------
# The packages built on the runtime's face
# ----------------------------------------------------------------------

RUNTIME = "asyncop.runtime"

#: The runtime's packages that use its core (``_core``) and its primitives
#: (``_primitives``) as a user would: through the public names of
#: ``asyncop.runtime`` (which hold ``asyncop.lowlevel``'s), never a ``_``
#: module or a private name. Among themselves they may share their insides.
ON_THE_FACE = (
    "asyncop.runtime._net",  # streams, TCP, TLS, UDP, Unix sockets, DNS, servers
    "asyncop.runtime._proc",  # processes and signals
    "asyncop.runtime._executors",  # process pools and remote executors
)

#: "importer -> what it takes past the face" -> why it stands.
PAST_THE_FACE: dict[str, str] = {
    "asyncop.runtime._net._serve -> asyncop.runtime._core._awaitables": (
        "waits for the serving loop's operation and the stop request in one select(), "
        "which takes the operation as a wait through OpWait; no public name makes one"
    ),
    **{
        f"asyncop.runtime._executors.{importer} -> asyncop.runtime.{module}": (
            "the face imports the executors as it loads (ProcessExecutor is in "
            "import asyncop, and Runtime.spawn tests for a RemoteExecutor), so they "
            "cannot import the face and take these names from their modules"
        )
        for importer, module in (
            ("_remote", "_core._waker"),
            ("_remote", "_kinds"),
            ("_remote_call", "_kinds"),
            ("_remote_call", "_scheduler"),
        )
    },
}


def is_on_the_face(module: str) -> bool:
    return any(module == package or module.startswith(package + ".") for package in ON_THE_FACE)


def past_the_face(
    importer: str, tree: ast.Module, is_package: bool, public: frozenset[str]
) -> Iterator[tuple[str, int]]:
    """What ``importer`` takes from the runtime past its face, and the line.

    ``"importer -> asyncop.runtime._x"`` for an import from a runtime
    module outside the packages on the face, ``"importer -> asyncop.runtime.name"``
    for a name the face does not publish (in ``public``).
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = absolute(importer, is_package, node)
            if base == RUNTIME:
                for alias in node.names:
                    if alias.name not in public:
                        yield f"{importer} -> {RUNTIME}.{alias.name}", node.lineno
                continue
            targets = [base]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        for target in targets:
            if target.startswith(RUNTIME + ".") and not is_on_the_face(target):
                yield f"{importer} -> {target}", node.lineno


def test_face_checker_finds_what_a_package_takes_past_the_face() -> None:
    tree = ast.parse(
        "import socket\n"
        "from ...operations import Cancelled\n"
        "from .. import readable, scope\n"
        "from .. import _scheduler, hidden\n"
        "from . import _dns\n"
        "from ._streams import close_fd\n"
        "from .._proc._pipes import PipeStream\n"
        "from .._core._awaitables import OpWait\n"
        "import asyncop.runtime._kinds\n"
        "if TYPE_CHECKING:\n"
        "    from .._primitives._sync import Lock\n"
    )
    found = past_the_face(
        "asyncop.runtime._net._tcp", tree, False, frozenset({"readable", "scope"})
    )
    assert sorted(found, key=lambda item: (item[1], item[0])) == [
        ("asyncop.runtime._net._tcp -> asyncop.runtime._scheduler", 4),
        ("asyncop.runtime._net._tcp -> asyncop.runtime.hidden", 4),
        ("asyncop.runtime._net._tcp -> asyncop.runtime._core._awaitables", 8),
        ("asyncop.runtime._net._tcp -> asyncop.runtime._kinds", 9),
        ("asyncop.runtime._net._tcp -> asyncop.runtime._primitives._sync", 11),
    ]
    package = ast.parse("from . import _dns\nfrom .. import _core\n")
    assert list(past_the_face("asyncop.runtime._net", package, True, frozenset())) == [
        ("asyncop.runtime._net -> asyncop.runtime._core", 2)
    ]


def public_runtime_names() -> frozenset[str]:
    """The names in ``asyncop.runtime.__all__``."""
    for node in sources()[RUNTIME][1].body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return frozenset(ast.literal_eval(node.value))
    raise AssertionError("asyncop/runtime/__init__.py has no __all__")


def test_the_network_processes_and_executors_use_the_runtime_through_its_face() -> None:
    assert all(package in sources() for package in ON_THE_FACE)
    public = public_runtime_names()
    found: dict[str, list[int]] = {}
    for module, (path, tree) in sources().items():
        if is_on_the_face(module):
            for key, line in past_the_face(module, tree, path.name == "__init__.py", public):
                found.setdefault(key, []).append(line)
    problems = unexpected(found, set(PAST_THE_FACE))
    require_none(problems, "a package on the runtime's face reaches past it")


def test_the_compiled_modules_are_the_core_folder_the_operations_listed_and_the_lock() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["hatch"]["build"]["targets"]["wheel"]["hooks"]["custom"]["modules"])
    core = {
        path.relative_to(ROOT).as_posix()
        for path in (PACKAGE / "runtime" / "_core").glob("*.py")
        if path.name != "__init__.py"
    }
    layers = ("asyncop/operations/", "asyncop/platform/")
    assert {path for path in listed if not path.startswith(layers)} == core
    # Of the platform, only the runtime's lock: the core takes it with C calls.
    assert {path for path in listed if path.startswith(layers[1])} == {"asyncop/platform/_lock.py"}


# ----------------------------------------------------------------------
# Cycles and function-level imports
# ----------------------------------------------------------------------


#: The modules below the kernel: they reach the runtime through the kernel's
#: calls alone (``_core/_kernel.py``) and never name the public Runtime.
BELOW_KERNEL = (
    *(
        f"asyncop.runtime._core.{name}"
        for name in (
            "_abandon",
            "_awaitables",
            "_io_wait",
            "_items",
            "_monitor",
            "_reactor",
            "_scope",
            "_task",
            "_timers",
            "_waker",
            "_worker",
        )
    ),
    "asyncop.runtime._compose",
    "asyncop.runtime._primitives._limiter",
)


def test_modules_below_the_kernel_never_reach_the_runtime_class() -> None:
    problems = [
        f"{imp.importer} -> {imp.target} (line {imp.line})"
        for name in BELOW_KERNEL
        for imp in imports_of(name)
        if imp.target == SCHEDULER and (imp.importer, imp.target) not in FUNCTION_IMPORTS
    ]
    require_none(problems, "a module below the kernel imports the Runtime's module")


def import_graph() -> dict[str, set[str]]:
    """asyncop's modules and the asyncop modules each imports when it is imported."""
    graph: dict[str, set[str]] = {name: set() for name in sources()}
    for imp in all_imports():
        if imp.target in graph and not (imp.type_only or imp.in_function):
            graph[imp.importer].add(imp.target)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Tarjan's algorithm, without recursion: the components of ``graph``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[frozenset[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for succ in edges:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    members = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.add(member)
                        if member == node:
                            break
                    components.append(frozenset(members))
    return components


def test_component_finder_finds_a_cycle_and_leaves_a_chain_alone() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    found = {c for c in strongly_connected(graph) if len(c) > 1}
    assert found == {frozenset({"a", "b", "c"})}


def test_top_level_imports_form_no_cycle() -> None:
    cycles = {c: " <-> ".join(sorted(c)) for c in strongly_connected(import_graph()) if len(c) > 1}
    problems = [f"import cycle: {text}" for c, text in cycles.items() if c not in CYCLES]
    problems += [
        f"stale allowlist entry, remove it: {' <-> '.join(sorted(c))}"
        for c in CYCLES
        if c not in cycles
    ]
    require_none(problems, "the top-level imports form a cycle")


def test_modules_import_at_the_top_not_inside_functions() -> None:
    inner = (imp for imp in all_imports() if imp.in_function)
    problems = unexpected(keyed(inner), key_of(FUNCTION_IMPORTS))
    require_none(problems, "an import stands inside a function")


# ----------------------------------------------------------------------
# Sizes
# ----------------------------------------------------------------------


def functions() -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """``module:qualname`` and the node of every function, nested ones included."""

    def visit(
        module: str, node: ast.AST, prefix: str
    ) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{module}:{prefix}{child.name}", child
                yield from visit(module, child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from visit(module, child, f"{prefix}{child.name}.")
            else:
                yield from visit(module, child, prefix)

    for module, (_, tree) in sources().items():
        yield from visit(module, tree, "")


def function_sizes() -> Iterator[tuple[str, int]]:
    """``module:qualname`` and the number of lines of each function's code.

    A function's size counts its lines from the first statement after the
    docstring to the last; the docstring, however long, is free.
    """
    for name, node in functions():
        body = node.body
        if (
            len(body) > 1
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body = body[1:]
        yield name, (node.end_lineno or node.lineno) - body[0].lineno + 1


def function_spans() -> Iterator[tuple[str, int]]:
    """``module:qualname`` and every line of each function, decorators to last line."""
    for name, node in functions():
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        yield name, (node.end_lineno or first) - first + 1


def check_sizes(sizes: dict[str, int], limit: int, allowed: dict[str, int]) -> list[str]:
    problems = []
    for name, size in sorted(sizes.items()):
        if size > allowed.get(name, limit):
            ceiling = allowed.get(name, limit)
            problems.append(f"{name}: {size} lines, over its limit of {ceiling}")
    problems += [
        f"stale allowlist entry, remove it: {name} ({sizes.get(name, 0)} lines now)"
        for name in allowed
        if sizes.get(name, 0) <= limit
    ]
    return problems


def test_modules_stay_short() -> None:
    sizes = {
        name: len(path.read_text(encoding="utf-8").splitlines())
        for name, (path, _) in sources().items()
    }
    require_none(check_sizes(sizes, MAX_MODULE_LINES, LONG_MODULES), "a module grew too long")


def test_no_function_spans_more_than_100_lines_with_its_docstring() -> None:
    too_long = [
        f"{name}: {lines} lines" for name, lines in function_spans() if lines > MAX_FUNCTION_SPAN
    ]
    require_none(too_long, f"a function spans more than {MAX_FUNCTION_SPAN} lines")


def test_functions_stay_short() -> None:
    require_none(
        check_sizes(dict(function_sizes()), MAX_FUNCTION_LINES, LONG_FUNCTIONS),
        "a function grew too long",
    )


# ----------------------------------------------------------------------
# State machines
# ----------------------------------------------------------------------


def is_transition(name: str) -> bool:
    """Whether a function of this name is a transition of a state machine."""
    return name.lstrip("_").startswith("transition_to_")


def called_name(node: ast.expr) -> str | None:
    """The name a call calls (``f(...)`` or ``x.f(...)``), or None for anything else."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def assigned(node: ast.AST) -> Iterator[ast.expr]:
    """The targets a statement writes, tuples unpacked, and ``setattr``'s."""
    if isinstance(node, ast.Assign):
        stack = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        stack = [node.target]
    elif (
        isinstance(node, ast.Expr)
        and called_name(node.value) == "setattr"
        and len(node.value.args) == 3  # type: ignore[attr-defined]
    ):
        obj, field, _ = node.value.args  # type: ignore[attr-defined]
        if isinstance(field, ast.Constant) and isinstance(field.value, str):
            stack = [ast.Attribute(value=obj, attr=field.value, ctx=ast.Store())]
        else:
            stack = []
    else:
        stack = []
    while stack:
        target = stack.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            stack.extend(target.elts)
        elif isinstance(target, ast.Starred):
            stack.append(target.value)
        else:
            yield target


def state_writes(
    module: str,
    tree: ast.Module,
    fields: dict[tuple[str, str], str],
    inline: frozenset[tuple[str, str]] = frozenset(),
    setters: frozenset[str] = frozenset(),
) -> Iterator[tuple[str, int]]:
    """``"module:function field"`` and the line of every write of a state field
    that its owner's transitions do not make (nor its holder's ``__init__``).

    The owner of a field in ``inline`` may write it in any of its functions;
    a function of the owner named in ``setters`` (``"module:function"``) may
    write the first state.
    """
    names = {field for _, field in fields}

    def visit(node: ast.AST, cls: str, fn: str) -> Iterator[tuple[str, int]]:
        for target in assigned(node):
            if not (isinstance(target, ast.Attribute) and target.attr in names):
                continue
            field = target.attr
            if fn == "__init__" and (cls, field) in fields:
                continue  # the first state
            owned = [key for key, owner in fields.items() if key[1] == field and owner == module]
            if any(key in inline for key in owned) or (owned and f"{module}:{fn}" in setters):
                continue
            on_self = isinstance(target.value, ast.Name) and target.value.id == "self"
            if owned and on_self and is_transition(fn):
                continue
            yield f"{module}:{fn or '<module>'} {field}", node.lineno
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                yield from visit(child, child.name, fn)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from visit(child, cls, child.name)
            else:
                yield from visit(child, cls, fn)

    yield from visit(tree, "", "")


def dropped_transitions(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """Each call of a transition whose answer is dropped, and its line.

    Dropped: called as a statement, or inside an ``assert``, which
    ``python -O`` strips with the call in it. Also a transition defined
    without saying (``-> bool``) whether it happened.
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and is_transition(called_name(node.value) or ""):
            yield f"{called_name(node.value)}() called as a statement", node.lineno
        elif isinstance(node, ast.Assert):
            for inner in ast.walk(node):
                if is_transition(called_name(inner) or ""):  # type: ignore[arg-type]
                    yield f"{called_name(inner)}() called in an assert", node.lineno  # type: ignore[arg-type]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and is_transition(node.name):
            returns = node.returns
            if not (isinstance(returns, ast.Name) and returns.id == "bool"):
                yield f"{node.name}() does not return bool", node.lineno


def enum_classes() -> set[str]:
    """The names of asyncop's enum classes."""
    found = set()
    for _, tree in sources().values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                (isinstance(base, ast.Name) and base.id.endswith("Enum"))
                or (isinstance(base, ast.Attribute) and base.attr.endswith("Enum"))
                for base in node.bases
            ):
                found.add(node.name)
    return found


def enum_aliases(tree: ast.Module, enums: set[str]) -> Iterator[tuple[str, int]]:
    """Each module-level name bound to a member of one of ``enums``, and its line."""

    def members(value: ast.expr | None) -> list[ast.expr]:
        return list(value.elts) if isinstance(value, ast.Tuple) else [value] if value else []

    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.If, ast.Try)):
            stack.extend(node.body + node.orelse + getattr(node, "finalbody", []))
            continue
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        for value in members(node.value):
            if (
                isinstance(value, ast.Attribute)
                and isinstance(value.value, ast.Name)
                and value.value.id in enums
            ):
                yield f"{value.value.id}.{value.attr}", node.lineno


def test_state_rule_checker_finds_writes_outside_transitions() -> None:
    fields = {("Worker", "state"): "pkg.worker"}
    worker = ast.parse(
        "class Worker:\n"
        "    def __init__(self):\n"
        "        self.state = 1\n"
        "    def _transition_to_parked(self) -> bool:\n"
        "        self.state = 2\n"
        "        return True\n"
        "    def park(self):\n"
        "        self.state = 3\n"
        "def retire(worker):\n"
        "    worker.state = 4\n"
    )
    pool = ast.parse("def unpark(worker):\n    worker.busy, worker.state = True, 1\n")
    assert list(state_writes("pkg.worker", worker, fields)) == [
        ("pkg.worker:park state", 8),
        ("pkg.worker:retire state", 10),
    ]
    assert list(state_writes("pkg.pool", pool, fields)) == [("pkg.pool:unpark state", 2)]
    inline = frozenset(fields)
    assert list(state_writes("pkg.worker", worker, fields, inline)) == []
    assert list(state_writes("pkg.pool", pool, fields, inline)) == [("pkg.pool:unpark state", 2)]
    setters = frozenset({"pkg.worker:retire", "pkg.pool:unpark"})
    assert list(state_writes("pkg.worker", worker, fields, setters=setters)) == [
        ("pkg.worker:park state", 8),
    ]
    # (Only the owner's own function may set the first state.)
    assert list(state_writes("pkg.pool", pool, fields, setters=setters)) == [
        ("pkg.pool:unpark state", 2)
    ]


def test_state_rule_checker_finds_dropped_answers() -> None:
    tree = ast.parse(
        "def _transition_to_busy(self) -> bool: ...\n"
        "def _transition_to_retired(self): ...\n"
        "w._transition_to_busy()\n"
        "assert w._transition_to_busy()\n"
        "if w._transition_to_busy():\n"
        "    pass\n"
        "done = w._transition_to_busy()\n"
    )
    assert sorted(dropped_transitions(tree), key=lambda found: found[1]) == [
        ("_transition_to_retired() does not return bool", 2),
        ("_transition_to_busy() called as a statement", 3),
        ("_transition_to_busy() called in an assert", 4),
    ]


def test_alias_checker_finds_module_level_members_only() -> None:
    tree = ast.parse(
        "_RUNNING = State.RUNNING\n"
        "_A, _B = State.A, Other.B\n"
        "FINAL = frozenset({State.DONE})\n"
        "def f():\n"
        "    running = State.RUNNING\n"
    )
    assert sorted(enum_aliases(tree, {"State", "Other"})) == [
        ("Other.B", 2),
        ("State.A", 2),
        ("State.RUNNING", 1),
    ]


def test_state_fields_name_real_classes_and_owners() -> None:
    classes = {
        node.name
        for _, tree in sources().values()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    }
    for (holder, field), owner in STATE_FIELDS.items():
        assert holder in classes, f"no class {holder} holds {field}"
        assert owner in sources(), f"no module {owner} owns {holder}.{field}"
    assert set(OWNER_WRITES_INLINE) <= set(STATE_FIELDS)


def test_state_fields_are_written_only_by_their_owners_transitions() -> None:
    found: dict[str, list[int]] = {}
    inline = frozenset(OWNER_WRITES_INLINE)
    setters = frozenset(FIRST_STATE_SETTERS)
    for module, (_, tree) in sources().items():
        for where, line in state_writes(module, tree, STATE_FIELDS, inline, setters):
            found.setdefault(where, []).append(line)
    problems = unexpected(found, set(STATE_WRITE_EXCEPTIONS))
    require_none(problems, "a state field is written outside its owner's transitions")


def test_every_transitions_answer_is_used() -> None:
    found: dict[str, list[int]] = {}
    for module, (_, tree) in sources().items():
        for what, line in dropped_transitions(tree):
            found.setdefault(f"{module}: {what}", []).append(line)
    require_none(unexpected(found, set(DROPPED_ANSWERS)), "a transition's answer is dropped")


def test_no_module_keeps_an_alias_of_an_enum_member() -> None:
    enums = enum_classes()
    assert {"OperationState", "WakerStatus", "TimerState"} <= enums
    problems = [
        f"{module}:{line}: {member}"
        for module, (_, tree) in sources().items()
        for member, line in enum_aliases(tree, enums)
    ]
    require_none(problems, "a module keeps an alias of an enum member; name the member")


# ----------------------------------------------------------------------
# The runtime's names loaded on first use
# ----------------------------------------------------------------------


def lazy_table() -> dict[str, str]:
    """The ``_LAZY`` table of ``asyncop/runtime/__init__.py``: name -> module."""
    for node in sources()["asyncop.runtime"][1].body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "_LAZY" for target in node.targets
        ):
            table: dict[str, str] = ast.literal_eval(node.value)
            return table
    raise AssertionError("asyncop/runtime/__init__.py has no _LAZY table")


def test_names_loaded_on_first_use_are_the_ones_imported_for_type_checkers() -> None:
    typed: dict[str, str] = {}
    for node in sources()["asyncop.runtime"][1].body:
        if isinstance(node, ast.If) and is_type_checking(node.test):
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.level == 1, ast.unparse(stmt)
                for alias in stmt.names:
                    assert alias.asname == alias.name, f"re-export {alias.name} as itself"
                    typed[alias.name] = stmt.module or ""
    assert typed == lazy_table()


def test_import_asyncop_leaves_ssl_asyncio_and_the_network_modules_for_later() -> None:
    unloaded = sorted(
        {f"asyncop.runtime.{module}" for module in lazy_table().values()} | {"ssl", "asyncio"}
    )
    code = (
        "import sys\n"
        "import asyncop\n"
        f"print(sorted(name for name in {unloaded!r} if name in sys.modules))\n"
        "import asyncop.runtime\n"
        "opener = asyncop.runtime.open_tcp_stream\n"
        "import asyncop.net\n"
        "print(opener is asyncop.net.open_tcp_stream, 'ssl' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[]", "True True"]
