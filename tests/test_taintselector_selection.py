"""Which devices a DeviceTaintSelector selects, following the seed's ways of choosing devices.

The DRA documentation lets an administrator taint "the devices selected by a DeviceClass", all
devices of a driver, of a pool, one device by name, or one physical instance behind a stable name
through CEL on a vendor's unique-ID attribute. Each is a case here, with the failure modes that
must give an Invalid verdict instead of a wrong set of taints.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Sequence

import pytest
from taintselector_builders import GPU_DRIVER, NIC_DRIVER, dev, device_class, resource_slice, selector

from operators.dra import selection
from operators.dra.cel.program import COST_MESSAGE, MAX_EXPRESSION_LENGTH
from operators.dra.selection import (
    LISTED_PROBLEMS,
    QUOTED_LENGTH,
    REASON_CEL_RUNTIME_ERROR,
    REASON_INVALID_CEL,
    REASON_INVALID_DEVICE_CLASS,
    REASON_UNKNOWN_DEVICE_CLASS,
    Invalid,
    Selection,
    quoted,
)
from operators.taintselector.models import ResourceSlice, TaintSelector
from operators.taintselector.selection import REASON_INVALID_TAINT, evaluate

UUID = f'device.attributes["{GPU_DRIVER}"].uuid == "GPU-1234"'

NODE_1 = resource_slice(
    "node-1-gpus",
    dev("gpu-0", {"uuid": "GPU-1234", "model": "a100", "memoryGiB": 80}),
    dev("gpu-1", {"uuid": "GPU-5678", "model": "a100", "memoryGiB": 80}),
)
NODE_2 = resource_slice(
    "node-2-gpus",
    dev("gpu-0", {"uuid": "GPU-9999", "model": "h100", "memoryGiB": 94}),
    pool="node-2",
)
NICS = resource_slice("node-1-nics", dev("nic-0", {"speedGbps": 100}), driver=NIC_DRIVER)
SLICES = [NODE_1, NODE_2, NICS]
CLASSES = {
    "gpu.example.com": device_class("gpu.example.com", f'device.driver == "{GPU_DRIVER}"'),
    "big-gpu": device_class(
        "big-gpu",
        f'device.driver == "{GPU_DRIVER}"',
        f'device.attributes["{GPU_DRIVER}"].memoryGiB > 90',
    ),
    "everything": device_class("everything"),
}


def selected(spec_selector: TaintSelector, slices: Sequence[ResourceSlice] = SLICES) -> tuple[str, ...]:
    outcome = evaluate(spec_selector.spec, slices, CLASSES)
    assert isinstance(outcome, Selection), outcome
    return tuple(str(device) for device in outcome.devices)


def invalid(spec_selector: TaintSelector, slices: Sequence[ResourceSlice] = SLICES) -> Invalid:
    outcome = evaluate(spec_selector.spec, slices, CLASSES)
    assert isinstance(outcome, Invalid), outcome
    return outcome


def test_by_driver_pool_and_device() -> None:
    assert selected(selector(driver=GPU_DRIVER)) == (
        "gpu.example.com/node-1/gpu-0",
        "gpu.example.com/node-1/gpu-1",
        "gpu.example.com/node-2/gpu-0",
    )
    assert selected(selector(pool="node-1")) == (
        "gpu.example.com/node-1/gpu-0",
        "gpu.example.com/node-1/gpu-1",
        "nic.example.com/node-1/nic-0",
    )
    assert selected(selector(device="gpu-0")) == (
        "gpu.example.com/node-1/gpu-0",
        "gpu.example.com/node-2/gpu-0",
    )
    assert selected(selector(driver=GPU_DRIVER, pool="node-2", device="gpu-0")) == (
        "gpu.example.com/node-2/gpu-0",
    )
    assert selected(selector(driver="absent.example.com")) == ()


def test_by_device_class_applies_the_class_selectors() -> None:
    assert selected(selector(deviceClassName="big-gpu")) == ("gpu.example.com/node-2/gpu-0",)
    assert len(selected(selector(deviceClassName="gpu.example.com"))) == 3
    # A class without selectors selects every device, like an unrestricted DeviceClass.
    assert len(selected(selector(deviceClassName="everything"))) == 4
    # Criteria combine: the class and the pool must both match.
    assert selected(selector(deviceClassName="gpu.example.com", pool="node-1")) == (
        "gpu.example.com/node-1/gpu-0",
        "gpu.example.com/node-1/gpu-1",
    )


def test_unique_id_follows_the_physical_device_behind_a_stable_name() -> None:
    spec = selector(UUID, driver=GPU_DRIVER)
    assert selected(spec) == ("gpu.example.com/node-1/gpu-0",)
    # The driver republishes the pool: the broken card now sits behind the name gpu-1.
    republished = resource_slice(
        "node-1-gpus-gen2",
        dev("gpu-0", {"uuid": "GPU-5678", "model": "a100", "memoryGiB": 80}),
        dev("gpu-1", {"uuid": "GPU-1234", "model": "a100", "memoryGiB": 80}),
        generation=2,
    )
    assert selected(spec, [NODE_1, republished, NODE_2, NICS]) == ("gpu.example.com/node-1/gpu-1",)
    # The card is removed from the node: nothing is selected any more.
    without = resource_slice("node-1-gpus-gen3", dev("gpu-0", {"uuid": "GPU-5678"}), generation=3)
    assert selected(spec, [NODE_1, republished, without, NODE_2, NICS]) == ()


def test_a_device_listed_twice_comes_from_the_first_slice_by_name() -> None:
    first = resource_slice("a", dev("gpu-0", {"uuid": "first"}))
    second = resource_slice("b", dev("gpu-0", {"uuid": "second"}))
    for order in ([first, second], [second, first]):
        spec = selector(f'device.attributes["{GPU_DRIVER}"].uuid == "first"', driver=GPU_DRIVER)
        assert selected(spec, order) == ("gpu.example.com/node-1/gpu-0",)


def test_several_expressions_must_all_match() -> None:
    spec = selector(
        f'device.attributes["{GPU_DRIVER}"].model == "a100"',
        f'device.attributes["{GPU_DRIVER}"].memoryGiB >= 80',
        'device.attributes["gpu.example.com"].uuid.endsWith("78")',
        driver=GPU_DRIVER,
    )
    assert selected(spec) == ("gpu.example.com/node-1/gpu-1",)


def test_an_empty_selector_selects_nothing_unless_all_devices() -> None:
    outcome = evaluate(selector().spec, SLICES, CLASSES)
    assert outcome == Selection(devices=(), empty_selector=True)
    assert len(selected(selector(allDevices=True))) == 4
    # allDevices adds nothing to real criteria (admission refuses the combination anyway).
    assert selected(selector(allDevices=True, driver=NIC_DRIVER)) == ("nic.example.com/node-1/nic-0",)


@pytest.mark.parametrize(
    ("expressions", "message"),
    [
        (
            ("device.attributes[",),
            "CEL expression 'device.attributes[' is invalid: syntax error at line 1, column 18 near '['.",
        ),
        (
            ("device.nope == 1", "uuid(device) == 1"),
            "CEL expression 'device.nope == 1' is invalid: compilation failed: undefined field 'nope'; "
            "CEL expression 'uuid(device) == 1' is invalid: "
            "compilation failed: undeclared reference to 'uuid'.",
        ),
        (
            ("device.driver",),
            "CEL expression 'device.driver' is invalid: compilation failed: "
            "must evaluate to bool or the unknown type, not string.",
        ),
    ],
)
def test_bad_cel_is_invalid_with_expression_and_error(expressions: tuple[str, ...], message: str) -> None:
    verdict = invalid(selector(*expressions, driver=GPU_DRIVER))
    assert verdict == Invalid(REASON_INVALID_CEL, message)


def test_missing_attribute_is_a_runtime_error_naming_device_and_expression() -> None:
    # Without the driver criterion the vendor expression reaches the NIC, which lacks the attribute.
    verdict = invalid(selector(UUID))
    assert verdict.reason == REASON_CEL_RUNTIME_ERROR
    assert verdict.message == (
        f"CEL expression {UUID!r} failed on device nic.example.com/node-1/nic-0: no such key: uuid."
    )
    # Guarding in CEL works as well as naming the driver.
    guarded = f'device.driver == "{GPU_DRIVER}" && {UUID}'
    assert selected(selector(guarded)) == ("gpu.example.com/node-1/gpu-0",)


def test_non_bool_result_at_runtime_is_invalid() -> None:
    verdict = invalid(selector(f'device.attributes["{GPU_DRIVER}"].model', driver=GPU_DRIVER))
    assert verdict.reason == REASON_CEL_RUNTIME_ERROR
    assert "CEL result of type string could not be converted to bool" in verdict.message


def test_device_class_problems() -> None:
    assert invalid(selector(deviceClassName="missing")) == Invalid(
        REASON_UNKNOWN_DEVICE_CLASS, "DeviceClass 'missing' does not exist."
    )
    classes = {"odd": device_class("odd", "device.attributes['x'].y.nosuchfunction()")}
    outcome = evaluate(selector(deviceClassName="odd").spec, SLICES, classes)
    assert isinstance(outcome, Invalid)
    assert outcome.reason == REASON_INVALID_DEVICE_CLASS
    assert outcome.message.startswith(
        "DeviceClass 'odd' selector \"device.attributes['x'].y.nosuchfunction()\""
    )
    assert "undeclared reference to 'nosuchfunction'" in outcome.message
    failing = {"vendor": device_class("vendor", f'device.attributes["{GPU_DRIVER}"].model == "a100"')}
    outcome = evaluate(selector(deviceClassName="vendor").spec, SLICES, failing)
    assert isinstance(outcome, Invalid)
    assert outcome.reason == REASON_CEL_RUNTIME_ERROR
    assert outcome.message.startswith("DeviceClass 'vendor' selector")
    assert "failed on device nic.example.com/node-1/nic-0: no such key: model." in outcome.message


def test_the_class_is_evaluated_before_the_own_expressions() -> None:
    # The class keeps the vendor expression away from the NIC, so no error occurs.
    spec = selector(UUID, deviceClassName="gpu.example.com")
    assert selected(spec) == ("gpu.example.com/node-1/gpu-0",)


def test_a_bad_taint_is_invalid() -> None:
    verdict = invalid(selector(driver=GPU_DRIVER, effect="PreferNoSchedule"))
    assert verdict == Invalid(
        REASON_INVALID_TAINT, "The taint effect 'PreferNoSchedule' is not one of None, NoSchedule, NoExecute."
    )


def test_no_slices_no_devices() -> None:
    assert selected(selector(UUID, driver=GPU_DRIVER), []) == ()


def _long(expression: str, length: int = MAX_EXPRESSION_LENGTH) -> str:
    """``expression`` padded with spaces to ``length`` characters, a valid CEL text still."""
    return expression + " " * (length - len(expression))


def test_many_long_invalid_expressions_fit_one_condition_message() -> None:
    # The selector's limits: 32 expressions of 10 KiB each, every one failing to compile.
    expressions = [_long(f"device.nope{i} == 1") for i in range(32)]
    verdict = invalid(selector(*expressions, driver=GPU_DRIVER))
    assert verdict.reason == REASON_INVALID_CEL
    assert len(verdict.message) < 32768 // 4, len(verdict.message)
    assert verdict.message.startswith(
        f"CEL expression {'device.nope0 == 1' + ' ' * (QUOTED_LENGTH - 17)!r}... "
        f"({MAX_EXPRESSION_LENGTH} characters) is invalid: compilation failed: undefined field 'nope0'; "
    )
    assert verdict.message.endswith(f"; {32 - LISTED_PROBLEMS} more are invalid too.")


def test_an_expression_over_the_cost_limit_is_a_runtime_error_naming_the_limit() -> None:
    # About 9 KiB: kube-apiserver admits it (its cost estimate is under upstream's limit), and
    # evaluated to the end it would take about a minute per device here.
    inner = "[" + ",".join(str(i % 10) for i in range(4500)) + "]"
    outer = "[" + ",".join(str(i) for i in range(10)) + "]"
    expression = f"{outer}.all(x, {inner}.all(y, x + y >= 0))"
    verdict = invalid(selector(expression, driver=GPU_DRIVER))
    assert verdict.reason == REASON_CEL_RUNTIME_ERROR
    assert verdict.message == (
        f"CEL expression {quoted(expression)} failed on device gpu.example.com/node-1/gpu-0: {COST_MESSAGE}."
    )
    assert f"... ({len(expression)} characters)" in verdict.message


def test_a_selection_stops_at_its_total_cost_with_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cheap per device, but over very many devices: the selection as a whole is bounded."""
    monkeypatch.setattr(selection, "SELECTION_COST_LIMIT", 30)
    verdict = invalid(selector(f'device.driver == "{GPU_DRIVER}"', driver=GPU_DRIVER))
    assert verdict.reason == REASON_CEL_RUNTIME_ERROR
    assert (
        "total cost limit exceeded (more than 30 evaluation steps for all devices together)"
        in verdict.message
    )
    assert verdict.message.endswith(f"; {selection.NARROW_HINT}.")
    monkeypatch.setattr(selection, "SELECTION_COST_LIMIT", 10_000)
    assert len(selected(selector(f'device.driver == "{GPU_DRIVER}"', driver=GPU_DRIVER))) == 3


def test_a_selection_holds_one_pool_at_a_time() -> None:
    """Over 200 slices of 128 devices, a selection of another pool allocates next to nothing, and
    one of the big pool holds that pool's index, not one of every device besides."""
    big = [
        resource_slice(f"big-{s:03d}", *(dev(f"d-{s:03d}-{d:03d}") for d in range(128)), pool="big")
        for s in range(200)
    ]
    small = resource_slice("small", dev("only"), pool="small")
    slices = [*big, small]

    def peak_of(chosen: TaintSelector) -> tuple[int, int]:
        tracemalloc.start()
        try:
            outcome = evaluate(chosen.spec, slices, CLASSES)
            assert isinstance(outcome, Selection), outcome
            return len(outcome.devices), tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    count, peak = peak_of(selector(driver=GPU_DRIVER, pool="small"))
    assert count == 1
    assert peak < 1024 * 1024, f"{peak} bytes to select one device of a small pool"
    count, whole = peak_of(selector(driver=GPU_DRIVER, pool="big", device="d-199-127"))
    assert count == 1
    # An index of every device took 9.5 MB, whichever pool was selected.
    assert whole < 4 * 1024 * 1024, f"{whole} bytes to select one device of 25 600"
