"""The ``device`` variable of DRA selectors, built from a ResourceSlice device as Kubernetes builds it.

Checked against Kubernetes v1.37.2 (k8s.io/dynamic-resource-allocation/cel with consumable
capacity and list-typed attributes enabled).
"""

from __future__ import annotations

from typing import Any

import pytest

from operators.dra.cel import CelDevice, CelEvaluationError, PreparedDevice, compile_expression

DRIVER = "gpu.example.com"


def device(**fields: Any) -> CelDevice:
    return CelDevice.model_validate({"driver": DRIVER, **fields})


GPU = device(
    attributes={
        "model": {"string": "a100"},
        "uuid": {"string": "GPU-1234"},
        "index": {"int": 3},
        "healthy": {"bool": True},
        "driverVersion": {"version": "1.2.3-rc.1+build5"},
        "other.io/fw": {"version": "2.0.0"},
        "ints": {"ints": [1, 2, 3]},
        "names": {"strings": ["a", "b"]},
        "versions": {"versions": ["1.0.0", "2.0.0"]},
        "flags": {"bools": [True, False]},
    },
    capacity={"memory": {"value": "80Gi"}, "other.io/slices": {"value": "7"}, "milli": {"value": "1500m"}},
    allowMultipleAllocations=True,
)


def matches(expression: str, dev: CelDevice = GPU) -> bool:
    return compile_expression(expression).matches(dev)


def failure(expression: str, dev: CelDevice = GPU) -> str:
    with pytest.raises(CelEvaluationError) as caught:
        compile_expression(expression).matches(dev)
    assert caught.value.expression == expression
    return caught.value.detail


@pytest.mark.parametrize(
    "expression",
    [
        'device.driver == "gpu.example.com"',
        "device.allowMultipleAllocations",
        # An unqualified attribute name belongs to the driver's domain.
        'device.attributes["gpu.example.com"].model == "a100"',
        'device.attributes["gpu.example.com"]["model"] == "a100"',
        'device.attributes["gpu.example.com"].index == 3 && device.attributes["gpu.example.com"].index > 2.5',
        'device.attributes["gpu.example.com"].healthy',
        'device.attributes["other.io"].fw == semver("2.0.0")',
        'device.attributes["gpu.example.com"].driverVersion.isLessThan(semver("1.2.3"))',
        'device.attributes["gpu.example.com"].driverVersion == semver("1.2.3-rc.1")',
        'device.attributes["gpu.example.com"].driverVersion.major() == 1',
        # List-typed attributes (DRAListTypeAttributes).
        'device.attributes["gpu.example.com"].ints.includes(2)',
        'device.attributes["gpu.example.com"].model.includes("a100")',
        'device.attributes["gpu.example.com"].names.exists(n, n == "b")',
        'device.attributes["gpu.example.com"].versions.exists(v, v.isGreaterThan(semver("1.5.0")))',
        'device.attributes["gpu.example.com"].ints.sum() == 6',
        'device.attributes["gpu.example.com"].flags == [true, false]',
        # Capacity values are quantities.
        'device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("40Gi"))',
        'device.capacity["gpu.example.com"].memory.compareTo(quantity("80Gi")) == 0',
        'device.capacity["gpu.example.com"].memory.asInteger() == 85899345920',
        '!device.capacity["gpu.example.com"].milli.isInteger()',
        'device.capacity["other.io"].slices.asInteger() == 7',
        # A domain the device does not have reads as an empty map; only real keys are "in" the map.
        '!("nope.io" in device.attributes) && "gpu.example.com" in device.attributes',
        "has(device.attributes.anything)",
        'has(device.attributes["gpu.example.com"].model)',
        '!has(device.attributes["gpu.example.com"].nothing)',
        '"model" in device.attributes["gpu.example.com"]',
        "size(device.attributes) == 2",
        'device.attributes.exists(d, d == "other.io")',
        'cel.bind(g, device.attributes["gpu.example.com"], g.model == "a100" && g.index > 1)',
        # Short-circuit evaluation hides errors, in both operand orders.
        'device.attributes["gpu.example.com"].missing == "x" || true',
        '!(device.attributes["gpu.example.com"].missing == "x" && false)',
    ],
)
def test_device_variable(expression: str) -> None:
    assert matches(expression)


@pytest.mark.parametrize(
    ("expression", "detail"),
    [
        ('device.attributes["gpu.example.com"].missing == "x"', "no such key: missing"),
        ('device.attributes["nope.io"].missing == "x"', "no such key: missing"),
        ('device.capacity["gpu.example.com"].nope.isInteger()', "no such key: nope"),
        ('device.attributes["gpu.example.com"].ints[5] == 1', "index out of bounds: 5"),
        (
            'device.attributes["gpu.example.com"].index.foo == 1',
            "type 'int' does not support field selection",
        ),
        (
            'device.attributes["gpu.example.com"].model',
            "CEL result of type string could not be converted to bool",
        ),
        (
            'device.attributes["gpu.example.com"].index == "3"'
            ' || device.attributes["gpu.example.com"].model == 3',
            "",
        ),
    ],
)
def test_evaluation_errors(expression: str, detail: str) -> None:
    if detail:
        assert failure(expression) == detail
    else:
        # Comparing values of different types is false, not an error (heterogeneous equality).
        assert not matches(expression)


def test_defaults_of_a_bare_device() -> None:
    bare = device()
    assert matches("!device.allowMultipleAllocations && size(device.attributes) == 0", bare)
    assert failure('device.attributes["gpu.example.com"].model == "x"', bare) == "no such key: model"


def test_qualified_names_split_at_the_first_slash() -> None:
    odd = device(attributes={"a.io/b/c": {"int": 1}})
    assert matches('device.attributes["a.io"]["b/c"] == 1', odd)


def test_a_broken_attribute_fails_every_expression_on_that_device() -> None:
    broken = device(attributes={"version": {"version": "v1"}, "model": {"string": "a"}})
    detail = "attribute version: parse semantic version: No Major.Minor.Patch elements found"
    assert failure("device.driver == 'gpu.example.com'", broken) == detail
    empty = device(attributes={"model": {}})
    assert failure("true", empty) == "attribute model: unsupported attribute value"
    bad_capacity = device(capacity={"memory": {"value": "lots"}})
    assert failure("true", bad_capacity).startswith("capacity memory: quantities must match")


def test_a_prepared_device_serves_many_expressions() -> None:
    prepared = PreparedDevice(GPU)
    assert compile_expression('device.driver == "gpu.example.com"').matches(prepared)
    assert not compile_expression("device.attributes['gpu.example.com'].index > 5").matches(prepared)
    assert compile_expression("device.attributes['gpu.example.com'].model").evaluate(prepared) == "a100"


def test_capacity_may_be_given_as_a_json_number() -> None:
    assert matches(
        'device.capacity["gpu.example.com"].cores.asInteger() == 8', device(capacity={"cores": {"value": 8}})
    )
