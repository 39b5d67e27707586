"""The cost bound of one CEL evaluation: what upstream's runtime cost limit is for kube-scheduler.

kube-apiserver admits a selector whose *estimated* cost stays under 1,000,000 cel-go units; an
expression of a few hundred characters iterating over literal lists does. This interpreter is far
slower per step than cel-go, so without a bound such a selector would hold a worker for minutes
per device. Each evaluation gets its own budget, shared by the macros nested in it.
"""

from __future__ import annotations

import time

import pytest

from operators.dra.cel import CelDevice, CelEvaluationError, CostBudget, compile_expression
from operators.dra.cel.program import COST_LIMIT, COST_MESSAGE, MAX_EXPRESSION_LENGTH


def _nested(size: int) -> str:
    items = "[" + ",".join(str(i % 10) for i in range(size)) + "]"
    return f"{items}.all(x, {items}.all(y, x + y >= 0))"


def test_an_expensive_admitted_selector_is_stopped_with_the_cost_message() -> None:
    # 150 x 150 iterations: about 100 000 cel-go units, under upstream's admission estimate limit.
    expression = _nested(150)
    compiled = compile_expression(expression)
    started = time.monotonic()
    with pytest.raises(CelEvaluationError) as caught:
        compiled.matches(CelDevice(driver="gpu.example.com"))
    assert caught.value.detail == COST_MESSAGE
    assert "actual cost limit exceeded" in COST_MESSAGE
    assert str(COST_LIMIT) in COST_MESSAGE
    # Generous for a loaded 2-core machine; unbounded, this expression takes about a minute.
    assert time.monotonic() - started < 10


def test_the_budget_is_per_evaluation_and_cheap_selectors_are_far_below_it() -> None:
    cheap = compile_expression(_nested(20))
    for _ in range(3):
        assert cheap.matches(CelDevice(driver="gpu.example.com"))
    expensive = compile_expression(_nested(150))
    for _ in range(2):
        with pytest.raises(CelEvaluationError, match="cost limit"):
            expensive.evaluate()
    # A failed evaluation leaves nothing behind for the next one.
    assert cheap.matches(CelDevice(driver="gpu.example.com"))


def test_a_long_flat_selector_fits_the_budget() -> None:
    """A selector at the length limit that compares attributes, as a DeviceClass listing many
    models would, evaluates in full."""
    clause = "device.attributes['gpu.example.com'].model == 'model-{:04d}'"
    clauses: list[str] = []
    while len(" || ".join([*clauses, clause.format(len(clauses))])) <= MAX_EXPRESSION_LENGTH:
        clauses.append(clause.format(len(clauses)))
    compiled = compile_expression(" || ".join(clauses))
    device = CelDevice(
        driver="gpu.example.com", attributes={"gpu.example.com/model": {"string": "model-none"}}
    )
    assert compiled.matches(device) is False


def test_growing_strings_run_out_of_budget_before_memory() -> None:
    """Each concatenation doubles the string; 40 of them would ask for terabytes."""
    body = "a39.size() > 0"
    for level in range(39, 0, -1):
        body = f"cel.bind(a{level}, a{level - 1} + a{level - 1}, {body})"
    expression = f"cel.bind(a0, 'abcdefgh', {body})"
    with pytest.raises(CelEvaluationError) as caught:
        compile_expression(expression).evaluate()
    assert caught.value.detail == COST_MESSAGE


def test_a_total_budget_bounds_a_series_of_cheap_evaluations() -> None:
    cheap = compile_expression("device.driver == 'gpu.example.com'")
    device = CelDevice(driver="gpu.example.com")
    total = CostBudget(200)
    spent: list[int] = []

    def until_exhausted() -> None:
        for _ in range(1000):
            assert cheap.matches(device, total)
            spent.append(total.remaining)

    with pytest.raises(CelEvaluationError) as caught:
        until_exhausted()
    assert caught.value.detail == total.message
    assert "total cost limit exceeded (more than 200 evaluation steps" in total.message
    assert 0 < len(spent) < 200, "each evaluation takes its steps out of the total"
    assert total.remaining == 0
    # Without a total, the same evaluation is bounded by its own limit only.
    assert cheap.matches(device)


def test_the_own_limit_reads_as_such_while_the_total_has_room() -> None:
    total = CostBudget(10 * COST_LIMIT)
    with pytest.raises(CelEvaluationError) as caught:
        compile_expression(_nested(150)).evaluate(None, total)
    assert caught.value.detail == COST_MESSAGE
    assert total.remaining == 9 * COST_LIMIT
