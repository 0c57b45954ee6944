"""Tests for start_thread and ThreadHandle."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from asyncop.platform import ThreadHandle, start_thread

pytestmark = pytest.mark.timeout(10)


def test_runs_entry_with_its_context_on_a_new_named_thread() -> None:
    seen: dict[str, Any] = {}

    def entry(context: object) -> None:
        current = threading.current_thread()
        seen["context"] = context
        seen["name"] = current.name
        seen["ident"] = current.ident

    context = object()
    handle = start_thread(entry, context, name="asyncop-test-entry")
    assert handle.join(5) is True
    assert seen["context"] is context
    assert seen["name"] == "asyncop-test-entry"
    assert seen["ident"] != threading.get_ident()
    assert seen["ident"] == handle.ident


def test_handle_reports_the_thread_name() -> None:
    handle = start_thread(lambda _: None, None, name="asyncop-test-name")
    assert isinstance(handle, ThreadHandle)
    assert handle.name == "asyncop-test-name"
    assert "asyncop-test-name" in repr(handle)
    assert handle.join(5)


def test_context_defaults_to_none() -> None:
    seen: list[object] = []
    handle = start_thread(seen.append, name="asyncop-test-default-context")
    assert handle.join(5)
    assert seen == [None]


def test_join_returns_true_once_the_thread_ended() -> None:
    handle = start_thread(lambda _: None, None, name="asyncop-test-join")
    assert handle.join(5) is True
    assert handle.is_alive() is False
    # Joining an ended thread again is harmless.
    assert handle.join(0) is True


def test_join_with_timeout_on_a_blocked_thread_returns_false() -> None:
    gate = threading.Event()
    handle = start_thread(lambda ev: ev.wait(5), gate, name="asyncop-test-blocked")
    try:
        assert handle.join(0.05) is False
        assert handle.is_alive() is True
        assert "alive" in repr(handle)
    finally:
        gate.set()
    assert handle.join(5) is True
    assert "ended" in repr(handle)


def test_joining_itself_raises_runtime_error_naming_the_thread() -> None:
    box: dict[str, Any] = {"ready": threading.Event()}

    def entry(ctx: dict[str, Any]) -> None:
        assert ctx["ready"].wait(5)
        try:
            ctx["handle"].join(1)
        except RuntimeError as exc:
            ctx["error"] = exc

    handle = start_thread(entry, box, name="asyncop-test-self-join")
    box["handle"] = handle
    box["ready"].set()
    assert handle.join(5)
    error = box.get("error")
    assert isinstance(error, RuntimeError)
    assert "asyncop-test-self-join" in str(error)


def test_non_callable_entry_raises_type_error_naming_the_thread() -> None:
    before = {t.name for t in threading.enumerate()}
    with pytest.raises(TypeError, match="asyncop-test-not-callable"):
        start_thread(42, None, name="asyncop-test-not-callable")  # type: ignore[arg-type]
    after = {t.name for t in threading.enumerate()}
    assert "asyncop-test-not-callable" not in after - before


def test_threads_are_daemon_threads() -> None:
    seen: list[bool] = []
    handle = start_thread(
        lambda _: seen.append(threading.current_thread().daemon),
        None,
        name="asyncop-test-daemon",
    )
    assert handle.join(5)
    assert seen == [True]
