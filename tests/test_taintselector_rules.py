"""The built-in DeviceTaintRules of a selector: names, bodies, the diff, and EvictionInProgress."""

from __future__ import annotations

import re

from taintselector_builders import GPU_DRIVER, SELECTOR_UID, rule, selector

from operators.core.conditions import FALSE, TRUE, UNKNOWN
from operators.core.names import is_dns_subdomain
from operators.taintselector.models import DeviceId
from operators.taintselector.rules import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    SELECTOR_UID_LABEL,
    RuleDiff,
    RuleUpdate,
    desired_rules,
    diff_rules,
    eviction_condition,
    rule_name,
)

API = "resource.k8s.io/v1"
GPU0 = DeviceId(GPU_DRIVER, "node-1", "gpu-0")
GPU1 = DeviceId(GPU_DRIVER, "node-1", "gpu-1")
LABELS = {MANAGED_BY_LABEL: MANAGED_BY, SELECTOR_UID_LABEL: SELECTOR_UID}


def test_rule_names_are_stable_distinct_and_valid() -> None:
    name = rule_name("broken-gpu", GPU0)
    assert name == rule_name("broken-gpu", GPU0)
    assert re.fullmatch(r"broken-gpu-[0-9a-f]{12}", name)
    assert name != rule_name("broken-gpu", GPU1)
    assert name != rule_name("other", GPU0)
    # Separators cannot make two devices collide.
    assert rule_name("s", DeviceId("a", "b/c", "d")) != rule_name("s", DeviceId("a/b", "c", "d"))
    long = rule_name("x" * 250 + ".-y", GPU0)
    assert len(long) <= 253
    assert is_dns_subdomain(long)
    assert is_dns_subdomain(rule_name("a" * 240 + ".b", GPU0))


def test_desired_rule_bodies() -> None:
    rules = desired_rules(selector(driver=GPU_DRIVER), [GPU0], API)
    name = rule_name("broken-gpu", GPU0)
    assert rules == {
        name: {
            "apiVersion": API,
            "kind": "DeviceTaintRule",
            "metadata": {
                "name": name,
                "labels": LABELS,
                "annotations": {"dra-operators.io/taint-selector": "broken-gpu"},
                "ownerReferences": [
                    {
                        "apiVersion": "dra-operators.io/v1alpha1",
                        "kind": "DeviceTaintSelector",
                        "name": "broken-gpu",
                        "uid": SELECTOR_UID,
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "deviceSelector": {"driver": GPU_DRIVER, "pool": "node-1", "device": "gpu-0"},
                "taint": {"key": "dra.example.com/unhealthy", "value": "Broken", "effect": "NoExecute"},
            },
        }
    }
    # An empty value is left out, as the API itself would omit it.
    bare = desired_rules(selector(driver=GPU_DRIVER, value=""), [GPU0], "resource.k8s.io/v1beta2")
    assert bare[name]["spec"]["taint"] == {"key": "dra.example.com/unhealthy", "effect": "NoExecute"}
    assert bare[name]["apiVersion"] == "resource.k8s.io/v1beta2"


def test_diff_creates_missing_and_deletes_unwanted_rules() -> None:
    desired = desired_rules(selector(driver=GPU_DRIVER), [GPU0, GPU1], API)
    stale = rule("broken-gpu-stale", device="gpu-9", labels=LABELS)
    present = rule(rule_name("broken-gpu", GPU0), labels=LABELS)
    diff = diff_rules(SELECTOR_UID, desired, [present, stale])
    assert [body["metadata"]["name"] for body in diff.create] == [rule_name("broken-gpu", GPU1)]
    assert diff.update == ()
    assert diff.delete == ("broken-gpu-stale",)
    assert diff.conflicts == ()
    assert not diff.in_sync


def test_diff_is_empty_when_everything_is_in_place() -> None:
    desired = desired_rules(selector(driver=GPU_DRIVER), [GPU0], API)
    existing = [rule(rule_name("broken-gpu", GPU0), labels=LABELS)]
    assert diff_rules(SELECTOR_UID, desired, existing) == RuleDiff()
    assert diff_rules(SELECTOR_UID, desired, existing).in_sync


def test_diff_updates_a_changed_taint_in_place() -> None:
    # The dry run of the seed: effect None first, then NoExecute, keeping the same rules.
    desired = desired_rules(selector(driver=GPU_DRIVER, effect="NoExecute", value=""), [GPU0], API)
    name = rule_name("broken-gpu", GPU0)
    diff = diff_rules(SELECTOR_UID, desired, [rule(name, effect="None", labels=LABELS)])
    assert diff.create == ()
    assert diff.delete == ()
    assert diff.update == (
        RuleUpdate(
            name,
            {"spec": {"taint": {"key": "dra.example.com/unhealthy", "effect": "NoExecute", "value": None}}},
        ),
    )


def test_diff_restores_a_tampered_selector_and_labels() -> None:
    desired = desired_rules(selector(driver=GPU_DRIVER), [GPU0], API)
    name = rule_name("broken-gpu", GPU0)
    tampered = rule(name, device="gpu-7", labels={})
    (update,) = diff_rules(SELECTOR_UID, desired, [tampered]).update
    assert update.patch == {
        "metadata": {"labels": LABELS},
        "spec": {"deviceSelector": {"driver": GPU_DRIVER, "pool": "node-1", "device": "gpu-0"}},
    }


def test_rules_of_another_owner_are_never_touched() -> None:
    desired = desired_rules(selector(driver=GPU_DRIVER), [GPU0], API)
    name = rule_name("broken-gpu", GPU0)
    # Same name, other owner: typically the rules of a deleted selector of the same name.
    foreign = rule(name, owner_uid="someone-else")
    unowned = rule("hand-made", owner_uid=None)
    diff = diff_rules(SELECTOR_UID, desired, [foreign, unowned])
    assert diff == RuleDiff(conflicts=(name,))


def test_rules_being_deleted_are_waited_for() -> None:
    desired = desired_rules(selector(driver=GPU_DRIVER), [GPU0], API)
    name = rule_name("broken-gpu", GPU0)
    diff = diff_rules(SELECTOR_UID, desired, [rule(name, deleting=True), rule("old", deleting=True)])
    assert diff == RuleDiff(conflicts=(name,))


def test_an_invalid_or_empty_selection_deletes_nothing_it_does_not_own() -> None:
    diff = diff_rules(SELECTOR_UID, {}, [rule("mine", labels=LABELS), rule("theirs", owner_uid="x")])
    assert diff == RuleDiff(delete=("mine",))


def test_eviction_condition_aggregates_the_rules() -> None:
    none = eviction_condition([])
    assert (none.status, none.reason) == (FALSE, "NoRules")

    pending = rule("r1", eviction=(TRUE, "PodsPendingEviction", "1 pod needs to be evicted in 1 namespace."))
    done = rule("r2", eviction=(FALSE, "Completed", "1 pod evicted since starting the controller."))
    silent = rule("r3")
    stale = rule("r4", generation=2, eviction=(FALSE, "NotStarted", ""), observed_generation=1)

    condition = eviction_condition([pending, done, silent])
    assert (condition.status, condition.reason) == (TRUE, "PodsPendingEviction")
    assert condition.message == (
        "1 of 3 DeviceTaintRules have pods pending eviction (r1: 1 pod needs to be evicted in 1 namespace.)."
    )

    condition = eviction_condition([done, silent, stale])
    assert (condition.status, condition.reason) == (UNKNOWN, "NotReported")
    assert condition.message == "2 of 3 DeviceTaintRules have not reported EvictionInProgress."

    condition = eviction_condition([done, rule("r5", eviction=(FALSE, "NoEffect", "dry run"))])
    assert (condition.status, condition.reason) == (FALSE, "NoPodsPending")
    assert condition.message == "None of the 2 DeviceTaintRules has pods pending eviction."

    # Rules on their way out do not count.
    assert (
        eviction_condition([rule("r6", deleting=True, eviction=(TRUE, "PodsPendingEviction", ""))]).status
        == FALSE
    )
