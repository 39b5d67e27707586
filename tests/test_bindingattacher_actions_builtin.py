from __future__ import annotations

import json
from datetime import timedelta

import pytest
from bindingattacher_builders import T0, attach_request, refused_action

from operators.bindingattacher.actions.base import ActionConfigError, Operation, Outcome
from operators.bindingattacher.actions.calls import invoke
from operators.bindingattacher.actions.factory import BuildContext, NoopAction, build_action
from operators.bindingattacher.actions.testaction import TestAction, TestParameters
from operators.bindingattacher.models import ActionSpec

FAIL = {"test.dra-operators.io/attach-outcome": "Fail"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_noop_reports_success() -> None:
    noop = NoopAction()
    outcome = await invoke(noop, Operation.ATTACH, attach_request(), 1)
    assert (outcome.result.outcome, outcome.result.data) == (Outcome.SUCCEEDED, {"action": "noop"})
    assert (await invoke(noop, Operation.DETACH, attach_request(), 1)).result.outcome is Outcome.SUCCEEDED
    slow = await invoke(NoopAction(delay_seconds=5), Operation.ATTACH, attach_request(), 0.05)
    assert slow.timed_out


async def test_test_action_succeeds_idempotently_and_mirrors_its_inventory() -> None:
    mirrored: list[dict[str, str]] = []
    action = TestAction(TestParameters(attach_delay=0.01), listener=mirrored.append)
    request = attach_request()
    first = await invoke(action, Operation.ATTACH, request, 5)
    second = await invoke(action, Operation.ATTACH, request, 5)
    assert first.result.outcome is second.result.outcome is Outcome.SUCCEEDED
    entry = json.loads(action.inventory_data()[request.attachment_key])
    assert entry["state"] == "attached"
    assert entry["attachCalls"] == 2
    assert entry["node"] == "node-a"
    assert entry["device"] == "fabric.attach-test.dra-operators.io/fabric-pool/f0"
    assert entry["lastCall"].startswith("attach ")
    # The call was mirrored before the delay, so a crash mid-call still shows it.
    assert json.loads(mirrored[0][request.attachment_key])["attachCalls"] == 1
    assert json.loads(mirrored[0][request.attachment_key])["state"] == "detached"
    await invoke(action, Operation.DETACH, request, 5)
    after = json.loads(action.inventory_data()[request.attachment_key])
    assert (after["state"], after["detachCalls"]) == ("detached", 1)
    assert action.calls[("attach", "Succeeded")] == 2
    restored = TestAction()
    restored.load(action.inventory_data())
    assert restored.inventory_data() == action.inventory_data()


async def test_fail_transient_and_annotation_overrides() -> None:
    action = TestAction()
    failed = await invoke(action, Operation.ATTACH, attach_request(annotations=FAIL), 5)
    assert failed.result.outcome is Outcome.PERMANENT_ERROR
    transient = TestAction(TestParameters(attach_outcome="Transient"))
    assert (
        await invoke(transient, Operation.ATTACH, attach_request(), 5)
    ).result.outcome is Outcome.TRANSIENT_ERROR
    ignored = attach_request(annotations={"test.dra-operators.io/attach-outcome": "Explode"})
    assert (await invoke(action, Operation.ATTACH, ignored, 5)).result.outcome is Outcome.SUCCEEDED


async def test_fail_first_then_succeed() -> None:
    action = TestAction(TestParameters(fail_first=2))
    request = attach_request()
    outcomes = [(await invoke(action, Operation.ATTACH, request, 5)).result.outcome for _ in range(3)]
    assert outcomes == [Outcome.TRANSIENT_ERROR, Outcome.TRANSIENT_ERROR, Outcome.SUCCEEDED]


async def test_fail_allocations_fails_the_first_allocation_only() -> None:
    action = TestAction()
    annotations = {"test.dra-operators.io/fail-allocations": "1"}
    first = attach_request(annotations=annotations)
    again = attach_request(annotations=annotations)
    second = attach_request(annotations=annotations, timestamp=T0 + timedelta(seconds=40))
    assert (await invoke(action, Operation.ATTACH, first, 5)).result.outcome is Outcome.PERMANENT_ERROR
    assert (await invoke(action, Operation.ATTACH, again, 5)).result.outcome is Outcome.PERMANENT_ERROR
    assert (await invoke(action, Operation.ATTACH, second, 5)).result.outcome is Outcome.SUCCEEDED
    assert first.attachment_key != second.attachment_key


async def test_in_progress_until_the_delay_has_passed() -> None:
    clock = Clock()
    action = TestAction(TestParameters(attach_outcome="InProgress", attach_delay=4), clock=clock)
    request = attach_request()
    pending = await invoke(action, Operation.ATTACH, request, 5)
    assert (pending.result.outcome, pending.result.retry_after_seconds) == (Outcome.IN_PROGRESS, 1.0)
    clock.now += 4
    assert (await invoke(action, Operation.ATTACH, request, 5)).result.outcome is Outcome.SUCCEEDED


async def test_hang_never_answers() -> None:
    action = TestAction(TestParameters(attach_outcome="Hang"))
    outcome = await invoke(action, Operation.ATTACH, attach_request(), 0.05)
    assert outcome.timed_out


async def test_detach_outcomes() -> None:
    request = attach_request()
    failing = TestAction(TestParameters(detach_outcome="Fail"))
    assert (await invoke(failing, Operation.DETACH, request, 5)).result.outcome is Outcome.PERMANENT_ERROR
    flaky = attach_request(annotations={"test.dra-operators.io/detach-outcome": "Transient"})
    assert (await invoke(TestAction(), Operation.DETACH, flaky, 5)).result.outcome is Outcome.TRANSIENT_ERROR


async def test_test_action_needs_the_flag() -> None:
    spec = ActionSpec.model_validate(
        {"kind": "Test", "test": {"attachDelay": "2s", "inventoryConfigMap": "inv"}}
    )
    error = await refused_action(spec, BuildContext(policy_name="fabric"))
    assert error.reason == "TestActionDisabled"
    built = await build_action(spec, BuildContext(policy_name="fabric", test_actions_enabled=True))
    assert isinstance(built.action, TestAction)
    assert built.action.params.attach_delay == 2.0
    bad = ActionSpec.model_validate({"kind": "Test", "test": {"attachOutcome": "Maybe"}})
    with pytest.raises(ActionConfigError, match="attachOutcome"):
        await build_action(bad, BuildContext(policy_name="fabric", test_actions_enabled=True))
    noop = await build_action(ActionSpec.model_validate({"kind": "Noop"}), BuildContext(policy_name="fabric"))
    assert noop.description == "no-op action: devices are reported ready without any attachment"
