"""Remote work: worker processes and a local Dask cluster.

``cpu_fanout`` runs n pure-Python jobs of about 0.25 s each on 2 cores: as
sync callbacks on asyncop's workers (they take turns under the GIL), on
``ProcessExecutor(2)``, on ``DaskExecutor`` over a 2-process
``LocalCluster``, and on the bare engines for reference
(``ProcessPoolExecutor`` and ``Client.submit``).

``remote_cancel`` times ``cancel()`` to the operation's final state, n
times, for a running job that polls its remote token every 10 ms and for
one that ignores it (killed at once with ``kill_grace=0`` on processes,
abandoned on Dask).

``remote_overhead`` runs n trivial jobs: per-job cost against the bare
engine (pebble's pool, which ``ProcessExecutor`` drives, and the standard
``ProcessPoolExecutor``), and against ``Client.submit``.

Pools and clusters are started, and their workers warmed, outside the timed
region.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any

import asyncop

from ._registry import Limit, Metrics, Ratio, workload
from ._timing import Stopwatch

__all__ = ["CANCEL", "FANOUT", "OVERHEAD"]

WORKERS = 2
# Iterations of _spin that take about 0.25 s on a 2020s core.
SPIN = 2_500_000


def _spin(iterations: int) -> int:
    x = 0
    for i in range(iterations):
        x = (x * 31 + i) & 0xFFFFFFFF
    return x


def _noop(i: int) -> int:
    return i


def _poll_token(seconds: float) -> str:
    token = asyncop.remote_token()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        token.check()
        time.sleep(0.01)
    return "finished"


def _ignore_token(seconds: float) -> str:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "ignored"


@contextmanager
def _cluster() -> Iterator[Any]:
    import distributed

    with (
        distributed.LocalCluster(
            n_workers=WORKERS,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def _fanout(spawn: Callable[..., Any], n: int, fn: Callable[..., Any], *args: Any) -> Metrics:
    """Warm the workers, then time n jobs submitted at once and waited for."""
    for op in [spawn(_noop, i) for i in range(WORKERS * 2)]:
        op.wait()
    with Stopwatch() as watch:
        ops = [spawn(fn, *args) for _ in range(n)]
        for op in ops:
            op.wait()
    return watch.metrics()


# ----------------------------------------------------------------------
# cpu_fanout
# ----------------------------------------------------------------------

FANOUT = workload(
    "cpu_fanout",
    "n pure-Python jobs of ~0.25 s on 2 workers: threads, processes, a Dask cluster",
    sizes=(8,),
    quick_sizes=(4,),
    checks=[
        Ratio("asyncop_process", "sync_callbacks", limit=1 / 1.8),
        Ratio("asyncop_process", "process_pool", limit=1.1),
        Ratio("asyncop_dask", "dask_submit", limit=1.1),
    ],
)


@FANOUT.system("sync_callbacks")
def _fanout_sync(n: int) -> Metrics:
    with asyncop.Runtime(WORKERS) as runtime:
        return _fanout(runtime.spawn, n, _spin, SPIN)


@FANOUT.system("asyncop_process")
def _fanout_process(n: int) -> Metrics:
    with asyncop.Runtime(WORKERS) as runtime, asyncop.ProcessExecutor(WORKERS) as ex:

        def spawn(fn: Callable[..., Any], *args: Any) -> Any:
            return runtime.spawn(fn, *args, executor=ex)

        return _fanout(spawn, n, _spin, SPIN)


@FANOUT.system("process_pool")
def _fanout_process_pool(n: int) -> Metrics:
    with ProcessPoolExecutor(WORKERS) as pool:
        return _bare_futures(pool.submit, n, _spin, SPIN)


@FANOUT.system("asyncop_dask", requires=("distributed",))
def _fanout_dask(n: int) -> Metrics:
    from asyncop.dask import DaskExecutor

    with asyncop.Runtime(WORKERS) as runtime, _cluster() as client:
        ex = DaskExecutor(client)

        def spawn(fn: Callable[..., Any], *args: Any) -> Any:
            return runtime.spawn(fn, *args, executor=ex)

        return _fanout(spawn, n, _spin, SPIN)


@FANOUT.system("dask_submit", requires=("distributed",))
def _fanout_dask_submit(n: int) -> Metrics:
    with _cluster() as client:
        return _bare_dask(client, n, _spin, SPIN)


def _bare_futures(
    submit: Callable[..., Any], n: int, fn: Callable[..., Any], *args: Any
) -> Metrics:
    for future in [submit(_noop, i) for i in range(WORKERS * 2)]:
        future.result()
    with Stopwatch() as watch:
        futures = [submit(fn, *args) for _ in range(n)]
        for future in futures:
            future.result()
    return watch.metrics()


def _bare_dask(client: Any, n: int, fn: Callable[..., Any], *args: Any) -> Metrics:
    client.gather([client.submit(_noop, i, pure=False) for i in range(WORKERS * 2)])
    with Stopwatch() as watch:
        futures = [client.submit(fn, *args, pure=False) for _ in range(n)]
        client.gather(futures)
    return watch.metrics()


# ----------------------------------------------------------------------
# remote_cancel
# ----------------------------------------------------------------------

CANCEL = workload(
    "remote_cancel",
    "cancel() to final state of a running remote job, n times (mean_ms, max_ms)",
    sizes=(20,),
    quick_sizes=(3,),
    checks=[
        Limit("process_polling", metric="mean_ms", limit=50.0),
        Limit("dask_polling", metric="mean_ms", limit=100.0),
    ],
)


def _cancel_times(spawn: Callable[..., Any], n: int, fn: Callable[..., Any]) -> Metrics:
    """Start a job, let it run, cancel it and time until it is final; n times."""
    spawn(_noop, 0).wait()
    times = []
    with Stopwatch() as watch:
        for _ in range(n):
            op = spawn(fn, 30.0)
            time.sleep(0.2)
            start = time.perf_counter()
            op.cancel()
            op.wait()
            times.append(time.perf_counter() - start)
            assert op.state is not asyncop.OperationState.COMPLETED
    return watch.metrics(mean_ms=1000 * sum(times) / n, max_ms=1000 * max(times))


def _process_cancel(n: int, fn: Callable[..., Any], kill_grace: float) -> Metrics:
    with (
        asyncop.Runtime(WORKERS) as runtime,
        asyncop.ProcessExecutor(WORKERS, kill_grace=kill_grace) as ex,
    ):

        def spawn(fn: Callable[..., Any], *args: Any) -> Any:
            return runtime.spawn(fn, *args, executor=ex)

        return _cancel_times(spawn, n, fn)


def _dask_cancel(n: int, fn: Callable[..., Any], abandon: bool) -> Metrics:
    from asyncop.dask import DaskExecutor

    with asyncop.Runtime(WORKERS) as runtime, _cluster() as client:
        ex = DaskExecutor(client)

        def spawn(fn: Callable[..., Any], *args: Any) -> Any:
            return runtime.spawn(fn, *args, executor=ex, abandon=abandon)

        return _cancel_times(spawn, n, fn)


@CANCEL.system("process_polling")
def _cancel_process_polling(n: int) -> Metrics:
    return _process_cancel(n, _poll_token, kill_grace=5.0)


@CANCEL.system("process_ignoring")
def _cancel_process_ignoring(n: int) -> Metrics:
    return _process_cancel(n, _ignore_token, kill_grace=0.0)


@CANCEL.system("dask_polling", requires=("distributed",))
def _cancel_dask_polling(n: int) -> Metrics:
    return _dask_cancel(n, _poll_token, abandon=False)


@CANCEL.system("dask_ignoring_abandon", requires=("distributed",))
def _cancel_dask_abandon(n: int) -> Metrics:
    return _dask_cancel(n, _ignore_token, abandon=True)


# ----------------------------------------------------------------------
# remote_overhead
# ----------------------------------------------------------------------

OVERHEAD = workload(
    "remote_overhead",
    "n trivial remote jobs submitted at once, then waited for: per-job cost",
    sizes=(2_000,),
    quick_sizes=(200,),
    checks=[
        Ratio("asyncop_process", "pebble_pool", limit=1.2),
        Ratio("asyncop_process", "process_pool", limit=1.2),
        Ratio("asyncop_dask", "dask_submit", limit=1.2),
    ],
)


@OVERHEAD.system("asyncop_process")
def _overhead_process(n: int) -> Metrics:
    with asyncop.Runtime(WORKERS) as runtime, asyncop.ProcessExecutor(WORKERS) as ex:

        def spawn(fn: Callable[..., Any], *args: Any) -> Any:
            return runtime.spawn(fn, *args, executor=ex)

        return _fanout(spawn, n, _noop, 1)


@OVERHEAD.system("pebble_pool", requires=("pebble",))
def _overhead_pebble(n: int) -> Metrics:
    import multiprocessing

    from pebble import ProcessPool

    pool = ProcessPool(max_workers=WORKERS, context=multiprocessing.get_context("forkserver"))
    try:
        return _bare_futures(lambda fn, *args: pool.schedule(fn, args=args), n, _noop, 1)
    finally:
        pool.stop()
        pool.join()


@OVERHEAD.system("process_pool")
def _overhead_process_pool(n: int) -> Metrics:
    with ProcessPoolExecutor(WORKERS) as pool:
        return _bare_futures(pool.submit, n, _noop, 1)


@OVERHEAD.system("asyncop_dask", requires=("distributed",))
def _overhead_dask(n: int) -> Metrics:
    from asyncop.dask import DaskExecutor

    with asyncop.Runtime(WORKERS) as runtime, _cluster() as client:
        ex = DaskExecutor(client)

        def spawn(fn: Callable[..., Any], *args: Any) -> Any:
            return runtime.spawn(fn, *args, executor=ex)

        return _fanout(spawn, n, _noop, 1)


@OVERHEAD.system("dask_submit", requires=("distributed",))
def _overhead_dask_submit(n: int) -> Metrics:
    with _cluster() as client:
        return _bare_dask(client, n, _noop, 1)
