"""Child processes: run a command, or talk to one over pipes.

::

    import asyncop
    from asyncop.process import open_process, run_process

    async def main():
        result = await run_process(["git", "rev-parse", "HEAD"])
        print(result.stdout.decode().strip())

        async with open_process(["cat"]) as process:
            await process.stdin.send_all(b"hello\\n")
            await process.stdin.send_eof()
            print(await process.stdout.receive_until(b"\\n", 1024))

The pipes (``PipeStream``) are ``asyncop.net.Stream`` objects: the socket
streams over a pipe, with the same methods, errors and cancellation rules.

An operation that waits for a process ends only once the process has been
reaped. Cancelling the wait sends ``SIGTERM``, then ``SIGKILL`` after
``kill_grace`` seconds (5 by default), and waits for the process to go.
Each process leads a process group of its own unless ``start_new_session``
or ``process_group`` say otherwise, and then both signals go to the whole
group: a shell pipeline, or a child the process started, is stopped too.
"""

from __future__ import annotations

from subprocess import DEVNULL as DEVNULL
from subprocess import PIPE as PIPE
from subprocess import STDOUT as STDOUT

from ._exports import publish as _publish
from .runtime import PipeStream as PipeStream
from .runtime import Process as Process
from .runtime import open_process as open_process
from .runtime import run_process as run_process

__all__ = [
    "DEVNULL",
    "PIPE",
    "STDOUT",
    "PipeStream",
    "Process",
    "open_process",
    "run_process",
]

_publish("asyncop.process", globals(), __all__)
