"""Tests for the timer heap: order, FIFO ties, lazy cancel, bounded churn."""

from __future__ import annotations

import math
import random
import time

import pytest

from asyncop.runtime._core._timers import FAR, Timer, TimerHeap, is_far

pytestmark = pytest.mark.timeout(20)


def _noop() -> None:
    pass


def _push(heap: TimerHeap, deadline: float, label: object = None) -> Timer:
    """Arm a timer whose callback returns ``label``, to tell timers apart."""
    return heap.push(deadline, lambda: label, inline=False)


def _labels(timers: list[Timer]) -> list[object]:
    return [timer.callback() for timer in timers]


def test_new_heap_is_empty() -> None:
    heap = TimerHeap()
    assert len(heap) == 0
    assert heap.heap_size == 0
    assert heap.next_deadline() is None
    assert heap.pop_due(1e9) == []


def test_pop_due_returns_timers_in_deadline_order() -> None:
    heap = TimerHeap()
    for deadline in (5.0, 1.0, 3.0, 2.0, 4.0):
        _push(heap, deadline, deadline)
    assert _labels(heap.pop_due(10.0)) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert len(heap) == 0
    assert heap.heap_size == 0


def test_pop_due_leaves_timers_not_yet_due() -> None:
    heap = TimerHeap()
    for deadline in (5.0, 1.0, 3.0, 2.0, 4.0):
        _push(heap, deadline, deadline)
    assert _labels(heap.pop_due(2.5)) == [1.0, 2.0]
    assert len(heap) == 3
    assert heap.next_deadline() == 3.0
    assert _labels(heap.pop_due(2.9)) == []
    assert _labels(heap.pop_due(10.0)) == [3.0, 4.0, 5.0]


def test_timer_due_exactly_now_fires() -> None:
    heap = TimerHeap()
    _push(heap, 7.0, "due")
    assert _labels(heap.pop_due(7.0)) == ["due"]


def test_equal_deadlines_pop_in_the_order_they_were_set() -> None:
    heap = TimerHeap()
    for i in range(200):
        _push(heap, 1.0, i)
    assert _labels(heap.pop_due(1.0)) == list(range(200))


def test_equal_deadlines_stay_fifo_when_interleaved_with_others() -> None:
    heap = TimerHeap()
    _push(heap, 2.0, "a2")
    _push(heap, 1.0, "a1")
    _push(heap, 2.0, "b2")
    _push(heap, 1.0, "b1")
    _push(heap, 2.0, "c2")
    assert _labels(heap.pop_due(5.0)) == ["a1", "b1", "a2", "b2", "c2"]


def test_equal_deadlines_stay_fifo_across_separate_pops() -> None:
    heap = TimerHeap()
    _push(heap, 3.0, "first")
    _push(heap, 1.0, "early")
    assert _labels(heap.pop_due(1.0)) == ["early"]
    _push(heap, 3.0, "second")
    assert _labels(heap.pop_due(3.0)) == ["first", "second"]


def test_push_returns_an_armed_timer_with_its_fields() -> None:
    heap = TimerHeap()
    timer = heap.push(4.5, _noop, inline=True)
    assert isinstance(timer, Timer)
    assert timer.deadline == 4.5
    assert timer.callback is _noop
    assert timer.inline is True
    assert timer.active is True
    assert heap.push(1.0, _noop, inline=False).inline is False


def test_cancelled_timer_never_fires() -> None:
    heap = TimerHeap()
    _push(heap, 1.0, "a")
    doomed = _push(heap, 2.0, "b")
    _push(heap, 3.0, "c")
    assert heap.cancel(doomed) is True
    assert _labels(heap.pop_due(10.0)) == ["a", "c"]


def test_len_counts_only_armed_timers() -> None:
    heap = TimerHeap()
    timers = [_push(heap, float(i), i) for i in range(10)]
    for timer in timers[::2]:
        heap.cancel(timer)
    assert len(heap) == 5
    # Lazily deleted: the cancelled entries may still sit in the heap.
    assert heap.heap_size >= len(heap)
    heap.pop_due(4.5)  # fires 1 and 3; drops 0, 2 and 4
    assert len(heap) == 3


def test_cancel_twice_returns_false_the_second_time() -> None:
    heap = TimerHeap()
    timer = _push(heap, 1.0)
    assert heap.cancel(timer) is True
    assert heap.cancel(timer) is False
    assert len(heap) == 0


def test_cancel_after_firing_returns_false_and_keeps_len() -> None:
    heap = TimerHeap()
    timer = _push(heap, 1.0)
    _push(heap, 2.0)
    assert heap.pop_due(1.0) == [timer]
    assert timer.active is False
    assert heap.cancel(timer) is False
    assert len(heap) == 1


def test_fired_timer_does_not_fire_again() -> None:
    heap = TimerHeap()
    _push(heap, 1.0, "once")
    assert _labels(heap.pop_due(1.0)) == ["once"]
    assert heap.pop_due(100.0) == []


def test_next_deadline_skips_cancelled_timers() -> None:
    heap = TimerHeap()
    first = _push(heap, 1.0)
    second = _push(heap, 2.0)
    _push(heap, 3.0)
    assert heap.next_deadline() == 1.0
    heap.cancel(first)
    assert heap.next_deadline() == 2.0
    heap.cancel(second)
    assert heap.next_deadline() == 3.0


def test_next_deadline_is_none_when_every_timer_is_cancelled() -> None:
    heap = TimerHeap()
    timers = [_push(heap, float(i)) for i in range(5)]
    for timer in timers:
        heap.cancel(timer)
    assert heap.next_deadline() is None
    assert len(heap) == 0


def test_next_deadline_sees_an_earlier_timer_pushed_later() -> None:
    heap = TimerHeap()
    _push(heap, 10.0)
    assert heap.next_deadline() == 10.0
    _push(heap, 0.5)
    assert heap.next_deadline() == 0.5


def test_heap_stays_bounded_under_push_cancel_churn() -> None:
    heap = TimerHeap()
    live = [_push(heap, 1e6 + i, ("live", i)) for i in range(5)]
    largest = 0
    for i in range(100_000):
        timer = _push(heap, 10.0 + i)  # earlier than the live ones
        heap.cancel(timer)
        largest = max(largest, heap.heap_size)
    assert largest < 1_000
    assert len(heap) == 5
    assert heap.next_deadline() == 1e6
    assert heap.pop_due(2e6) == live


def test_heap_stays_bounded_when_cancelled_timers_are_behind_live_ones() -> None:
    # Cancelled entries that never surface at the top must still be dropped.
    heap = TimerHeap()
    live = [_push(heap, float(i), ("live", i)) for i in range(5)]
    largest = 0
    for i in range(100_000):
        heap.cancel(_push(heap, 1e6 + i))
        largest = max(largest, heap.heap_size)
    assert largest < 1_000
    assert heap.pop_due(1e9) == live


# The complexity checks time CPU, not the wall clock, so that a loaded
# machine does not fail them; an O(n) step per timer would take minutes.


def test_100k_push_then_pop_is_fast_and_sorted() -> None:
    seed = 20240611
    rng = random.Random(seed)
    heap = TimerHeap()
    deadlines = [rng.uniform(0, 1000) for _ in range(100_000)]
    start = time.process_time()
    for deadline in deadlines:
        heap.push(deadline, _noop, inline=False)
    fired = heap.pop_due(1001.0)
    elapsed = time.process_time() - start
    assert [t.deadline for t in fired] == sorted(deadlines), f"seed={seed}"
    assert elapsed < 5.0, f"100k push+pop took {elapsed:.2f} s of CPU"


def test_100k_timers_expiring_one_by_one_is_fast() -> None:
    # Expiry must be O(log n) each, not a scan of the heap.
    heap = TimerHeap()
    n = 100_000
    for i in range(n):
        heap.push(float(n - i), _noop, inline=False)
    start = time.process_time()
    count = 0
    for now in range(1, n + 1):
        count += len(heap.pop_due(float(now)))
        heap.next_deadline()
    elapsed = time.process_time() - start
    assert count == n
    assert elapsed < 5.0, f"100k expiries took {elapsed:.2f} s of CPU"


def test_random_operations_match_a_sorted_model() -> None:
    seed = 7331
    rng = random.Random(seed)
    heap = TimerHeap()
    model: dict[int, tuple[float, int]] = {}  # label -> (deadline, order set)
    timers: dict[int, Timer] = {}
    now = 0.0
    for step in range(20_000):
        roll = rng.random()
        if roll < 0.5:
            label = step
            deadline = now + rng.choice([0.0, 1.0, 2.0, rng.uniform(0, 50)])
            timers[label] = _push(heap, deadline, label)
            model[label] = (deadline, step)
        elif roll < 0.8 and timers:
            label = rng.choice(list(timers))
            expected = label in model
            assert heap.cancel(timers.pop(label)) is expected, f"seed={seed} step={step}"
            model.pop(label, None)
        else:
            now += rng.uniform(0, 5)
            fired = _labels(heap.pop_due(now))
            due = sorted(
                (entry for entry in model.items() if entry[1][0] <= now),
                key=lambda item: item[1],
            )
            assert fired == [label for label, _ in due], f"seed={seed} step={step}"
            for label in fired:
                del model[label]  # type: ignore[arg-type]
        assert len(heap) == len(model), f"seed={seed} step={step}"
        expected_next = min((d for d, _ in model.values()), default=None)
        assert heap.next_deadline() == expected_next, f"seed={seed} step={step}"
        # Lazy deletion, but bounded: never more dead entries than about
        # the live ones (plus a small constant before a clean-up pays off).
        assert heap.heap_size <= 2 * len(heap) + 100, f"seed={seed} step={step}"


# Deadlines that never come: inf (and NaN, which no caller should pass but
# which would break the heap's order) arm a dormant timer.


@pytest.mark.parametrize("deadline", [math.inf, math.nan])
def test_a_timer_that_never_comes_is_armed_but_stays_out_of_the_heap(deadline: float) -> None:
    heap = TimerHeap()
    timer = _push(heap, deadline, "never")
    assert timer.active
    assert len(heap) == 1
    assert heap.heap_size == 0
    assert heap.next_deadline() is None
    assert heap.pop_due(math.inf) == []
    assert heap.pop_due(1e308) == []
    assert timer.active


@pytest.mark.parametrize("deadline", [math.inf, math.nan])
def test_a_timer_that_never_comes_keeps_the_others_in_order(deadline: float) -> None:
    heap = TimerHeap()
    _push(heap, 3.0, "c")
    never = _push(heap, deadline, "never")
    _push(heap, 1.0, "a")
    _push(heap, 2.0, "b")
    assert heap.next_deadline() == 1.0
    assert _labels(heap.pop_due(5.0)) == ["a", "b", "c"]
    assert len(heap) == 1
    assert heap.cancel(never) is True
    assert heap.cancel(never) is False
    assert len(heap) == 0
    assert heap.heap_size == 0


def test_cancelling_many_dormant_timers_does_not_compact_live_ones_away() -> None:
    heap = TimerHeap()
    live = [_push(heap, float(i), i) for i in range(3)]
    for _ in range(1000):
        heap.cancel(_push(heap, math.inf))
    assert len(heap) == 3
    assert heap.pop_due(10.0) == live


@pytest.mark.parametrize(
    ("deadline", "now", "far"),
    [
        (math.inf, 0.0, True),
        (math.nan, 0.0, True),
        (1e300, 0.0, True),
        (FAR, 0.0, True),
        (FAR - 1, 0.0, False),
        (1e12, 1e12 - 5, False),
        (5.0, 0.0, False),
        (-math.inf, 0.0, False),
    ],
)
def test_is_far_says_which_deadlines_are_as_good_as_never(
    deadline: float, now: float, far: bool
) -> None:
    assert is_far(deadline, now) is far
