"""Functions the executor tests run in worker processes (importable there)."""

from __future__ import annotations

import os
import sys
import threading
import time
import types
from pathlib import Path

import asyncop


def _write(path: str, text: str) -> None:
    """Write ``text`` so that a reader never sees the file empty or half written."""
    partial = f"{path}.partial"
    Path(partial).write_text(text)
    os.replace(partial, path)


def square(x: int) -> int:
    return x * x


def pid() -> int:
    return os.getpid()


def fail(message: str) -> None:
    raise ValueError(message)


def make_generator() -> object:
    return (i for i in range(3))


def touch(path: str) -> str:
    _write(path, "ran")
    return "ran"


def poll_token(seconds: float, path: str | None = None) -> str:
    """Poll the remote token every 10 ms; record when the cancel was seen."""
    token = asyncop.remote_token()
    end = time.monotonic() + seconds
    if path is not None:
        _write(path + ".started", str(os.getpid()))
    while time.monotonic() < end:
        if token.cancelled:
            if path is not None:
                _write(path, repr(time.time()))
            token.check()
        time.sleep(0.01)
    return "finished"


def wait_token(timeout: float) -> bool:
    return asyncop.remote_token().wait(timeout)


def ignore_token(seconds: float, path: str | None = None) -> str:
    """Compute without ever looking at the token."""
    if path is not None:
        _write(path, str(os.getpid()))
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(1000))
    return "ignored"


def remote_tree(path: str) -> str:
    """Run a runtime with a subtree of sleepers; report how it ended."""

    async def leaf() -> None:
        try:
            await asyncop.sleep(60)
        finally:
            with open(path, "a") as f:
                f.write("leaf ended\n")

    async def main() -> None:
        async with asyncop.scope() as s:
            for _ in range(3):
                s.spawn(leaf)

    with asyncop.Runtime(1) as runtime:
        _write(path + ".started", str(os.getpid()))
        try:
            runtime.run(main)
        finally:
            with open(path, "a") as f:
                f.write("root ended\n")
    asyncop.remote_token().check()
    return "not cancelled"


def outside_token() -> str:
    try:
        asyncop.remote_token()
    except RuntimeError as exc:
        return str(exc)
    return "no error"


def die(code: int) -> None:
    """End the worker process abruptly."""
    os._exit(code)


class UnpicklableError(Exception):
    def __init__(self) -> None:
        super().__init__("holds a lock")
        self.lock = threading.Lock()


def raise_unpicklable() -> None:
    raise UnpicklableError


class Tally:
    """A callable object with state: each call counts itself."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.calls


def echo(value: object) -> object:
    return value


def spin_token(seconds: float, path: str) -> str:
    """Read the remote token without pause; leave the moment it is cancelled."""
    token = asyncop.remote_token()
    _write(path + ".started", str(os.getpid()))
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        token.check()
    return "finished"


# -- outcomes that cannot cross -------------------------------------------------


class PairError(Exception):
    """Pickles, but cannot be rebuilt: pickle calls ``__init__`` with ``args`` alone."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


def raise_pair_error() -> None:
    raise PairError(7, "two arguments")


def _refuse_to_load() -> None:
    raise ValueError("refuses to be unpickled")


class LoadRefused:
    """Pickles anywhere; unpickling it raises."""

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return (_refuse_to_load, ())


def return_load_refused() -> LoadRefused:
    return LoadRefused()


def _worker_only() -> types.ModuleType:
    """A module that exists only in the process that calls this (a worker)."""
    module = sys.modules.get("asyncop_worker_only")
    if module is None:
        module = types.ModuleType("asyncop_worker_only")
        exec("class Thing:\n    pass\n\nclass ThingError(Exception):\n    pass\n", module.__dict__)
        sys.modules[module.__name__] = module
    return module


def return_worker_only() -> object:
    return _worker_only().Thing()  # type: ignore[no-any-return]


def raise_worker_only() -> None:
    raise _worker_only().ThingError("only the worker knows this class")


# (function, args, the error the operation fails with, what its message must
# say, the type of its __cause__): each outcome fails its operation, on
# every executor, instead of leaving it running.
CANNOT_CROSS: list[tuple[object, tuple[object, ...], type[BaseException], str, type | None]] = [
    (
        raise_pair_error,
        (),
        RuntimeError,
        r"'raise_pair_error' raised PairError\('7: two arguments'\) in .*, which cannot be "
        r"rebuilt here \(TypeError: .*missing 1 required positional argument: 'detail'\)",
        TypeError,
    ),
    (
        raise_worker_only,
        (),
        RuntimeError,
        r"'raise_worker_only' raised ThingError\(.*\) in .*, which cannot be rebuilt here "
        r"\(ModuleNotFoundError: No module named 'asyncop_worker_only'\)",
        ModuleNotFoundError,
    ),
    (
        return_load_refused,
        (),
        TypeError,
        r"the result of 'return_load_refused' \(a tests\.runtime\._remote_jobs\.LoadRefused\) "
        r"came back from .* but cannot be rebuilt here \(ValueError: refuses to be unpickled\)",
        ValueError,
    ),
    (
        return_worker_only,
        (),
        TypeError,
        r"the result of 'return_worker_only' \(a asyncop_worker_only\.Thing\) came back "
        r"from .* but cannot be rebuilt here \(ModuleNotFoundError: No module named "
        r"'asyncop_worker_only'\)",
        ModuleNotFoundError,
    ),
    (
        make_generator,
        (),
        TypeError,
        r"the result of 'make_generator' \(a generator\) cannot be pickled to come back "
        r"from .* \(TypeError: cannot pickle 'generator' object\)",
        None,
    ),
    (
        raise_unpicklable,
        (),
        RuntimeError,
        r"'raise_unpicklable' raised UnpicklableError\('holds a lock'\) in .*, which cannot "
        r"be pickled to come back \(TypeError: cannot pickle '_thread.lock' object\)",
        None,
    ),
    (
        echo,
        (LoadRefused(),),
        TypeError,
        r"the call echo\(\.\.\.\) cannot be rebuilt in .* \(ValueError\('refuses to be "
        r"unpickled'\)\)",
        ValueError,
    ),
]


def remote_scope(path: str) -> str:
    """Block in a sync scope of the job's own runtime; build a value after it."""

    async def sleeper() -> None:
        await asyncop.sleep(30)

    with asyncop.Runtime(1) as runtime:
        with runtime.scope() as scope:
            scope.spawn(sleeper)
            _write(path + ".started", str(os.getpid()))
        return "built after the interrupted scope"


def remote_shielded_scope(path: str) -> str:
    """A shielded scope of the job's own runtime: the remote cancel must not enter it."""

    async def leaf() -> None:
        await asyncop.sleep(0.5)
        _write(path, "leaf finished")

    with asyncop.Runtime(1) as runtime, runtime.scope(shield=True) as scope:
        scope.spawn(leaf)
        _write(path + ".started", str(os.getpid()))
    asyncop.remote_token().check()
    return "not cancelled"
