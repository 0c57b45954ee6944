"""What running asyncop's compiled core changes for the tests.

``COMPILED`` is true when the core modules run as extension modules
(``asyncop.lowlevel.is_compiled()``), false under
``ASYNCOP_NO_EXTENSIONS=1`` or an install without a C compiler.

``runs_bytecode`` marks a test that reaches into the core's Python code
between two of its bytecodes, with a profile hook on one of its functions:
compiled, those functions run no bytecode and make no profile events, so
the hook never fires and the test would pass without testing anything.
"""

from __future__ import annotations

import pytest

from asyncop.lowlevel import is_compiled

__all__ = ["COMPILED", "runs_bytecode"]

COMPILED = is_compiled()

runs_bytecode = pytest.mark.skipif(
    COMPILED,
    reason="injects a Ctrl-C with a profile hook inside a core function, which compiled "
    "makes no profile events (a real signal lands only where it calls Python code)",
)
