"""What an operation has cost so far: ``op.stats``, always on.

::

    op.stats
    # OperationStatistics(steps=3, busy_s=0.00041, cpu_s=0.00039, wakes=2,
    #                     created_at=1052.61, started_at=1052.61, ended_at=1052.72)

The counters live on the node itself, among the fields of its base
``OperationFields`` (``_fields.py``): counting costs a few field writes
per step, and nothing is made until somebody reads ``op.stats``,
which builds a frozen :class:`OperationStatistics` from them at that
instant (a value, like the primitives' ``statistics()``: the operation
moves on, the snapshot does not).

Who writes what
---------------
- ``_created_at``: the node's constructor, on the runtime's clock.
- ``_started_at``: the transition to RUNNING (the first step, the start of
  a callback, a scope's birth), on the runtime's clock; NaN until then
  (compiled, a C double: no float object per started operation).
- ``_ended_at``: the runtime, as the node becomes final; unset until then.
- ``_steps``, ``_busy``, ``_cpu``: the worker running the work, one step
  or callback at a time (see ``runtime/_core/_usage.py`` for how CPU time is
  measured); a task's next step starts only once its last one was counted.
- ``_wakes``: whoever wakes the parked task, under the runtime lock.

``_steps`` and ``_wakes`` count modulo 2**32 (compiled, they are 32-bit
fields, so that a node fits a smaller allocator size class): every increment
is masked to 32 bits (``& 0xFFFFFFFF``), so both forms wrap alike.

A reader takes the runtime lock, which the runtime holds while an operation
ends: a snapshot of an operation that has ended is complete, its end stamped,
even when the reader learnt of the end without the lock (``op.done``, or
``op.wait()`` finding it final) on another thread, with the GIL off. A
snapshot taken while the operation runs may still mix one step's counts
with the next one's: the worker counts a step without the lock.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from ._fields import OperationFields

__all__ = ["OperationStatistics", "statistics"]


@attrs.frozen
class OperationStatistics:
    """What an operation has cost so far, from ``op.stats``.

    Attributes:
        steps: how many times its code ran: coroutine steps (from one
            resumption to the next await that suspends it) for a task, 1
            for a sync callback once it has run, 0 for a scope (its block
            runs in the steps of the task that entered it) and for work
            sent to an executor (it runs in another process). Counted
            modulo 2**32.
        busy_s: wall time spent in those steps, or in the callback, in
            seconds of real time (whatever the runtime's clock).
        cpu_s: CPU time its thread used while running them; a blocking
            callback or step has ``cpu_s`` well below ``busy_s``.
        wakes: how many times the task was woken from a park (an event
            fired, or a cancel); a checkpoint is not a park. Counted
            modulo 2**32.
        created_at: when the operation was made, on the runtime's clock
            (``runtime.now()``).
        started_at: when it started running (None until then).
        ended_at: when it became final (None until then).
    """

    __module__ = "asyncop"

    steps: int
    busy_s: float
    cpu_s: float
    wakes: int
    created_at: float
    started_at: float | None
    ended_at: float | None


def statistics(op: OperationFields) -> OperationStatistics:
    """What ``op`` has cost so far: the snapshot ``op.stats`` returns."""
    with op.runtime._lock:  # (an operation ending holds it: see above)
        started = op._started_at  # NaN until the operation starts
        return OperationStatistics(
            op._steps,
            op._busy,
            op._cpu,
            op._wakes,
            op._created_at,
            None if math.isnan(started) else started,
            getattr(op, "_ended_at", None),
        )
