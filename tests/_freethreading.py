"""What a free-threaded CPython build (PEP 703) changes for the tests.

``FREE_THREADED`` is true on such a build, whether its GIL is on or off:
biased reference counting, for one, is a property of the build.

``steps_may_overlap`` marks a test that relies on the default execution
model, in which no two coroutine steps of a runtime run at the same time.
The scheduler does not guarantee that yet: two workers may step coroutines
at once, and with the GIL off they do so often enough for such a test to
fail, so it is expected to fail there (and allowed to pass) until it does.
"""

from __future__ import annotations

import sysconfig

import pytest

__all__ = ["FREE_THREADED", "steps_may_overlap"]

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

steps_may_overlap = pytest.mark.xfail(
    FREE_THREADED,
    strict=False,
    reason="two coroutine steps of one runtime may still run at the same time "
    "on a free-threaded build",
)
