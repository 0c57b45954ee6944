"""OperationState and AsyncResult: the state machine's values and the frozen result."""

from __future__ import annotations

import pytest

import asyncop
from asyncop import AsyncResult, OperationState

FINAL = {OperationState.COMPLETED, OperationState.FAILED, OperationState.CANCELLED}


def test_operation_state_has_the_six_states_of_the_machine() -> None:
    assert {state.name for state in OperationState} == {
        "CREATED",
        "PENDING",
        "RUNNING",
        "COMPLETED",
        "FAILED",
        "CANCELLED",
    }


def test_operation_state_values_are_strings() -> None:
    for state in OperationState:
        assert isinstance(state.value, str)


def test_operation_state_values_are_distinct() -> None:
    values = [state.value for state in OperationState]
    assert len(set(values)) == len(values)


@pytest.mark.parametrize("state", list(OperationState))
def test_final_is_true_exactly_for_completed_failed_cancelled(state: OperationState) -> None:
    assert state.final is (state in FINAL)


def test_async_result_can_be_built_positionally() -> None:
    error = ValueError("boom")
    result = AsyncResult(OperationState.FAILED, None, error)
    assert result.state is OperationState.FAILED
    assert result.value is None
    assert result.error is error


def test_async_result_positional_order_is_state_value_error() -> None:
    result = AsyncResult(OperationState.COMPLETED, 42, None)
    assert (result.state, result.value, result.error) == (OperationState.COMPLETED, 42, None)


@pytest.mark.parametrize("field", ["state", "value", "error"])
def test_assigning_to_an_async_result_field_raises_attribute_error(field: str) -> None:
    result = AsyncResult(OperationState.COMPLETED, 1, None)
    with pytest.raises(AttributeError):
        setattr(result, field, None)
    assert result.value == 1
    assert result.state is OperationState.COMPLETED


def test_completed_result_has_value_and_no_error(runtime: asyncop.Runtime) -> None:
    result = runtime.spawn(lambda: "done").wait(5)
    assert result.state is OperationState.COMPLETED
    assert result.value == "done"
    assert result.error is None


def test_failed_result_has_error_and_no_value(runtime: asyncop.Runtime) -> None:
    error = ValueError("boom")

    def fail() -> None:
        raise error

    result = runtime.spawn(fail).wait(5)
    assert result.state is OperationState.FAILED
    assert result.value is None
    assert result.error is error


def test_cancelled_result_has_neither_value_nor_error(runtime: asyncop.Runtime) -> None:
    op = runtime.create(lambda op, ctx: "never")
    op.cancel()
    result = op.wait(5)
    assert result.state is OperationState.CANCELLED
    assert result.value is None
    assert result.error is None


def test_wait_returns_an_async_result(runtime: asyncop.Runtime) -> None:
    result = runtime.spawn(lambda: 3).wait(5)
    assert isinstance(result, AsyncResult)
