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

Stopping gracefully, the usual server convention: SIGTERM asks the work to
stop and gives it a grace period; a second SIGTERM, or Ctrl-C, stops at once::

    async def stop_on_signals(received, service, grace):
        asked = False
        async for signum in received:
            if signum == signal.SIGTERM and not asked:
                asked = True
                service.cancel("SIGTERM", grace=grace)  # servers close their listeners,
            else:                                       # handlers see stop_requested()
                service.cancel(signum.name)             # now

    with open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
        runtime.run(main, received)   # main spawns the service and stop_on_signals

``examples/graceful_server.py`` is the whole program, and the how-to page
"Stopping gracefully" explains each step.
"""

from __future__ import annotations

from ._exports import publish as _publish
from .runtime import SignalReceiver as SignalReceiver
from .runtime import open_signal_receiver as open_signal_receiver

__all__ = ["SignalReceiver", "open_signal_receiver"]

_publish("asyncop.signals", globals(), __all__)
