"""``dump_on_signal``: a signal that prints every live runtime's tree.

For a program that seems stuck and has no console::

    asyncop.dump_on_signal()          # at start-up, in the main thread
    ...
    $ kill -USR1 <pid>                # prints each runtime's dump() on stderr

Python runs signal handlers in the main thread, between two bytecodes of
whatever it was doing, perhaps in the middle of a change to the tree under
the runtime's lock (which is reentrant, so the handler would walk a
half-changed tree), or of a write to the same stderr (whose buffer refuses
a reentrant write). So the handler itself only starts a thread, which takes
the dumps under each runtime's lock, as any other reader does, and writes
them. The thread is not a daemon: a program that exits just after the
signal still prints the dump first.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TextIO

from ..operations import safe_repr
from ..platform import is_main_thread
from ._scheduler import live_runtimes

__all__ = ["dump_on_signal"]

# The signals no process can catch.
_UNCATCHABLE = frozenset(
    getattr(signal, name) for name in ("SIGKILL", "SIGSTOP") if hasattr(signal, name)
)


def dump_on_signal(signum: int = signal.SIGUSR1, file: TextIO | None = None) -> Callable[[], None]:
    """Make signal ``signum`` print the ``dump()`` of every live runtime to ``file``.

    Each time the signal arrives, a line naming it and the process, then
    each runtime's ``dump()``, are written to ``file`` (``sys.stderr`` as it
    is then, when None) and flushed. Call it from the main thread: Python
    runs signal handlers only there, and only the main thread may install
    them. It replaces the signal's handler until the function it returns is
    called. Not a cancellation point.

    Args:
        signum: the signal, ``signal.SIGUSR1`` by default.
        file: a text file to write to; None for ``sys.stderr``.

    Returns:
        ``undo()``: puts back the handler that was there before, if the
        signal's handler is still this one (from the main thread too); a
        second call does nothing.

    Raises:
        RuntimeError: called from another thread than the main thread.
        TypeError: ``signum`` is not an int, or ``file`` has no ``write()``.
        ValueError: ``signum`` names no signal, or one that cannot be caught.
    """
    if isinstance(signum, bool) or not isinstance(signum, int):
        raise TypeError(
            f"dump_on_signal(signum=...) needs a signal number, got {type(signum).__name__}; "
            "pass one such as signal.SIGUSR1"
        )
    if signum not in signal.valid_signals() or signum in _UNCATCHABLE:
        raise ValueError(
            f"dump_on_signal(signum={signum}) names no signal that a handler can catch; "
            "pass one such as signal.SIGUSR1"
        )
    if file is not None and not callable(getattr(file, "write", None)):
        raise TypeError(
            f"dump_on_signal(file=...) needs a text file with write(), got "
            f"{safe_repr(file)}; pass an open text file, or None for sys.stderr"
        )
    if not is_main_thread():
        raise RuntimeError(
            "dump_on_signal() was called from another thread than the main thread, and "
            "Python runs signal handlers, and lets them be installed, only in the main "
            "thread; call it from the main thread, at start-up"
        )

    def handler(received: int, frame: FrameType | None) -> None:
        # Not here: see the module docstring.
        threading.Thread(
            target=_write_dumps, args=(received, file), name="asyncop-dump-on-signal"
        ).start()

    previous: Any = signal.signal(signum, handler)
    undone = False

    def undo() -> None:
        nonlocal undone
        if undone:
            return
        if not is_main_thread():
            raise RuntimeError(
                "the undo() of dump_on_signal() was called from another thread than the "
                "main thread, where alone Python lets signal handlers change; call it "
                "from the main thread"
            )
        undone = True
        if signal.getsignal(signum) is handler:
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)

    return undo


def _write_dumps(signum: int, file: TextIO | None) -> None:
    """Write the dump of every live runtime; never raises."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    runtimes = live_runtimes()
    parts = [f"asyncop: {name} received by process {os.getpid()}: "]
    parts[0] += f"{len(runtimes)} live runtime" + ("" if len(runtimes) == 1 else "s")
    parts.extend(runtime.dump() for runtime in runtimes)
    out = file if file is not None else sys.stderr
    try:
        out.write("\n".join(parts) + "\n")
        out.flush()
    except Exception:  # a closed file: nothing else to tell it to
        pass
