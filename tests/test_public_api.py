"""The public surface: every name the contract lists is exported, nothing private leaks."""

from __future__ import annotations

import inspect
import typing

import pytest

import asyncop
import asyncop.testing

# The public names this release provides, by module.
TOP_LEVEL = {
    "AsyncOperation",
    "AsyncResult",
    "BrokenResourceError",
    "BusyResourceError",
    "CancelToken",
    "Cancelled",
    "CancellationError",
    "ClosedResourceError",
    "EndOfChannel",
    "InvalidStateError",
    "OperationState",
    "ProcessExecutor",
    "Runtime",
    "WouldBlock",
    "async_await",
    "async_cancel",
    "async_create",
    "async_result",
    "async_state",
    "async_submit",
    "async_worker_limit",
    "current_operation",
    "default_runtime",
    "Channel",
    "Event",
    "Lock",
    "Semaphore",
    "WakerStatus",
    "checkpoint",
    "current_time",
    "race",
    "remote_token",
    "scope",
    "select",
    "sleep",
    "sleep_until",
    "spawn_blocking",
    "timeout",
    "TaskStatus",
    "TASK_STATUS_IGNORED",
    "ChannelSender",
    "ChannelReceiver",
    "CapacityLimiter",
    "current_default_limiter",
    "Condition",
    "current_runtime",
    "move_on_after",
    "fail_after",
    "sleep_forever",
    "dump_on_signal",
    "DeadlockError",
}
# Cancel with a grace period: what asked work reads and waits on.
TOP_LEVEL |= {"stop_requested", "wait_stop_requested"}
# Beyond the contract: the _at spellings of trio and anyio, and the type they return.
TOP_LEVEL |= {"move_on_at", "fail_at", "TimeoutScope"}
# Beyond the contract: what the primitives' statistics() return, named as trio's.
TOP_LEVEL |= {
    "EventStatistics",
    "LockStatistics",
    "SemaphoreStatistics",
    "ConditionStatistics",
    "CapacityLimiterStatistics",
    "ChannelStatistics",
}
# Beyond the contract: what op.stats returns.
TOP_LEVEL |= {"OperationStatistics"}

LOWLEVEL = {"Waker", "WakerStatus", "resume_when", "waker_new", "resolve", "cancel", "timeout"}
# Beyond the contract: the hooks before sync callbacks, which anyio's backend uses.
LOWLEVEL |= {"add_callback_hook", "remove_callback_hook"}
TESTING = {"VirtualClock", "wait_all_blocked", "assert_checkpoints"}
SIGNALS = {"open_signal_receiver", "SignalReceiver"}
PROCESS = {"run_process", "open_process", "Process", "PipeStream"}
PROCESS |= {"PIPE", "DEVNULL", "STDOUT"}
ASYNCIO_BRIDGE = {"run", "run_sync"}


def test_every_contract_name_is_exported_from_asyncop() -> None:
    missing = sorted(name for name in TOP_LEVEL if not hasattr(asyncop, name))
    assert missing == []


def test_all_lists_only_public_names_that_exist() -> None:
    for name in asyncop.__all__:
        assert hasattr(asyncop, name), name
        assert not name.startswith("_") or name == "__version__", name
    assert set(asyncop.__all__) >= TOP_LEVEL


def test_lowlevel_and_testing_modules_export_their_contract_names() -> None:
    import asyncop.lowlevel

    assert sorted(n for n in LOWLEVEL if not hasattr(asyncop.lowlevel, n)) == []
    assert sorted(n for n in TESTING if not hasattr(asyncop.testing, n)) == []
    assert asyncop.lowlevel.WakerStatus is asyncop.WakerStatus


def test_process_module_exports_its_contract_names() -> None:
    import asyncop.process

    assert set(asyncop.process.__all__) == PROCESS
    assert sorted(n for n in PROCESS if not hasattr(asyncop.process, n)) == []
    assert asyncop.process.Process.__module__ == "asyncop.process"
    assert asyncop.process.run_process.__module__ == "asyncop.process"


def test_asyncio_bridge_module_exports_its_contract_names() -> None:
    import asyncop.asyncio_bridge

    assert set(asyncop.asyncio_bridge.__all__) == ASYNCIO_BRIDGE
    for name in ASYNCIO_BRIDGE:
        assert getattr(asyncop.asyncio_bridge, name).__module__ == "asyncop.asyncio_bridge"
    factory = inspect.signature(asyncop.Runtime).parameters["asyncio_loop_factory"]
    assert factory.kind is inspect.Parameter.KEYWORD_ONLY and factory.default is None


def test_dask_module_exports_its_executor() -> None:
    import asyncop.dask

    assert asyncop.dask.__all__ == ["DaskExecutor"]
    assert asyncop.dask.DaskExecutor.__module__ == "asyncop.dask"


def test_otel_module_exports_instrument_and_its_handle() -> None:
    otel = pytest.importorskip("asyncop.otel")

    assert otel.__all__ == ["Instrumentation", "instrument"]
    assert otel.instrument.__module__ == "asyncop.otel"
    assert otel.Instrumentation.__module__ == "asyncop.otel"
    assert asyncop.OperationStatistics.__module__ == "asyncop"


def test_signals_module_exports_its_contract_names() -> None:
    import asyncop.signals

    assert set(asyncop.signals.__all__) == SIGNALS
    assert asyncop.signals.open_signal_receiver.__module__ == "asyncop.signals"
    assert asyncop.signals.SignalReceiver.__module__ == "asyncop.signals"


def test_cancel_and_shutdown_take_a_keyword_only_grace() -> None:
    for call in (asyncop.AsyncOperation.cancel, asyncop.Runtime.shutdown, asyncop.async_cancel):
        grace = inspect.signature(call).parameters["grace"]
        assert grace.kind is inspect.Parameter.KEYWORD_ONLY and grace.default is None, call
    assert asyncop.stop_requested.__module__ == "asyncop"
    assert asyncop.wait_stop_requested.__module__ == "asyncop"


def test_testing_module_exports_the_virtual_clock() -> None:
    assert asyncop.testing.VirtualClock(autojump=False).now() == 0.0
    assert asyncop.testing.VirtualClock(autojump=True, io_grace=0.5).io_grace == 0.5


def test_public_names_show_their_public_module() -> None:
    import inspect

    import asyncop.lowlevel

    for module in (asyncop, asyncop.lowlevel, asyncop.testing):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                # WakerStatus is exported by both asyncop and asyncop.lowlevel.
                assert obj.__module__ in (module.__name__, "asyncop"), (module, name)


def test_statistics_are_frozen_values_with_trios_field_names() -> None:
    import attrs

    fields = {
        asyncop.EventStatistics: ["tasks_waiting"],
        asyncop.LockStatistics: ["locked", "owner", "tasks_waiting"],
        asyncop.SemaphoreStatistics: ["tasks_waiting"],
        asyncop.ConditionStatistics: ["tasks_waiting", "lock_statistics"],
        asyncop.CapacityLimiterStatistics: [
            "borrowed_tokens",
            "total_tokens",
            "borrowers",
            "tasks_waiting",
        ],
        asyncop.ChannelStatistics: [
            "current_buffer_used",
            "max_buffer_size",
            "open_send_ends",
            "open_receive_ends",
            "tasks_waiting_send",
            "tasks_waiting_receive",
        ],
    }
    for cls, names in fields.items():
        assert [field.name for field in attrs.fields(cls)] == names, cls
        assert repr(cls) == f"<class 'asyncop.{cls.__name__}'>"


def test_repr_of_a_public_class_names_the_public_module() -> None:
    assert repr(asyncop.Lock) == "<class 'asyncop.Lock'>"
    assert repr(asyncop.TimeoutScope) == "<class 'asyncop.TimeoutScope'>"
    assert asyncop.move_on_after.__module__ == "asyncop"
    assert asyncop.testing.VirtualClock.__module__ == "asyncop.testing"


def test_version_is_a_string() -> None:
    assert isinstance(asyncop.__version__, str)


def test_no_top_level_package_shadows_the_standard_library() -> None:
    import platform

    assert hasattr(platform, "python_version"), "the stdlib platform module must win"


def _public_calls(cls: type, module: str) -> dict[str, list[str]]:
    """Each public method of ``cls`` (defined in ``module``) -> its overloads' signatures."""
    calls: dict[str, list[str]] = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        attr = inspect.getattr_static(cls, name)
        if isinstance(attr, property):
            calls[name] = ["property"]
        elif callable(attr):
            # (A protocol's overloads have no implementation to look them up by.)
            registry = typing._overload_registry[module]  # type: ignore[attr-defined]
            overloads = list(registry.get(f"{cls.__qualname__}.{name}", {}).values())
            calls[name] = [str(inspect.signature(f)) for f in overloads or [attr]]
    return calls


def test_the_runtime_face_is_the_runtimes_public_calls_with_the_same_signatures() -> None:
    # op.runtime is typed with RuntimeFace, a protocol of the operations
    # package: it must offer every public call of Runtime, as Runtime types it.
    face = _public_calls(asyncop.RuntimeFace, "asyncop.operations._face")
    runtime = _public_calls(asyncop.Runtime, "asyncop.runtime._scheduler")
    assert set(face) == set(runtime), set(face) ^ set(runtime)
    for name, signatures in face.items():
        if signatures == ["property"] or len(signatures) > 1:
            assert signatures == runtime[name], name
        else:
            # A method without overloads: the same parameters, bar the
            # implementation's catch-all for refused keyword arguments (and
            # scope() gives a Scope, which the face knows as a ScopeFace).
            expected = runtime[name][0].replace(", **keywords: 'Any'", "")
            assert signatures[0] == expected.replace("'Scope'", "'ScopeFace'"), name


@pytest.mark.parametrize("name", ["run", "open_nursery", "gather", "to_thread", "Queue"])
def test_a_peer_libraries_name_says_what_asyncop_calls_it(name: str) -> None:
    # The first line a trio, anyio or asyncio user writes: asyncop.run(main).
    with pytest.raises(AttributeError, match=rf"no attribute '{name}'; (make|open|await|use) "):
        getattr(asyncop, name)
    assert not hasattr(asyncop, name)


def test_an_unknown_name_keeps_pythons_message_and_suggestion() -> None:
    with pytest.raises(AttributeError) as info:
        asyncop.Sleep  # type: ignore[attr-defined]  # noqa: B018
    assert str(info.value) == "module 'asyncop' has no attribute 'Sleep'"
    assert (info.value.name, info.value.obj) == ("Sleep", asyncop)
