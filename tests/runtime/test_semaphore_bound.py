"""``Semaphore(n, max_value=...)``: a bounded semaphore refuses a release past its maximum."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import asyncop
from asyncop import Semaphore
from asyncop.testing import wait_all_blocked

pytestmark = pytest.mark.timeout(20)


def test_release_past_max_value_raises_and_leaves_the_value() -> None:
    sem = Semaphore(2, max_value=2)
    with pytest.raises(ValueError, match="max_value=2"):
        sem.release()
    assert sem.value == 2
    assert sem.acquire(timeout=0)
    sem.release()
    assert sem.value == 2
    assert sem.max_value == 2
    assert "max_value=2" in repr(sem)


def test_without_max_value_releases_add_permits() -> None:
    sem = Semaphore(0)
    sem.release()
    sem.release()
    assert sem.value == 2
    assert sem.max_value is None


def test_a_release_to_a_waiter_is_allowed_at_the_maximum(vruntime: asyncop.Runtime) -> None:
    sem = Semaphore(0, max_value=1)

    async def waiter() -> None:
        await sem.acquire_async()

    async def main() -> int:
        async with asyncop.scope() as s:
            s.spawn(waiter)
            await wait_all_blocked()
            sem.release()  # handed to the waiter: the value stays 0
        sem.release()
        with pytest.raises(ValueError):
            sem.release()
        return sem.value

    assert vruntime.run(main) == 1


def test_async_with_and_thread_with_keep_within_the_bound(vruntime: asyncop.Runtime) -> None:
    sem = Semaphore(1, max_value=1)

    async def main() -> None:
        async with sem:
            assert sem.value == 0
        assert sem.value == 1

    vruntime.run(main)
    errors: list[BaseException] = []

    def thread_side() -> None:
        try:
            with sem:
                pass
            sem.release()
        except ValueError as exc:
            errors.append(exc)

    thread = threading.Thread(target=thread_side)
    thread.start()
    thread.join(10)
    assert len(errors) == 1 and sem.value == 1


@pytest.mark.parametrize(
    ("args", "error"),
    [((1, 1.5), TypeError), ((1, True), TypeError), ((3, 2), ValueError)],
)
def test_bad_max_value_raises(args: tuple[Any, Any], error: type[Exception]) -> None:
    with pytest.raises(error, match="max_value"):
        Semaphore(*args)
