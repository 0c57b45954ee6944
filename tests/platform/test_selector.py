"""Tests for the choice of I/O multiplexer and the reactor's WakeupChannel."""

from __future__ import annotations

import queue
import selectors
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from asyncop.platform import WakeupChannel, choose_selector, selector_name

pytestmark = pytest.mark.timeout(10)

_CLASSES = {
    "epoll": "EpollSelector",
    "kqueue": "KqueueSelector",
    "poll": "PollSelector",
    "select": "SelectSelector",
}
AVAILABLE = [name for name, cls in _CLASSES.items() if hasattr(selectors, cls)]


@pytest.fixture(autouse=True)
def _no_selector_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNCOP_SELECTOR", raising=False)


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads often, so that a race window is actually hit."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


@pytest.fixture
def channel() -> Iterator[WakeupChannel]:
    chan = WakeupChannel()
    try:
        yield chan
    finally:
        chan.close()


@pytest.fixture(params=AVAILABLE)
def selector(request: pytest.FixtureRequest) -> Iterator[selectors.BaseSelector]:
    sel = choose_selector(request.param)
    try:
        yield sel
    finally:
        sel.close()


def _readable(sel: selectors.BaseSelector, chan: WakeupChannel) -> bool:
    return any(key.fd == chan.fileno() for key, _ in sel.select(0))


# ----------------------------------------------------------------------
# Choosing the multiplexer
# ----------------------------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="epoll is Linux-only")
def test_picks_epoll_on_linux() -> None:
    assert selector_name() == "epoll"
    sel = choose_selector()
    try:
        assert isinstance(sel, selectors.EpollSelector)
    finally:
        sel.close()


def test_default_is_the_best_available() -> None:
    assert selector_name() == AVAILABLE[0]


def test_env_var_forces_select(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNCOP_SELECTOR", "select")
    assert selector_name() == "select"
    sel = choose_selector()
    try:
        assert isinstance(sel, selectors.SelectSelector)
    finally:
        sel.close()


@pytest.mark.parametrize("name", AVAILABLE)
def test_env_var_forces_each_available_multiplexer(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv("ASYNCOP_SELECTOR", name)
    sel = choose_selector()
    try:
        assert type(sel).__name__ == _CLASSES[name]
    finally:
        sel.close()


def test_empty_env_var_means_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNCOP_SELECTOR", "")
    assert selector_name() == AVAILABLE[0]


def test_explicit_name_wins_over_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNCOP_SELECTOR", AVAILABLE[0])
    assert selector_name("select") == "select"
    sel = choose_selector("select")
    try:
        assert isinstance(sel, selectors.SelectSelector)
    finally:
        sel.close()


def test_unknown_env_name_raises_value_error_naming_the_choices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASYNCOP_SELECTOR", "bogus")
    with pytest.raises(ValueError) as info:
        choose_selector()
    message = str(info.value)
    assert "bogus" in message
    for name in AVAILABLE:
        assert name in message


def test_unknown_explicit_name_raises_value_error() -> None:
    with pytest.raises(ValueError, match="bogus"):
        selector_name("bogus")


@pytest.mark.skipif("kqueue" in AVAILABLE, reason="kqueue exists here")
def test_missing_multiplexer_raises_value_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNCOP_SELECTOR", "kqueue")
    with pytest.raises(ValueError, match="kqueue"):
        choose_selector()


# ----------------------------------------------------------------------
# WakeupChannel
# ----------------------------------------------------------------------


def test_fresh_channel_is_not_readable(
    selector: selectors.BaseSelector, channel: WakeupChannel
) -> None:
    selector.register(channel.fileno(), selectors.EVENT_READ)
    assert not _readable(selector, channel)


def test_wake_makes_the_channel_readable(
    selector: selectors.BaseSelector, channel: WakeupChannel
) -> None:
    selector.register(channel.fileno(), selectors.EVENT_READ)
    channel.wake()
    assert _readable(selector, channel)


def test_many_wakes_then_one_drain_leave_it_unreadable(
    selector: selectors.BaseSelector, channel: WakeupChannel
) -> None:
    selector.register(channel.fileno(), selectors.EVENT_READ)
    for _ in range(10_000):
        channel.wake()
    assert _readable(selector, channel)
    channel.drain()
    assert not _readable(selector, channel)


def test_wake_after_drain_is_not_lost(
    selector: selectors.BaseSelector, channel: WakeupChannel
) -> None:
    selector.register(channel.fileno(), selectors.EVENT_READ)
    for _ in range(3):
        channel.wake()
        assert _readable(selector, channel)
        channel.drain()
        assert not _readable(selector, channel)


def test_drain_without_wake_is_harmless(
    selector: selectors.BaseSelector, channel: WakeupChannel
) -> None:
    selector.register(channel.fileno(), selectors.EVENT_READ)
    channel.drain()
    assert not _readable(selector, channel)
    channel.wake()
    assert _readable(selector, channel)


def test_wake_from_another_thread_interrupts_a_blocked_select(
    selector: selectors.BaseSelector, channel: WakeupChannel
) -> None:
    selector.register(channel.fileno(), selectors.EVENT_READ)
    results: queue.Queue[list[int]] = queue.Queue()
    about_to_select = threading.Event()

    def reactor() -> None:
        about_to_select.set()
        events = selector.select(5)
        results.put([key.fd for key, _ in events])

    thread = threading.Thread(target=reactor, daemon=True)
    thread.start()
    assert about_to_select.wait(5)
    time.sleep(0.05)  # let it block in select(); the result is the same if not
    start = time.monotonic()
    channel.wake()
    assert results.get(timeout=5) == [channel.fileno()]
    # Woken by the byte, not by select()'s own 5 s timeout.
    assert time.monotonic() - start < 4.0
    thread.join(5)


class _WakeDuringRecv:
    """Stands in for the read end: a wake() lands while drain() is reading."""

    def __init__(self, chan: WakeupChannel) -> None:
        self._chan = chan
        self._sock = chan._reader
        self.fired = False

    def recv(self, n: int) -> bytes:
        if not self.fired:
            self.fired = True
            self._chan.wake()  # another thread's wake, between flag and read
        return self._sock.recv(n)

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        self._sock.close()


def test_wake_after_a_wake_that_raced_a_drain_is_not_lost(channel: WakeupChannel) -> None:
    # The reactor drains while another thread wakes it; the reactor then
    # re-reads its registrations and blocks again. The next wake() must
    # make it readable, or the reactor sleeps through every later wake.
    sel = selectors.DefaultSelector()
    try:
        sel.register(channel.fileno(), selectors.EVENT_READ)
        channel.wake()
        assert _readable(sel, channel)
        racing = _WakeDuringRecv(channel)
        channel._reader = racing  # type: ignore[misc]
        channel.drain()
        assert racing.fired
        channel.wake()
        assert _readable(sel, channel)
    finally:
        sel.close()


@pytest.mark.usefixtures("fast_switching")
def test_reactor_loop_never_sleeps_through_a_stream_of_wakes(channel: WakeupChannel) -> None:
    # A thread wakes without pause while the reactor loops select + drain:
    # every select must return readable. An empty select means a wake was
    # lost and the reactor would have slept until its timeout.
    sel = selectors.DefaultSelector()
    stop = threading.Event()

    def waker() -> None:
        while not stop.is_set():
            channel.wake()

    thread = threading.Thread(target=waker, daemon=True)
    try:
        sel.register(channel.fileno(), selectors.EVENT_READ)
        thread.start()
        lost_at = None
        end = time.monotonic() + 1.0
        rounds = 0
        while time.monotonic() < end:
            if not sel.select(0.5):
                lost_at = rounds
                break
            channel.drain()
            rounds += 1
    finally:
        stop.set()
        thread.join(5)
        sel.close()
    assert lost_at is None, f"a wake was lost after {lost_at} rounds"


def test_close_is_safe_and_later_wake_does_nothing() -> None:
    chan = WakeupChannel()
    chan.close()
    chan.wake()
    chan.wake()


def test_close_twice_is_harmless() -> None:
    chan = WakeupChannel()
    chan.close()
    chan.close()


def test_close_after_pending_wake_is_safe() -> None:
    chan = WakeupChannel()
    chan.wake()
    chan.close()
    chan.wake()
