"""What a free-threaded CPython build (PEP 703) changes for the tests.

``FREE_THREADED`` is true on such a build, whether its GIL is on or off:
biased reference counting, for one, is a property of the build.

``steps_may_overlap`` marks a test that relies on the default execution
model, in which no two coroutine steps of a runtime run at the same time:
a run of the suite with ``ASYNCOP_PARALLEL=1`` (every runtime parallel)
skips it.

``may_not_free_by_refcounting`` marks a test that checks that objects go by
reference counting alone, with the collector off: on a free-threaded build
it is expected to fail, but need not.
"""

from __future__ import annotations

import os
import sysconfig

import pytest

__all__ = ["FREE_THREADED", "may_not_free_by_refcounting", "steps_may_overlap"]

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

steps_may_overlap = pytest.mark.skipif(
    os.environ.get("ASYNCOP_PARALLEL", "") == "1",
    reason="relies on the default mode, where no two coroutine steps overlap",
)

may_not_free_by_refcounting = pytest.mark.xfail(
    FREE_THREADED,
    strict=False,
    reason="on the free-threaded 3.13 build a finished coroutine's frame keeps its caller's, "
    "and objects another thread drops are freed later, so freeing by refcounting alone "
    "is not guaranteed there",
)
