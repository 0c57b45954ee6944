"""Signals for asyncop programs: receive SIGTERM, SIGHUP or SIGINT in a task.

::

    import signal

    import asyncop
    from asyncop.signals import open_signal_receiver

    async def main(received):
        async for signum in received:
            print("got", signum.name)
            break

    with asyncop.Runtime() as runtime:
        with open_signal_receiver(signal.SIGTERM) as received:
            runtime.run(main, received)

Python installs signal handlers only on the main thread, so the receiver is
opened there, or in a task while the main thread waits in asyncop
(``runtime.run()``), which then installs the handlers for the task; any task
may iterate it. Leaving the ``with`` block restores the previous handlers.
"""

from __future__ import annotations

from ._exports import publish as _publish
from .runtime import SignalReceiver as SignalReceiver
from .runtime import open_signal_receiver as open_signal_receiver

__all__ = ["SignalReceiver", "open_signal_receiver"]

_publish("asyncop.signals", globals(), __all__)
