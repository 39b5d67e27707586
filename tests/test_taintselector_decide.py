"""The plans taintselector's pure code returns for one pass (operators.taintselector.decide)."""

from __future__ import annotations

from typing import Any

from taintselector_builders import GPU_DRIVER, SELECTOR_UID, rule, selector

from operators.core.discovery import ServedResource
from operators.core.events import WARNING
from operators.core.plan import Apply, Create, Delete, Patch, Plan, RecordEvent, Together
from operators.core.reconcile import Done
from operators.dra.selection import REASON_CEL_RUNTIME_ERROR, Invalid, Selection
from operators.dra.unserved import DEVICE_TAINT_RULES_UNSERVED
from operators.taintselector.cache import ClusterCache
from operators.taintselector.decide import EVENT_INVALID, WRITE_CONCURRENCY, decide
from operators.taintselector.models import DeviceId, DeviceTaintRule, TaintSelector
from operators.taintselector.rules import desired_rules, rule_name

RULES_V1 = ServedResource("resource.k8s.io", "v1", "devicetaintrules", namespaced=False)
RULES = "/apis/resource.k8s.io/v1/devicetaintrules"
STATUS = "/apis/dra-operators.io/v1alpha1/devicetaintselectors/broken-gpu/status"
GPU0 = DeviceId(GPU_DRIVER, "node-1", "gpu-0")
GPU1 = DeviceId(GPU_DRIVER, "node-1", "gpu-1")
TWO = Selection(devices=(GPU0, GPU1))
BROKEN = Invalid(REASON_CEL_RUNTIME_ERROR, "CEL expression 'x' failed on device a/b/c: no such key: uuid.")


def cache_of(*rules: DeviceTaintRule) -> ClusterCache:
    cache = ClusterCache()
    cache.rules = {r.metadata.name: r for r in rules}
    return cache


def with_uid(existing: DeviceTaintRule, uid: str) -> DeviceTaintRule:
    return existing.model_copy(update={"metadata": existing.metadata.model_copy(update={"uid": uid})})


def ready(plan: Plan) -> tuple[str, str]:
    [status] = [step for step in plan.steps if isinstance(step, Apply)]
    [condition] = [c for c in status.body["status"]["conditions"] if c["type"] == "Ready"]
    return condition["status"], condition["reason"]


def written_status(plan: Plan) -> dict[str, Any]:
    """A selector's status as the plan's status step writes it."""
    [status] = [step for step in plan.steps if isinstance(step, Apply)]
    return dict(status.body["status"])


def test_a_new_selection_creates_its_rules_together_then_applies_the_status() -> None:
    spec = selector(driver=GPU_DRIVER)
    plan = decide(spec, TWO, cache_of(), RULES_V1)
    desired = desired_rules(spec, TWO.devices, "resource.k8s.io/v1")
    assert plan.result == Done()
    rules, status = plan.steps
    assert rules == Together(
        tuple(Create(RULES, desired[name]) for name in sorted(desired)), WRITE_CONCURRENCY
    )
    assert status == Apply(
        STATUS,
        {
            "apiVersion": "dra-operators.io/v1alpha1",
            "kind": "DeviceTaintSelector",
            "metadata": {"name": "broken-gpu", "uid": SELECTOR_UID},
            "status": written_status(plan),
        },
        uid=SELECTOR_UID,
    )
    assert ready(plan) == ("True", "RulesInPlace"), "as if every planned write succeeds"
    assert written_status(plan)["selectedDevices"] == 2


def test_drifted_rules_are_patched_and_unselected_ones_deleted_by_uid() -> None:
    spec = selector(driver=GPU_DRIVER)
    labels = {"app.kubernetes.io/managed-by": "dra-operators-taintselector"}
    labels["dra-operators.io/taint-selector-uid"] = SELECTOR_UID
    kept = with_uid(rule(rule_name("broken-gpu", GPU0), labels=labels, effect="NoSchedule"), "uid-kept")
    gone = with_uid(rule("broken-gpu-old", device="gpu-9", labels=labels), "uid-old")
    plan = decide(spec, Selection(devices=(GPU0,)), cache_of(kept, gone), RULES_V1)
    [rules, _status] = plan.steps
    assert isinstance(rules, Together)
    [patch, delete] = rules.writes
    assert isinstance(patch, Patch)
    assert patch.path == f"{RULES}/{kept.metadata.name}"
    assert patch.body["spec"]["taint"]["effect"] == "NoExecute"
    assert (patch.uid, patch.body["metadata"]["uid"]) == ("uid-kept", "uid-kept"), "the rule read"
    assert delete == Delete(f"{RULES}/broken-gpu-old", "uid-old")


def test_a_rule_name_another_owner_controls_is_left_alone_and_reported() -> None:
    spec = selector(driver=GPU_DRIVER)
    foreign = rule(rule_name("broken-gpu", GPU0), owner_uid="someone-else")
    plan = decide(spec, Selection(devices=(GPU0,)), cache_of(foreign), RULES_V1)
    [status] = plan.steps
    assert isinstance(status, Apply)
    assert ready(plan) == ("False", "RuleConflict")


def test_an_invalid_selector_writes_no_rule_and_warns_once_per_reason_and_generation() -> None:
    spec = selector(driver=GPU_DRIVER)
    plan = decide(spec, BROKEN, cache_of(), RULES_V1)
    event, _status = plan.steps
    assert isinstance(event, RecordEvent)
    assert (event.ref.kind, event.ref.name, event.ref.uid) == (
        "DeviceTaintSelector",
        "broken-gpu",
        SELECTOR_UID,
    )
    assert (event.type, event.reason, event.message) == (WARNING, EVENT_INVALID, BROKEN.message)
    assert ready(plan) == ("False", "Invalid")

    reported = selector(driver=GPU_DRIVER, status=written_status(plan))
    assert decide(reported, BROKEN, cache_of(), RULES_V1) == Plan(), "already said: no Event, no status"
    next_generation = selector(driver=GPU_DRIVER, generation=2, status=written_status(plan))
    assert isinstance(decide(next_generation, BROKEN, cache_of(), RULES_V1).steps[0], RecordEvent)


def test_without_a_rule_api_the_selection_is_only_reported() -> None:
    plan = decide(selector(driver=GPU_DRIVER), TWO, cache_of(), None)
    [status] = plan.steps
    assert isinstance(status, Apply)
    assert ready(plan) == ("False", "DeviceTaintRuleUnavailable")
    [condition] = [c for c in written_status(plan)["conditions"] if c["type"] == "Ready"]
    assert DEVICE_TAINT_RULES_UNSERVED in condition["message"]


def test_a_pass_with_nothing_new_plans_nothing() -> None:
    spec = selector(driver=GPU_DRIVER)
    first = decide(spec, Selection(devices=()), cache_of(), RULES_V1)
    settled: TaintSelector = selector(driver=GPU_DRIVER, status=written_status(first))
    assert decide(settled, Selection(devices=()), cache_of(), RULES_V1) == Plan()


def test_effect_none_writes_its_dry_run_into_the_status() -> None:
    plan = decide(selector(driver=GPU_DRIVER, effect="None"), TWO, cache_of(), RULES_V1)
    status = written_status(plan)
    assert "dryRun" in status
    [eviction] = [c for c in status["conditions"] if c["type"] == "EvictionInProgress"]
    assert eviction["reason"] == "NoEffect"
