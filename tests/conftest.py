"""Shared fixtures: runtimes that are always shut down, and thread-leak checks."""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator

import pytest

import asyncop
from asyncop.testing import VirtualClock

# An installed asyncop registers its plugin through its entry point, under
# the same name: this finds it registered, and loads it for a bare checkout.
pytest_plugins = ["asyncop.pytest_plugin", "pytester"]


# For tests of the default execution model (no two steps overlap), which a
# run of the suite with ASYNCOP_PARALLEL=1 (every runtime parallel) skips.
needs_default_mode = pytest.mark.skipif(
    os.environ.get("ASYNCOP_PARALLEL", "") == "1",
    reason="tests the default mode, where coroutine steps never overlap",
)


def runtime_threads(runtime: asyncop.Runtime) -> list[threading.Thread]:
    """The live threads whose names say they belong to ``runtime``."""
    prefix = f"{runtime.name}-"
    return [t for t in threading.enumerate() if t.name.startswith(prefix) and t.is_alive()]


@pytest.fixture
def runtime() -> Iterator[asyncop.Runtime]:
    """A 2-worker runtime on the real clock; shut down and checked for leaks."""
    rt = asyncop.Runtime(2, name=f"rt{id(object()):x}")
    try:
        yield rt
    finally:
        assert rt.shutdown(timeout=10), "runtime did not shut down in 10 s"
        assert runtime_threads(rt) == []


@pytest.fixture
def vruntime() -> Iterator[asyncop.Runtime]:
    """A 2-worker runtime on an autojumping virtual clock."""
    rt = asyncop.Runtime(2, name=f"vrt{id(object()):x}", clock=VirtualClock(autojump=True))
    try:
        yield rt
    finally:
        assert rt.shutdown(timeout=10), "runtime did not shut down in 10 s"
        assert runtime_threads(rt) == []


class Marker:
    """An object that lives in a test's frame: freed only with the frame.

    A weak reference to one tells whether the frame (and the exceptions
    and tracebacks that hold it) were freed by reference counting alone.
    """


@pytest.fixture
def no_gc() -> Iterator[None]:
    """Run the test with the cyclic collector off, so a cycle stays alive."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
