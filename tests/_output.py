"""A subprocess's output, read by threads as it comes.

Waiting for a line with ``select()`` on the pipe and ``readline()`` on its
text stream loses lines: ``readline()`` reads a whole chunk into the
stream's buffer, where ``select()`` does not see it (the wait for the next
line then times out with that line already read), and ``communicate()``
reads the pipe itself, so the lines left in that buffer never reach its
result. Here one thread per stream reads every line into a list, and the
test waits on the list.
"""

from __future__ import annotations

import subprocess
import threading
import time
from typing import IO

__all__ = ["Output"]


class Output:
    """The stdout and stderr of ``proc`` (opened with ``text=True`` and both piped)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None and proc.stderr is not None
        self.proc = proc
        self._changed = threading.Condition()
        self._out: list[str] = []
        self._err: list[str] = []
        self._out_ended = False
        self._taken = 0  # lines of stdout that read_until() has returned
        self._threads = [
            threading.Thread(target=self._pump, args=(proc.stdout, self._out), daemon=True),
            threading.Thread(target=self._pump, args=(proc.stderr, self._err), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _pump(self, stream: IO[str], into: list[str]) -> None:
        for line in stream:
            with self._changed:
                into.append(line)
                self._changed.notify_all()
        with self._changed:
            if into is self._out:
                self._out_ended = True
            self._changed.notify_all()

    @property
    def stdout(self) -> str:
        """Everything the process has printed on stdout so far."""
        with self._changed:
            return "".join(self._out)

    @property
    def unread(self) -> str:
        """What the process has printed on stdout after the lines ``read_until()`` returned."""
        with self._changed:
            return "".join(self._out[self._taken :])

    def read_until(self, text: str, timeout: float = 10) -> str:
        """Wait for a line holding ``text`` after those returned; return the lines up to it."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for index in range(self._taken, len(self._out)):
                    if text in self._out[index]:
                        lines = self._out[self._taken : index + 1]
                        self._taken = index + 1
                        return "".join(lines)
                left = deadline - time.monotonic()
                if self._out_ended or left <= 0:
                    raise AssertionError(
                        f"no line with {text!r} within {timeout} s; got:\n{''.join(self._out)}"
                    )
                self._changed.wait(left)

    def finish(self, timeout: float = 20) -> tuple[int, str, str]:
        """Wait for the process to exit; its status, all of its stdout and all of its stderr."""
        status = self.proc.wait(timeout)
        for thread in self._threads:
            thread.join(timeout)
        with self._changed:
            return status, "".join(self._out), "".join(self._err)
