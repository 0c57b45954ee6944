"""Real Ctrl-C (SIGINT) on a program whose main thread waits in asyncop.

Each scenario runs in a fresh interpreter. The parent waits until the main
thread is blocked, sends SIGINT, and expects the KeyboardInterrupt to arrive
promptly, even when the kernel hands the signal to another thread, and the
primitive to have lost nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
]

REPO = Path(__file__).resolve().parents[2]

PRELUDE = """
import signal, sys, threading, time
import asyncop

def ready():
    print("ready", flush=True)

def masked():
    # The kernel then delivers SIGINT to another thread: the main thread
    # only sees a flag, which it must check while it waits.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
"""

SCENARIOS = {
    "run_forever_masked": """
        rt = asyncop.Runtime(2)
        masked()
        ready()
        try:
            rt.run(asyncop.Event().wait)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        assert rt.shutdown(timeout=10)
        print("ok", flush=True)
    """,
    "op_wait_masked": """
        rt = asyncop.Runtime(2)
        op = rt.spawn(asyncop.Event().wait)
        masked()
        ready()
        try:
            op.wait()
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        op.cancel()
        assert op.wait(10).state is asyncop.OperationState.CANCELLED
        assert rt.shutdown(timeout=10)
        print("ok", flush=True)
    """,
    "channel_recv": """
        ch = asyncop.Channel(0)
        ready()
        try:
            ch.recv()
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        try:
            ch.try_send(1)
            print("a ghost receiver ate the item", flush=True)
        except asyncop.WouldBlock:
            print("ok", flush=True)
    """,
    "channel_send": """
        ch = asyncop.Channel(0)
        ready()
        try:
            ch.send(1)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        try:
            ch.try_recv()
            print("a ghost sender delivered the item", flush=True)
        except asyncop.WouldBlock:
            print("ok", flush=True)
    """,
    "lock_acquire": """
        lock = asyncop.Lock("sig")
        held, let_go = threading.Event(), threading.Event()
        def hold():
            with lock:
                held.set()
                let_go.wait(30)
        holder = threading.Thread(target=hold)
        holder.start()
        held.wait(10)
        ready()
        try:
            lock.acquire()
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        let_go.set()
        holder.join(10)
        print("ok" if not lock.locked() and lock.acquire(timeout=5) else "lock leaked", flush=True)
    """,
    "semaphore_acquire": """
        sem = asyncop.Semaphore(0)
        ready()
        try:
            sem.acquire()
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        sem.release()
        print("ok" if sem.value == 1 else "a permit was eaten", flush=True)
    """,
    "event_wait_masked": """
        event = asyncop.Event()
        rt = asyncop.Runtime(1)  # a thread to take the signal
        masked()
        ready()
        try:
            event.wait()
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        print("ok" if not event.statistics().tasks_waiting else "a ghost waiter", flush=True)
        rt.shutdown(timeout=10)
    """,
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_sigint_reaches_a_main_thread_blocked_in_asyncop_and_loses_nothing(
    scenario: str,
) -> None:
    source = PRELUDE + textwrap.dedent(SCENARIOS[scenario])
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    child = subprocess.Popen(
        [sys.executable, "-c", source],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.2)  # let it block
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        line = child.stdout.readline().strip()
        elapsed = time.monotonic() - sent
        assert line == "interrupted", (
            f"{line!r}; stderr: {child.stderr.read() if child.stderr else ''}"
        )
        # The promise is 100 ms; the bound allows for a loaded machine.
        assert elapsed < 2.0, f"the Ctrl-C took {elapsed:.2f} s to arrive"
        # Not communicate(): readline() may have buffered the rest already.
        child.wait(30)
        out = child.stdout.read()
        err = child.stderr.read() if child.stderr else ""
        assert out.strip() == "ok", f"{out!r}; stderr: {err}"
        assert child.returncode == 0, err
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
