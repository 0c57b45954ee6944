"""A Ctrl-C on the main thread never leaves the runtime lock held.

CPython runs a pending signal handler, and so raises KeyboardInterrupt, when
a call returns. Code that takes a lock with ``lock.acquire()`` and then
enters ``try:`` has such a return between the two: an interrupt landing
there skips the ``finally`` and the lock stays held for good, so every
worker then blocks on it and the program hangs at exit. A with-statement has
no such gap.

These tests raise KeyboardInterrupt from a profile hook as the k-th C call
made while the main thread holds the runtime lock returns: the first one is
the lock's own ``acquire()`` where the code calls it, else a call inside the
locked section. Whichever it is, the lock must be free once the interrupt
has propagated, and the runtime must still run work and shut down.
"""

from __future__ import annotations

import contextlib
import gc
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import attrs
import pytest

import asyncop
from tests._compiled import COMPILED

pytestmark = pytest.mark.timeout(30)


def _noop() -> None:
    return None


def _interrupt_at(lock: Any, nth: int) -> Callable[[FrameType, str, Any], None]:
    """A profile hook raising KeyboardInterrupt at the nth C return while ``lock`` is held."""
    seen = 0

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal seen
        if event == "c_return" and lock.owned():
            seen += 1
            if seen == nth:
                sys.setprofile(None)
                raise KeyboardInterrupt

    return hook


@contextlib.contextmanager
def _collector_off() -> Iterator[None]:
    """Keep the garbage collector from running while a hook interrupts.

    The collector runs the finalizers of unreachable objects (``__del__``, a
    coroutine's close) on whichever thread happens to allocate, and CPython
    prints and drops an exception raised inside a finalizer. A hook that
    raised its KeyboardInterrupt there would have interrupted nothing, and a
    call that waits for what only the hook hands over would wait forever.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _spawn(rt: asyncop.Runtime) -> None:
    rt.spawn(_noop)


def _spawn_and_wait(rt: asyncop.Runtime) -> None:
    rt.spawn(_noop).wait()


def _sync_scope(rt: asyncop.Runtime) -> None:
    with rt.scope() as root:
        root.spawn(_noop)


def _set_event_a_task_waits_on(rt: asyncop.Runtime) -> None:
    event = asyncop.Event()
    parked = threading.Event()

    async def waiter() -> None:
        parked.set()
        await event.wait_async()

    op = rt.spawn(waiter)
    assert parked.wait(10)
    # Fired from this thread: the task's waker completes under the lock.
    event.set()
    op.wait()


ENTRY_POINTS = {
    "spawn": _spawn,
    "spawn_and_wait": _spawn_and_wait,
    "sync_scope": _sync_scope,
    "event_set": _set_event_a_task_waits_on,
}


@pytest.mark.parametrize("nth", [1, 2, 3, 5])
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_an_interrupt_inside_the_locked_section_leaves_the_lock_free(entry: str, nth: int) -> None:
    assert threading.current_thread() is threading.main_thread()
    rt = asyncop.Runtime(2, name=f"ki-{entry}-{nth}")
    try:
        lock = rt._lock
        hook = _interrupt_at(lock, nth)
        if entry == "event_set":
            # Only the set() is under test: arm the hook once the task waits.
            original = asyncop.Event.set

            def set_with_hook(self: asyncop.Event) -> None:
                sys.setprofile(hook)
                original(self)

            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(asyncop.Event, "set", set_with_hook)
                _run_interrupted(ENTRY_POINTS[entry], rt)
        else:
            sys.setprofile(hook)
            _run_interrupted(ENTRY_POINTS[entry], rt)
        assert not lock.owned(), "a KeyboardInterrupt left the runtime lock held"
        # Another thread can still take the lock and get work done.
        done: list[object] = []
        helper = threading.Thread(target=lambda: done.append(rt.spawn(_noop).wait(10)))
        helper.start()
        helper.join(15)
        assert done, "a spawn-and-wait from another thread did not finish"
    finally:
        sys.setprofile(None)
        assert rt.shutdown(timeout=10), "the runtime did not shut down"


def _run_interrupted(fn: Callable[[asyncop.Runtime], None], rt: asyncop.Runtime) -> None:
    try:
        with _collector_off():
            fn(rt)
    except (KeyboardInterrupt, BaseExceptionGroup):
        pass
    finally:
        sys.setprofile(None)


# ----------------------------------------------------------------------
# A Ctrl-C while the main thread waits in a primitive loses nothing
# ----------------------------------------------------------------------
#
# The hook raises KeyboardInterrupt at the n-th interruptible point of the
# main thread: a Python function starting, or a C call returning (where
# CPython runs signal handlers), swept over every n. A second sweep first
# hands the waiter what it waits for (from another thread, at the m-th
# point), then interrupts at each point after that. After every run: no
# waiter is left queued, and whatever was handed over is given back.
#
# Not swept: the few lines that move an item or permit from one party to
# another (``_INTERNALS``). They run on the thread that *serves* a waiter
# (here: a call that finds its value ready and so never waits), and a Ctrl-C
# between two of their C calls could only be excluded by deferring signals.

_INTERNALS = frozenset({"_take_locked", "_offer_locked", "fire", "_hand_over", "_take"})


class _Helper:
    """A thread that runs actions for the main thread and waits for them."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[tuple[Callable[[], object], threading.Event]] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()

        self._error: BaseException | None = None

    def _main(self) -> None:
        while True:
            fn, done = self._requests.get()
            try:
                fn()
            except BaseException as exc:
                self._error = exc
            finally:
                done.set()

    def run(self, fn: Callable[[], object]) -> None:
        done = threading.Event()
        self._requests.put((fn, done))
        assert done.wait(10), "the helper thread got stuck"
        error, self._error = self._error, None
        if error is not None:
            raise error


@attrs.define
class _Scenario:
    """One blocking call on the main thread, how to satisfy it, and what to check."""

    call: Callable[[], object]
    satisfy: Callable[[], object]  # run on the helper thread
    locks: list[Any]  # must not be held by the main thread when satisfying
    check: Callable[[bool, object, bool], None]  # (returned, value, satisfied)


class _Stop(Exception):
    pass


def _held_by_main(lock: Any) -> bool:
    owned = getattr(lock, "owned", None)
    if owned is not None:
        return bool(owned())
    return bool(lock.locked())


def _run_scenario(
    scenario: _Scenario, helper: _Helper, ki_at: int | None, fire_at: int | None
) -> tuple[bool, object, bool, int]:
    """Run the call with the hook; returns (returned, value, satisfied, events)."""
    seen = 0
    satisfied = False
    pending_fire = False

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal seen, satisfied, pending_fire
        if (event != "call" and event != "c_return") or frame.f_code.co_name in _INTERNALS:
            return
        seen += 1
        if (
            fire_at is not None
            and seen >= fire_at
            and not satisfied
            and not any(_held_by_main(lock) for lock in scenario.locks)
        ):
            satisfied = True
            helper.run(scenario.satisfy)
        if ki_at is not None and seen == ki_at:
            sys.setprofile(None)
            raise KeyboardInterrupt

    returned = False
    value: object = None
    # A call still waiting long after it should have ended (an interrupt that
    # never reached it) is handed its value, so that the test fails, not hangs.
    rescued = threading.Event()
    rescue = threading.Timer(20, _rescue, (rescued, scenario))
    rescue.start()
    with _collector_off():
        sys.setprofile(hook)
        try:
            value = scenario.call()
            returned = True
        except KeyboardInterrupt:
            pass
        finally:
            sys.setprofile(None)
            rescue.cancel()
            rescue.join()
    assert not rescued.is_set(), (
        f"the call was still waiting 20 s after it began (interrupt at point {ki_at}, "
        f"handed over at point {fire_at}, {seen} points seen)"
    )
    return returned, value, satisfied, seen


def _rescue(rescued: threading.Event, scenario: _Scenario) -> None:
    rescued.set()
    scenario.satisfy()


def _channel_recv(capacity: int) -> Callable[[asyncop.Runtime], _Scenario]:
    def make(rt: asyncop.Runtime) -> _Scenario:
        ch: asyncop.Channel[int] = asyncop.Channel(capacity)
        sent: list[bool] = []
        senders: list[threading.Thread] = []

        def send() -> None:
            try:
                ch.send(7, timeout=5)
                sent.append(True)
            except TimeoutError:
                sent.append(False)

        def satisfy() -> None:
            if capacity:
                ch.try_send(7)
                sent.append(True)
                return
            # A rendezvous has no buffer: a sender thread queues up with
            # the item (or hands it straight to a waiting receiver).
            sender = threading.Thread(target=send)
            senders.append(sender)
            sender.start()
            deadline = time.monotonic() + 5
            while (
                not ch.statistics().tasks_waiting_send and not sent and time.monotonic() < deadline
            ):
                time.sleep(0.0005)

        def check(returned: bool, value: object, satisfied: bool) -> None:
            waiting = ch.statistics().tasks_waiting_receive
            assert not waiting, "an interrupted recv left a ghost receiver"
            left = []
            with contextlib.suppress(asyncop.WouldBlock):
                left.append(ch.try_recv())
            for sender in senders:
                sender.join(10)
            got = ([value] if returned else []) + left
            if returned:
                assert value == 7
            assert got == ([7] if any(sent) else []), f"the item was lost or doubled: {got}"

        return _Scenario(ch.recv, satisfy, [ch._mutex], check)

    return make


def _channel_send(capacity: int) -> Callable[[asyncop.Runtime], _Scenario]:
    def make(rt: asyncop.Runtime) -> _Scenario:
        ch: asyncop.Channel[int] = asyncop.Channel(capacity)
        for i in range(capacity):
            ch.try_send(-i - 1)
        received: list[int] = []
        receivers: list[threading.Thread] = []

        def receive() -> None:
            with contextlib.suppress(TimeoutError):
                received.append(ch.recv(timeout=2))

        def satisfy() -> None:
            if capacity:
                with contextlib.suppress(asyncop.WouldBlock):
                    received.append(ch.try_recv())
                return
            # A rendezvous: a receiver thread queues up, or takes the item
            # straight from a waiting sender.
            receiver = threading.Thread(target=receive)
            receivers.append(receiver)
            receiver.start()
            deadline = time.monotonic() + 5
            while (
                not ch.statistics().tasks_waiting_receive
                and not received
                and time.monotonic() < deadline
            ):
                time.sleep(0.0005)

        def check(returned: bool, value: object, satisfied: bool) -> None:
            for receiver in receivers:
                # A receiver still waiting (the send gave up) gets a filler.
                while receiver.is_alive():
                    with contextlib.suppress(asyncop.WouldBlock):
                        ch.try_send(0)
                    receiver.join(0.001)
            while 0 in received:
                received.remove(0)
            assert not ch.statistics().tasks_waiting_send, "an interrupted send left a ghost sender"
            left = []
            while True:
                try:
                    left.append(ch.try_recv())
                except asyncop.WouldBlock:
                    break
            everything = received + left
            assert everything.count(1) <= 1, "the item was delivered twice"
            if returned:
                assert everything.count(1) == 1, "a send that returned did not deliver"
            assert sorted(i for i in everything if i < 0) == sorted(-i - 1 for i in range(capacity))

        return _Scenario(lambda: ch.send(1), satisfy, [ch._mutex], check)

    return make


def _lock_acquire(rt: asyncop.Runtime) -> _Scenario:
    lock = asyncop.Lock("ki")
    holder = _Helper()
    holder.run(lock.acquire)

    def check(returned: bool, value: object, satisfied: bool) -> None:
        assert not lock.statistics().tasks_waiting, "an interrupted acquire left a ghost waiter"
        if returned:
            assert value is True
            lock.release()
        elif not satisfied:
            holder.run(lock.release)
        assert not lock.locked(), "an interrupted acquire left the lock held"
        got: list[bool] = []
        other = threading.Thread(target=lambda: got.append(lock.acquire(timeout=5)))
        other.start()
        other.join(10)
        assert got == [True]

    # The release must come from the thread that holds the lock.
    return _Scenario(lock.acquire, lambda: holder.run(lock.release), [lock._mutex], check)


def _semaphore_acquire(rt: asyncop.Runtime) -> _Scenario:
    sem = asyncop.Semaphore(0)

    def check(returned: bool, value: object, satisfied: bool) -> None:
        assert not sem.statistics().tasks_waiting, "an interrupted acquire left a ghost waiter"
        permits = sem.value + (1 if returned else 0)
        assert permits == (1 if satisfied else 0), "a permit was lost or invented"

    return _Scenario(sem.acquire, sem.release, [sem._mutex], check)


def _event_wait(rt: asyncop.Runtime) -> _Scenario:
    event = asyncop.Event()

    def check(returned: bool, value: object, satisfied: bool) -> None:
        assert not event.statistics().tasks_waiting, "an interrupted wait left a ghost waiter"
        if returned:
            assert value is True

    return _Scenario(event.wait, event.set, [event._mutex], check)


def _op_wait(rt: asyncop.Runtime) -> _Scenario:
    gate = threading.Event()
    op = rt.spawn(gate.wait, 10)

    def satisfy() -> None:
        gate.set()
        op.wait(10)

    def check(returned: bool, value: object, satisfied: bool) -> None:
        assert not op._waiters, "an interrupted wait left its waiter on the operation"
        gate.set()
        assert op.wait(10).state is asyncop.OperationState.COMPLETED

    return _Scenario(op.wait, satisfy, [rt._lock], check)


def _token_wait(rt: asyncop.Runtime) -> _Scenario:
    gate = threading.Event()
    op = rt.spawn(gate.wait, 10)
    token = op.token

    def check(returned: bool, value: object, satisfied: bool) -> None:
        assert not token._waiters, "an interrupted wait left its waiter on the token"
        if returned:
            assert value is True
        gate.set()
        op.wait(10)

    return _Scenario(token.wait, op.cancel, [rt._lock], check)


PRIMITIVES: dict[str, Callable[[asyncop.Runtime], _Scenario]] = {
    "recv_rendezvous": _channel_recv(0),
    "recv_buffered": _channel_recv(2),
    "send_rendezvous": _channel_send(0),
    "send_buffered": _channel_send(1),
    "lock_acquire": _lock_acquire,
    "semaphore_acquire": _semaphore_acquire,
    "event_wait": _event_wait,
    "op_wait": _op_wait,
    "token_wait": _token_wait,
}


def _events_until_parked(make: Callable[[asyncop.Runtime], _Scenario], rt: asyncop.Runtime) -> int:
    """Count the interruptible points of a call up to its first wait slice."""
    scenario = make(rt)
    helper = _Helper()
    seen = 0
    parked_at = 0

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal seen, parked_at
        if (event != "call" and event != "c_return") or frame.f_code.co_name in _INTERNALS:
            return
        seen += 1
        if (
            not parked_at
            and event == "c_return"
            and frame.f_code.co_name == "acquire_for"
            and getattr(arg, "__name__", "") == "acquire"
        ):
            parked_at = seen
            sys.setprofile(None)
            helper.run(scenario.satisfy)

    with _collector_off():
        sys.setprofile(hook)
        try:
            value = scenario.call()
        finally:
            sys.setprofile(None)
    scenario.check(True, value, True)
    assert parked_at, "the call never parked"
    return parked_at


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", sorted(PRIMITIVES))
def test_an_interrupt_at_any_point_of_a_wait_loses_nothing(kind: str) -> None:
    assert threading.current_thread() is threading.main_thread()
    make = PRIMITIVES[kind]
    with asyncop.Runtime(2, name=f"ki-{kind}") as rt:
        parked = _events_until_parked(make, rt)
        helper = _Helper()
        # Never handed anything: the interrupt must remove the waiter.
        for ki_at in range(1, parked + 3):
            scenario = make(rt)
            returned, value, satisfied, _ = _run_scenario(scenario, helper, ki_at, parked + 4)
            assert not returned or satisfied
            scenario.check(returned, value, satisfied)
        # Handed its value at the m-th point, interrupted at each point after.
        for fire_at in sorted({*range(1, parked + 2, 4), parked - 1, parked, parked + 1}):
            ki_at = fire_at
            while True:
                scenario = make(rt)
                returned, value, satisfied, _ = _run_scenario(scenario, helper, ki_at, fire_at)
                scenario.check(returned, value, satisfied)
                if returned:
                    break
                ki_at += 1
                assert ki_at < fire_at + 500, "the call never returned"
        # The runtime still works.
        assert rt.spawn(lambda: 3).wait(10).value == 3


@pytest.mark.parametrize("kind", ["event", "lock", "semaphore", "channel"])
def test_an_interrupted_wait_inside_a_scope_leaves_no_waiter_on_its_token(kind: str) -> None:
    # The block of a sync scope is an operation: a wait there registers with
    # the scope's token, so that a cancel of the scope ends it.
    assert threading.current_thread() is threading.main_thread()
    event = asyncop.Event()
    lock = asyncop.Lock()
    semaphore = asyncop.Semaphore(0)
    channel: asyncop.Channel[int] = asyncop.Channel(0)
    waits: dict[str, Callable[[], object]] = {
        "event": lambda: event.wait(0.01),
        "lock": lambda: lock.acquire(0.01),
        "semaphore": lambda: semaphore.acquire(0.01),
        "channel": lambda: channel.recv(timeout=0.01),
    }
    holder = _Helper()
    holder.run(lock.acquire)
    with asyncop.Runtime(1, name=f"ki-scope-{kind}") as rt, rt.scope() as scope:
        token = scope.token
        nth = 1
        while True:
            try:
                landed = _interrupted_at(waits[kind], nth)
            except TimeoutError:
                landed = False
            assert not token._waiters, f"interrupt at point {nth} left a waiter on the token"
            if not landed:
                break
            nth += 1
        assert nth > 5
    holder.run(lock.release)


class _Litter:
    """Unreachable once made: only the collector frees it, running ``__del__``."""

    def __init__(self) -> None:
        self.cycle = self

    def __del__(self) -> None:
        self.cycle = None


def _with_litter(scenario: _Scenario) -> _Scenario:
    """The scenario, whose call first drops an object only the collector frees."""
    call = scenario.call

    def littering_call() -> object:
        _Litter()
        return call()

    return attrs.evolve(scenario, call=littering_call)


@pytest.mark.timeout(60)
def test_the_sweep_interrupts_the_waiting_call_not_a_finalizer_the_collector_runs() -> None:
    # With litter to collect and the collector due at every allocation, the
    # first points of an acquire would run a finalizer; a KeyboardInterrupt
    # raised there is dropped, and the acquire, never released, would wait.
    assert threading.current_thread() is threading.main_thread()
    thresholds = gc.get_threshold()
    helper = _Helper()
    with asyncop.Runtime(1, name="ki-litter") as rt:
        gc.set_threshold(1, 1, 1)
        try:
            for ki_at in range(1, 9):
                scenario = _with_litter(_lock_acquire(rt))
                # A lost interrupt leaves the acquire waiting: the run fails.
                returned, value, _, _ = _run_scenario(scenario, helper, ki_at, None)
                assert not returned, f"the KeyboardInterrupt at point {ki_at} was lost"
                scenario.check(returned, value, False)
        finally:
            gc.set_threshold(*thresholds)
            gc.collect()


# ----------------------------------------------------------------------
# A Ctrl-C inside cancel() leaves the tree for a later cancel() to finish
# ----------------------------------------------------------------------


def _parked_task(rt: asyncop.Runtime) -> asyncop.AsyncOperation:
    parked = threading.Event()

    async def sleeper() -> None:
        parked.set()
        await asyncop.sleep(100)

    op = rt.spawn(sleeper)
    assert parked.wait(10)
    time.sleep(0.01)
    return op


def _task_tree(rt: asyncop.Runtime) -> asyncop.AsyncOperation:
    ready = threading.Event()

    async def nap() -> None:
        await asyncop.sleep(100)

    async def wait_for_nothing() -> None:
        await asyncop.Event().wait_async()

    async def root() -> None:
        async with asyncop.scope() as s:
            for _ in range(3):
                s.spawn(nap)
            s.spawn(wait_for_nothing)
            ready.set()
            await asyncop.sleep(100)

    op = rt.spawn(root)
    assert ready.wait(10)
    time.sleep(0.02)
    return op


def _pending_tree(rt: asyncop.Runtime) -> asyncop.AsyncOperation:
    # Nothing here has started. The root and the grandchildren are never
    # submitted: they stay CREATED. The children wait behind the only
    # worker, which is busy; should the watchdog hand them to a new worker
    # (it does once they have waited a while), they run and then wait for
    # their CREATED children, which ends the same way.
    gate = threading.Event()
    busy = rt.spawn(gate.wait, 10)
    rt._test_gate = gate  # type: ignore[attr-defined]
    root = rt.create(lambda op, context: None, name="root")
    for i in range(3):
        child = root.spawn(lambda: None, name=f"child-{i}")
        rt.create(lambda op, context: None, parent=child, name=f"grandchild-{i}")
    del busy
    return root


def _blocked_sync_ops(rt: asyncop.Runtime) -> asyncop.AsyncOperation:
    ch: asyncop.Channel[int] = asyncop.Channel(0)
    event = asyncop.Event()
    roots: list[asyncop.AsyncOperation] = []

    def root() -> None:
        me = asyncop.current_operation()
        assert me is not None
        roots.append(me)
        me.spawn(ch.recv)
        me.spawn(event.wait)
        me.token.wait()
        me.token.check()

    op = rt.spawn(root)
    deadline = time.monotonic() + 10
    while not (
        ch.statistics().tasks_waiting_receive
        and event.statistics().tasks_waiting
        and roots
        and roots[0].token._waiters
    ):
        assert time.monotonic() < deadline, "the sync operations never blocked"
        time.sleep(0.001)
    return op


TREES: dict[str, Callable[[asyncop.Runtime], asyncop.AsyncOperation]] = {
    "parked_task": _parked_task,
    "task_tree": _task_tree,
    "pending_tree": _pending_tree,
    "blocked_sync_ops": _blocked_sync_ops,
}


def _interrupted_at(call: Callable[[], object], nth: int) -> bool:
    """Run ``call`` with a KeyboardInterrupt at its nth point; True if it landed."""
    seen = 0

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal seen
        if event == "call" or event == "c_return":
            seen += 1
            if seen == nth:
                sys.setprofile(None)
                raise KeyboardInterrupt

    with _collector_off():
        sys.setprofile(hook)
        try:
            call()
        except KeyboardInterrupt:
            return True
        finally:
            sys.setprofile(None)
    return False


def _cancel_interrupted_at(op: asyncop.AsyncOperation, nth: int) -> bool:
    """Cancel ``op`` with a KeyboardInterrupt at its nth point; True if it landed.

    Every point counts: the walk, the wake-ups of tasks and threads, and the
    finalization of the nodes that end in the walk.
    """
    return _interrupted_at(lambda: op.cancel("interrupted"), nth)


def _subtree(op: asyncop.AsyncOperation) -> list[asyncop.AsyncOperation]:
    nodes = [op]
    for node in nodes:
        nodes.extend(node.children())
    return nodes


def _check_all_ended(rt: asyncop.Runtime, nodes: list[asyncop.AsyncOperation], nth: int) -> None:
    """Every node is final and unlinked, and the runtime keeps nothing."""
    for node in nodes:
        assert node.done, f"interrupt at point {nth}: {node.name!r} is {node.state.name}"
        assert node.parent is None and not node.children(), (
            f"interrupt at point {nth}: {node.name!r} is still linked"
        )
    deadline = time.monotonic() + 10
    while not rt.dump().splitlines()[0].endswith("no live operations") or rt.registrations():
        assert time.monotonic() < deadline, (
            f"interrupt at point {nth}: the runtime still keeps\n{rt.dump()}\n"
            f"with {rt.registrations()} registrations"
        )
        time.sleep(0.001)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("finish", ["cancel", "shutdown"])
@pytest.mark.parametrize("tree", sorted(TREES))
def test_an_interrupt_at_any_point_of_cancel_leaves_a_tree_a_later_call_completes(
    tree: str, finish: str
) -> None:
    assert threading.current_thread() is threading.main_thread()
    nth = 1
    while True:
        workers = 1 if tree == "pending_tree" else 3
        rt = asyncop.Runtime(workers, name=f"ki-cancel-{tree}-{nth}")
        try:
            op = TREES[tree](rt)
            nodes = _subtree(op)
            landed = _cancel_interrupted_at(op, nth)
            gate = getattr(rt, "_test_gate", None)
            if gate is not None:
                gate.set()
            if finish == "cancel":
                op.cancel("again")
                result = op.wait(10)
                assert result.state is asyncop.OperationState.CANCELLED, (
                    f"interrupt at point {nth}: ended {result.state.name}"
                )
                _check_all_ended(rt, nodes, nth)
        except TimeoutError:
            pytest.fail(f"interrupt at point {nth} of cancel(): the tree never ended")
        finally:
            assert rt.shutdown(timeout=10), f"interrupt at point {nth}: shutdown did not end"
        if finish == "shutdown":
            _check_all_ended(rt, nodes, nth)
        if not landed:
            break
        nth += 1
    # Compiled, the cancel of a tree that never started runs no Python code
    # of asyncop's (the walk, what it leaves to run after it and the
    # finalizations are C): an interrupt lands only as the call begins.
    assert nth > (1 if COMPILED and tree == "pending_tree" else 3)
