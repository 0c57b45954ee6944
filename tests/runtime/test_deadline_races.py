"""A deadline that passed is seen by the next checkpoint, whichever thread fires it.

Another thread (the monitor, or a worker) fires a deadline that passes while a
task runs. These tests stop that thread just before the deadline's cancel
(through a profile hook on the runtime's threads, which sees the Python form
of the cancel) and checkpoint in that moment: the cancel must already have
landed, or be waited for, and the checkpoint must raise.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import pytest

import asyncop
from asyncop.testing import VirtualClock

pytestmark = pytest.mark.timeout(30)


class _Pause:
    """Holds a thread that starts a deadline's cancel until the body has checkpointed."""

    def __init__(self, name: str, filename: str) -> None:
        self.name = name
        self.filename = filename
        self.reached = threading.Event()
        self.checkpointed = threading.Event()
        self.body_thread: int | None = None

    def hook(self, frame: FrameType, event: str, arg: object) -> None:
        code = frame.f_code
        if (
            event == "call"
            and code.co_name == self.name
            and code.co_filename.endswith(self.filename)
            and threading.get_ident() != self.body_thread
        ):
            self.reached.set()
            self.checkpointed.wait(10)

    async def checkpoint_while_held(self, landed: Callable[[], bool]) -> None:
        """Checkpoint once the firing thread is held (or the cancel has landed); then free it."""
        self.body_thread = threading.get_ident()
        give_up = time.monotonic() + 10
        while not self.reached.is_set() and not landed() and time.monotonic() < give_up:
            time.sleep(0.001)
        try:
            await asyncop.checkpoint()
        finally:
            self.checkpointed.set()


@contextmanager
def _paused_before(name: str, filename: str) -> Iterator[_Pause]:
    pause = _Pause(name, filename)
    threading.setprofile(pause.hook)
    try:
        yield pause
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
        pause.checkpointed.set()


def _op() -> Any:
    op = asyncop.current_operation()
    assert op is not None
    return op


def test_a_checkpoint_raises_for_a_deadline_another_thread_is_firing() -> None:
    clock = VirtualClock(autojump=False)
    with _paused_before("expire", "_cancel.py") as pause:

        async def main() -> str:
            async with asyncop.scope(timeout=1):
                me = _op()
                clock.advance(2)  # another thread fires the deadline
                await pause.checkpoint_while_held(lambda: me.cancel_reason is not None)
                return "ran on past its deadline"

        with asyncop.Runtime(1, clock=clock) as rt, pytest.raises(TimeoutError):
            rt.run(main)


def test_a_checkpoint_raises_for_a_grace_another_thread_is_ending() -> None:
    clock = VirtualClock(autojump=False)
    with _paused_before("expire", "_grace.py") as pause:

        async def main() -> str:
            me = _op()
            me.cancel("enough", grace=1)
            clock.advance(2)  # another thread ends the grace
            await pause.checkpoint_while_held(lambda: me.cancel_reason is not None)
            return "ran on past its grace"

        with asyncop.Runtime(1, clock=clock) as rt, pytest.raises(asyncop.CancellationError):
            rt.run(main)
