"""Randomized stress: random operation trees, failures, deadlines and concurrent cancels.

Hypothesis draws a forest of plans (what each operation does, how it is
spawned, which children it spawns) and a schedule of ``cancel()`` calls made
from several threads. The forest runs on a fresh runtime; afterwards every
invariant of the tree is checked. On failure hypothesis prints the plan and a
``@reproduce_failure`` blob; the thread interleaving itself is not
reproducible, so a failure may show up as ``Flaky``.
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import asyncop
from asyncop import AsyncOperation, CancellationError, OperationState

ACTIONS = ("value", "raise", "loop", "scope")
FAR = 30.0  # a deadline that never fires during a run, used to churn the heap


class Boom(Exception):
    """The failure a plan raises on purpose."""


@dataclass(frozen=True)
class Plan:
    """What one operation does."""

    action: str  # "value" | "raise" | "loop" | "scope"
    via: str  # "spawn" (op.spawn / runtime.spawn) or "create" (create + submit)
    supervise: bool  # spawn(supervise=...) for "spawn"; scope(supervise=...) for "scope"
    deadline: float | None  # seconds after spawning, or None
    loops: int  # iterations of token.wait(small) for "loop" and "scope"
    churn: bool  # re-arm a far deadline at every iteration
    children: tuple[Plan, ...] = ()


def _plan(children: st.SearchStrategy[tuple[Plan, ...]]) -> st.SearchStrategy[Plan]:
    return st.builds(
        Plan,
        action=st.sampled_from(ACTIONS),
        via=st.sampled_from(("spawn", "create")),
        supervise=st.booleans(),
        deadline=st.none() | st.none() | st.floats(0.001, 0.02),
        loops=st.integers(0, 6),
        churn=st.booleans(),
        children=children,
    )


plans = st.recursive(
    _plan(st.just(())),
    lambda kids: _plan(st.lists(kids, min_size=1, max_size=4).map(tuple)),
    max_leaves=24,
)
forests = st.lists(plans, min_size=1, max_size=3)
# Per cancelling thread: (delay before the call in seconds, which operation).
cancel_schedules = st.lists(
    st.lists(st.tuples(st.floats(0, 0.015), st.integers(0, 10_000)), max_size=5),
    min_size=1,
    max_size=3,
)


@dataclass(eq=False)
class Record:
    """What the harness knows about one operation it made."""

    op: AsyncOperation
    plan: Plan | None  # None for the operation of a scope
    serial: int
    parent: AsyncOperation | None
    propagates: bool  # a failure of this op must reach the parent
    started: bool = False
    own_error: BaseException | None = None
    # What a scope's block raised: the scope keeps no reference to it.
    raised: BaseException | None = None
    children: list[Record] = field(default_factory=list)


def leaves(exc: BaseException) -> list[BaseException]:
    """The non-group exceptions inside ``exc`` (itself if it is not a group)."""
    found: list[BaseException] = []
    stack = [exc]
    while stack:
        item = stack.pop()
        if isinstance(item, BaseExceptionGroup):
            stack.extend(item.exceptions)
        else:
            found.append(item)
    return found


class Harness:
    """Runs a forest of plans on one runtime and records everything."""

    def __init__(self, runtime: asyncop.Runtime) -> None:
        self.rt = runtime
        self.lock = threading.Lock()
        self.records: dict[AsyncOperation, Record] = {}
        self.order: list[AsyncOperation] = []
        self.violations: list[str] = []
        self.serial = 0
        # Set once an operation is registered: spawn() submits at once, so
        # the work may start before the harness has recorded the operation.
        self.registered: dict[int, threading.Event] = {}

    # -- recording ------------------------------------------------------

    def _register(
        self,
        op: AsyncOperation,
        plan: Plan | None,
        serial: int,
        parent: AsyncOperation | None,
        propagates: bool,
    ) -> Record:
        rec = Record(op, plan, serial, parent, propagates)
        with self.lock:
            self.records[op] = rec
            self.order.append(op)
            if parent is not None:
                self.records[parent].children.append(rec)
            if plan is not None:
                self.registered[serial].set()
        return rec

    def _next_serial(self) -> int:
        with self.lock:
            self.serial += 1
            self.registered[self.serial] = threading.Event()
            return self.serial

    def _check_ancestors_live(self, op: AsyncOperation, where: str) -> None:
        """While ``op``'s code runs, no recorded ancestor may be final."""
        with self.lock:
            parent = self.records[op].parent
            chain = []
            while parent is not None:
                chain.append(parent)
                parent = self.records[parent].parent
        for ancestor in chain:
            if ancestor.done:
                with self.lock:
                    self.violations.append(
                        f"{where}: {ancestor.name} is {ancestor.state.name} while its "
                        f"descendant {op.name} is still running"
                    )

    # -- spawning -------------------------------------------------------

    def start(self, plan: Plan, parent: AsyncOperation | None) -> None:
        """Make and submit the operation for ``plan`` under ``parent``."""
        serial = self._next_serial()
        name = f"{plan.action}-{serial}"
        rt = self.rt
        if plan.via == "create":
            op = rt.create(self._seed_callback, (plan, serial), parent=parent, name=name)
            self._register(op, plan, serial, parent, propagates=True)
            if plan.deadline is not None:
                op.deadline = rt.now() + plan.deadline
            try:
                rt.submit(op)
            except RuntimeError:
                # The parent was cancelled between create and submit: the
                # child was born (or became) CANCELLED and must not run.
                if not (op.done and op.token.cancelled):
                    with self.lock:
                        self.violations.append(f"submit of live {name} refused")
        else:
            if parent is None:
                op = rt.spawn(self._callback, plan, serial, name=name, supervise=plan.supervise)
            else:
                try:
                    op = parent.spawn(
                        self._callback, plan, serial, name=name, supervise=plan.supervise
                    )
                except RuntimeError as exc:
                    # A child spawned into a running parent is born CANCELLED
                    # if the parent is cancelled; spawn() itself never fails.
                    with self.lock:
                        self.violations.append(f"{parent.name}.spawn() raised {exc!r}")
                    return
            self._register(op, plan, serial, parent, propagates=not plan.supervise)
            if plan.deadline is not None:
                op.deadline = rt.now() + plan.deadline

    # -- the work -------------------------------------------------------

    def _seed_callback(self, op: AsyncOperation, context: tuple[Plan, int]) -> Any:
        plan, serial = context
        return self._run(op, plan, serial)

    def _callback(self, plan: Plan, serial: int) -> Any:
        op = asyncop.current_operation()
        assert op is not None
        return self._run(op, plan, serial)

    def _spin(self, op: AsyncOperation, plan: Plan) -> None:
        for _ in range(plan.loops):
            if plan.churn:
                op.deadline = self.rt.now() + FAR
            if op.token.wait(0.002):
                break
        op.token.check()

    def _run(self, op: AsyncOperation, plan: Plan, serial: int) -> Any:
        assert self.registered[serial].wait(5), f"{op.name} was never registered"
        with self.lock:
            rec = self.records[op]
        rec.started = True
        self._check_ancestors_live(op, "start")
        try:
            if plan.action == "scope":
                try:
                    with self.rt.scope(name=f"block-{serial}", supervise=plan.supervise) as s:
                        self._register(s, None, serial, op, propagates=False)
                        for child in plan.children:
                            self.start(child, s)
                        self._spin(s, plan)
                except (ExceptionGroup, TimeoutError) as exc:
                    # The scope's error leaves through its block only.
                    with self.lock:
                        self.records[s].raised = exc
                return ("value", serial)
            for child in plan.children:
                self.start(child, op)
            if plan.action == "raise":
                error = Boom(f"plan {serial}")
                rec.own_error = error
                raise error
            if plan.action == "loop":
                self._spin(op, plan)
            return ("value", serial)
        finally:
            self._check_ancestors_live(op, "end")

    # -- checking -------------------------------------------------------

    def check(self) -> dict[AsyncOperation, OperationState]:
        """Check every invariant on the finished forest; returns the final states."""
        problems = list(self.violations)
        final: dict[AsyncOperation, OperationState] = {}
        for op in self.order:
            rec = self.records[op]
            state = op.state
            final[op] = state
            where = f"{op.name} ({state.name})"
            if not state.final:
                problems.append(f"{where} is not final")
                continue
            if op.first_child is not None or op.parent is not None or op.sibling_next is not None:
                problems.append(f"{where} still has tree links")
            if op.wait(0).state is not state:
                problems.append(f"{where}: wait() disagrees with state")
            failed_children = [
                kid
                for kid in rec.children
                if kid.op.state is OperationState.FAILED
                and kid.propagates
                and not (rec.plan is None and rec_supervises(rec, self.records))
            ]
            if rec.plan is not None and not rec.started and state is not OperationState.CANCELLED:
                problems.append(f"{where} never ran but is not CANCELLED")
            if state is OperationState.COMPLETED:
                expected = None if rec.plan is None else ("value", rec.serial)
                if op.result() != expected:
                    problems.append(f"{where}: result() {op.result()!r} != {expected!r}")
                if rec.own_error is not None or failed_children:
                    problems.append(f"{where} completed despite a failure")
            elif state is OperationState.FAILED:
                error = op.error
                if error is None and rec.plan is None:
                    error = rec.raised  # raised out of the block, not kept
                elif error is not None:
                    try:
                        op.result()
                        problems.append(f"{where}: result() did not raise")
                    except BaseException as exc:
                        if exc is not error:
                            problems.append(f"{where}: result() raised {exc!r}, not its error")
                if error is None:
                    problems.append(f"{where} has no error")
                    continue
                found = leaves(error)
                strangers = [exc for exc in found if not isinstance(exc, Boom)]
                if strangers:
                    problems.append(f"{where}: unexpected errors in the group: {strangers!r}")
                expected_leaves = [] if rec.own_error is None else [rec.own_error]
                for kid in failed_children:
                    kid_error = kid.op.error
                    if kid_error is not None:
                        expected_leaves.extend(leaves(kid_error))
                missing = [exc for exc in expected_leaves if not any(exc is f for f in found)]
                if missing:
                    problems.append(f"{where}: failures missing from its error: {missing!r}")
                if not expected_leaves:
                    problems.append(f"{where} failed with no failure of its own or a child's")
            else:
                if not op.token.cancelled:
                    problems.append(f"{where} but its token was never cancelled")
                try:
                    op.result()
                    problems.append(f"{where}: result() did not raise")
                except CancellationError:
                    pass
                except BaseException as exc:
                    problems.append(f"{where}: result() raised {exc!r}")
                if rec.own_error is not None or failed_children:
                    problems.append(f"{where} swallowed a failure")
        assert not problems, "\n".join(problems)
        return final


def rec_supervises(rec: Record, records: dict[AsyncOperation, Record]) -> bool:
    """True if ``rec`` is the operation of a ``scope(supervise=True)``."""
    owner = records[rec.parent] if rec.parent is not None else None
    return owner is not None and owner.plan is not None and owner.plan.supervise


def canceller(
    harness: Harness, schedule: list[tuple[float, int]], go: threading.Event
) -> threading.Thread:
    """A thread that cancels operations picked by index after the given delays."""

    def run() -> None:
        go.wait(5)
        for delay, pick in schedule:
            time.sleep(delay)
            with harness.lock:
                if not harness.order:
                    continue
                target = harness.order[pick % len(harness.order)]
            target.cancel(f"stress cancel {pick}")

    return threading.Thread(target=run, name="stress-canceller", daemon=True)


@pytest.mark.timeout(120)
@settings(
    max_examples=100,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(forest=forests, schedules=cancel_schedules)
def test_random_trees_keep_every_invariant(
    forest: list[Plan], schedules: list[list[tuple[float, int]]]
) -> None:
    rt = asyncop.Runtime(2, name=f"stress{id(object()):x}")
    try:
        harness = Harness(rt)
        go = threading.Event()
        threads = [canceller(harness, schedule, go) for schedule in schedules]
        for thread in threads:
            thread.start()
        go.set()
        for plan in forest:
            harness.start(plan, None)
        for thread in threads:
            thread.join(5)
            assert not thread.is_alive(), "a cancelling thread hung"
        roots = [op for op in list(harness.order) if harness.records[op].parent is None]
        for root in roots:
            root.wait(10)
            # A parent is final only after its children: every recorded
            # descendant is already done when the root's wait returns.
            stack = list(harness.records[root].children)
            while stack:
                rec = stack.pop()
                assert rec.op.done, f"{root.name} ended before {rec.op.name}"
                stack.extend(rec.children)
        final = harness.check()
        assert rt.registrations() == 0
        # Cancelled timers are dropped lazily, but the heap stays small.
        assert rt._timers.heap_size <= 128
    finally:
        assert rt.shutdown(timeout=10), "runtime did not shut down in 10 s"
    prefix = f"{rt.name}-"
    assert [t.name for t in threading.enumerate() if t.name.startswith(prefix)] == []
    # A final state is set once and stays.
    assert {op: op.state for op in final} == final


# ----------------------------------------------------------------------
# Timers under worker replacement and retirement
# ----------------------------------------------------------------------

# How late a sleep or a scope deadline may wake on this shared machine.
LATE_BOUND = 1.5


async def _timed_sleep(seconds: float) -> tuple[str, float, float]:
    start = time.monotonic()
    await asyncop.sleep(seconds)
    return ("sleep", seconds, time.monotonic() - start)


async def _timed_scope(seconds: float) -> tuple[str, float, float]:
    start = time.monotonic()
    try:
        async with asyncop.scope(timeout=seconds):
            await asyncop.sleep(math.inf)
    except TimeoutError:
        pass
    return ("scope", seconds, time.monotonic() - start)


async def _block_then_sleep(blocks: tuple[float, ...], seconds: float) -> tuple[str, float, float]:
    # Sync callbacks that hold workers long enough to get them replaced.
    async with asyncop.scope() as s:
        for block in blocks:
            s.spawn(time.sleep, block)
        await asyncop.checkpoint()
    return await _timed_sleep(seconds)


def _timer_plan(rng: random.Random) -> list[tuple[str, Any]]:
    """One round: what to spawn, drawn from ``rng`` (the run is not reproducible, the plan is)."""
    plan: list[tuple[str, Any]] = []
    for _ in range(rng.randint(2, 8)):
        kind = rng.choice(["sleep", "scope", "block", "sync"])
        if kind == "sleep":
            plan.append(("sleep", rng.uniform(0.0, 0.6)))
        elif kind == "scope":
            plan.append(("scope", rng.uniform(0.01, 0.6)))
        elif kind == "block":
            blocks = tuple(rng.uniform(0.06, 0.4) for _ in range(rng.randint(1, 4)))
            plan.append(("block", (blocks, rng.uniform(0.0, 0.6))))
        else:
            plan.append(("sync", rng.uniform(0.06, 0.4)))
    return plan


@pytest.mark.timeout(120)
@pytest.mark.parametrize("dynamic", [False, True], ids=["fixed", "dynamic"])
@pytest.mark.parametrize("seed", [11, 12])
def test_every_sleep_wakes_on_time_across_worker_replacement_and_retirement(
    seed: int, dynamic: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if dynamic:
        monkeypatch.setenv("ASYNCOP_DYNAMIC_WORKERS", "1")
    else:
        monkeypatch.delenv("ASYNCOP_DYNAMIC_WORKERS", raising=False)
    rng = random.Random(seed)
    rt = asyncop.Runtime(2, name=f"timers{seed}{id(object()):x}")
    rt.idle_retire = 0.2  # dynamic workers retire between rounds
    results: list[tuple[str, float, float]] = []
    try:
        for _ in range(6):
            ops = []
            for kind, arg in _timer_plan(rng):
                if kind == "sleep":
                    ops.append(rt.spawn(_timed_sleep, arg))
                elif kind == "scope":
                    ops.append(rt.spawn(_timed_scope, arg))
                elif kind == "block":
                    ops.append(rt.spawn(_block_then_sleep, *arg))
                else:
                    rt.spawn(time.sleep, arg)
            for op in ops:
                try:
                    results.append(op.wait(30).value)
                except TimeoutError as exc:
                    raise AssertionError(f"seed={seed}: a timer never fired:\n{rt.dump()}") from exc
            # A pause long enough for extra workers to retire, or not.
            time.sleep(rng.choice([0.0, 0.3, 0.7]))
    finally:
        assert rt.shutdown(timeout=10), f"seed={seed}: runtime did not shut down"
    late = [(kind, want, got) for kind, want, got in results if got > want + LATE_BOUND]
    early = [(kind, want, got) for kind, want, got in results if got < want - 0.01]
    assert not late, f"seed={seed}: woke late: {late}"
    assert not early, f"seed={seed}: woke early: {early}"
