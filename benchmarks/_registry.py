"""The workload registry: workload name -> system name -> measuring function.

A *workload* is one scenario (``thread_callbacks_batch``, ``unlink``...). A
*system* is one implementation of it: ``asyncop`` or a peer
(``threadpool``, ``asyncio``, ``trio``...). A measuring function takes the
size ``n`` and returns a dict of metrics; ``"seconds"`` is required and is
the timed region, any other key (``"build_s"``, ``"gc_full"``...) is
reported as its median beside it.

Adding a workload is a matter of declaring it and registering one function
per system, in a module listed in ``WORKLOAD_MODULES``::

    SPAWN = workload("spawn_join", "spawn and join n tasks",
                     sizes=(100_000,), quick_sizes=(5_000,),
                     checks=[Ratio("asyncop", "asyncio", limit=1.0)])

    @SPAWN.system("trio", requires=("trio",))
    def _spawn_trio(n: int) -> Metrics:
        import trio   # imported inside: a missing peer is skipped, not a crash
        ...

A system that needs more than a module (a keyword the installed asyncop may
not have yet) passes ``unless``: a function returning why it cannot run, or
None; the system is then skipped with that reason, and its checks are n/a.

The functions run in a fresh subprocess per repetition (see ``_run.py``), so
a module must not start anything at import time.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "REGISTRY",
    "WORKLOAD_MODULES",
    "Check",
    "Limit",
    "MeasureFn",
    "Metrics",
    "Ratio",
    "Scaling",
    "System",
    "Workload",
    "load_workloads",
    "workload",
]

Metrics = dict[str, float]
MeasureFn = Callable[[int], Metrics]

# The modules that register workloads, in the order they run.
WORKLOAD_MODULES = (
    "benchmarks.threads",
    "benchmarks.tree",
    "benchmarks.idle",
    "benchmarks.coro",
    "benchmarks.timers",
    "benchmarks.model",
    "benchmarks.memory",
    "benchmarks.io",
    "benchmarks.net",
    "benchmarks.remote",
    "benchmarks.bridge",
    "benchmarks.diag",
)


@dataclass(frozen=True)
class System:
    """One implementation of a workload."""

    name: str
    fn: MeasureFn
    # Importable modules it needs; when one is missing the system is skipped.
    requires: tuple[str, ...] = ()
    # Why it cannot run here (None when it can); called after ``requires``.
    unless: Callable[[], str | None] | None = None

    def missing(self) -> str | None:
        """Say why the system cannot run here (a module not installed...), or None."""
        for module in self.requires:
            if importlib.util.find_spec(module) is None:
                return f"{module} is not installed"
        return None if self.unless is None else self.unless()


@dataclass(frozen=True)
class Ratio:
    """``numerator / denominator`` medians at each size must stay within ``limit``.

    With ``compiled``, the target is one of asyncop's compiled core: when the
    core runs as Python (no compiler at install, or ``ASYNCOP_NO_EXTENSIONS=1``)
    the ratio is still reported, and the check is n/a.
    """

    numerator: str
    denominator: str
    limit: float
    metric: str = "seconds"
    compiled: bool = False


@dataclass(frozen=True)
class Scaling:
    """One system's median at the largest size over the smallest: linearity.

    The sizes of a scaling workload are ten times apart, so a linear cost
    gives 10 and ``limit`` leaves room for noise and cache effects.

    With ``baseline``, the value is that growth over the baseline system's
    own: a control that does the same memory accesses with no algorithm to
    speak of, so what the machine's caches add at the larger size cancels
    out, and ``limit`` is then near 1.
    """

    system: str
    limit: float
    metric: str = "seconds"
    baseline: str | None = None


@dataclass(frozen=True)
class Limit:
    """One system's median of ``metric`` must stay strictly below ``limit``.

    With ``worst``, the largest value over the repetitions is judged instead
    of the median: for a property that must hold in every run.
    """

    system: str
    metric: str
    limit: float
    worst: bool = False


Check = Ratio | Scaling | Limit


@dataclass
class Workload:
    """A scenario, its default sizes, its systems and its targets."""

    name: str
    description: str
    sizes: tuple[int, ...]
    quick_sizes: tuple[int, ...]
    checks: list[Check] = field(default_factory=list)
    systems: dict[str, System] = field(default_factory=dict)
    # False when n is not a count of items (per_item_us is then null).
    per_item: bool = True
    # False when --n must not change n (idle_cpu's n is a duration).
    scalable: bool = True

    def system(
        self,
        name: str,
        *,
        requires: tuple[str, ...] = (),
        unless: Callable[[], str | None] | None = None,
    ) -> Callable[[MeasureFn], MeasureFn]:
        """Register the decorated function as this workload's ``name`` system."""

        def register(fn: MeasureFn) -> MeasureFn:
            if name in self.systems:
                raise ValueError(f"workload {self.name!r} already has a system {name!r}")
            self.systems[name] = System(name, fn, requires, unless)
            return fn

        return register

    def sizes_for(self, *, quick: bool, n: int | None) -> tuple[int, ...]:
        """The sizes to run: defaults, quick ones, or derived from ``--n``.

        With ``--n N`` a workload measured at two sizes (for a scaling check)
        runs at N/10 and N, so the ratio keeps its meaning.
        """
        if n is not None and self.scalable:
            if len(self.sizes) > 1:
                return (max(1, n // 10), n)
            return (n,)
        return self.quick_sizes if quick else self.sizes


REGISTRY: dict[str, Workload] = {}


def workload(
    name: str,
    description: str,
    *,
    sizes: tuple[int, ...],
    quick_sizes: tuple[int, ...],
    checks: list[Check] | None = None,
    per_item: bool = True,
    scalable: bool = True,
) -> Workload:
    """Declare a workload and add it to ``REGISTRY``; register systems on the result."""
    if name in REGISTRY:
        raise ValueError(f"workload {name!r} is already registered")
    if "," in name:
        raise ValueError(f"workload name {name!r} must not contain a comma")
    item = Workload(
        name,
        description,
        sizes,
        quick_sizes,
        checks=list(checks or []),
        per_item=per_item,
        scalable=scalable,
    )
    REGISTRY[name] = item
    return item


def load_workloads() -> dict[str, Workload]:
    """Import every workload module (idempotent) and return the registry."""
    for module in WORKLOAD_MODULES:
        importlib.import_module(module)
    return REGISTRY
