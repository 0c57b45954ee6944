"""Rules a user of trio's and anyio's ``open_signal_receiver`` expects of ``asyncop.signals``.

Each test states, from the user's side, a rule those libraries promise that
asyncop promises too, in the cases the other signal tests leave out: nested
receivers restore their handlers in order, and a receiver that fails to open
leaves every handler as it was.
"""

from __future__ import annotations

import signal
import sys

import pytest

from asyncop.signals import open_signal_receiver

pytestmark = [
    pytest.mark.timeout(20),
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
]


def test_nested_receivers_restore_their_handlers_in_order() -> None:
    before = signal.getsignal(signal.SIGUSR2)
    with open_signal_receiver(signal.SIGUSR2):
        outer = signal.getsignal(signal.SIGUSR2)
        assert outer is not before
        with open_signal_receiver(signal.SIGUSR2):
            assert signal.getsignal(signal.SIGUSR2) is not outer
        assert signal.getsignal(signal.SIGUSR2) is outer
    assert signal.getsignal(signal.SIGUSR2) is before


def test_a_receiver_that_fails_to_open_changes_no_handler() -> None:
    before = signal.getsignal(signal.SIGUSR1)
    with (
        pytest.raises(ValueError, match="SIGKILL"),
        open_signal_receiver(signal.SIGUSR1, signal.SIGKILL),
    ):
        pass  # pragma: no cover
    assert signal.getsignal(signal.SIGUSR1) is before
