"""The EvictionInProgress condition: exact texts (spec §10.1, §10.2), the throttle and the write (§10.3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from operators.core.conditions import ObservedCondition
from operators.core.discovery import ServedResource
from operators.core.keys import Key
from operators.core.plan import Apply, Plan
from operators.core.reconcile import Done, Requeue
from operators.devicetaint.messages import (
    ConditionContent,
    RuleCounts,
    RuleDrop,
    RuleRequeue,
    RuleUnchanged,
    RuleWrite,
    dry_run_text,
    eviction_in_progress,
    pending_text,
    rule_plan,
    status_decision,
    throttle_delay,
    with_evicted_suffix,
)
from operators.devicetaint.models import RULE

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
TAIL = (
    "if the effect was NoExecute. This information will not be updated again. "
    "Recreate the DeviceTaintRule to trigger an update."
)


@pytest.mark.parametrize(
    ("effect", "counts", "expected"),
    [
        pytest.param(
            "NoExecute",
            RuleCounts(evicted_pods=1),
            ConditionContent("False", "Completed", "1 pod evicted since starting the controller."),
            id="completed-1",
        ),
        pytest.param(
            "NoExecute",
            RuleCounts(pending_pods=2, pending_namespaces=2, evicted_pods=1),
            ConditionContent(
                "True",
                "PodsPendingEviction",
                "2 pods need to be evicted in 2 different namespaces. 1 pod evicted since starting the controller.",  # noqa: E501
            ),
            id="pending-seed",
        ),
        pytest.param(
            "NoExecute",
            RuleCounts(pending_pods=1, pending_namespaces=1),
            ConditionContent("True", "PodsPendingEviction", "1 pod needs to be evicted in 1 namespace."),
            id="pending-singular",
        ),
        pytest.param(
            "NoExecute",
            RuleCounts(pending_pods=3, pending_namespaces=1),
            ConditionContent("True", "PodsPendingEviction", "3 pods need to be evicted in 1 namespace."),
            id="pending-throttle-scenario",
        ),
        pytest.param(
            "NoExecute",
            RuleCounts(evicted_pods=3),
            ConditionContent("False", "Completed", "3 pods evicted since starting the controller."),
            id="completed-3",
        ),
        pytest.param(
            "NoExecute", RuleCounts(), ConditionContent("False", "NotStarted", ""), id="not-started"
        ),
        pytest.param(
            "None",
            RuleCounts(published_devices=3, allocated_devices=1, pending_pods=1, pending_namespaces=1),
            ConditionContent(
                "False",
                "NoEffect",
                "3 published devices selected. 1 allocated device selected. 1 pod would be evicted in "
                "1 namespace " + TAIL,
            ),
            id="dry-run-seed",
        ),
        pytest.param(
            "None",
            RuleCounts(),
            ConditionContent(
                "False",
                "NoEffect",
                "0 published devices selected. 0 allocated devices selected. 0 pods would be evicted in "
                "0 different namespaces " + TAIL,
            ),
            id="dry-run-zero",
        ),
        pytest.param(
            "None",
            RuleCounts(
                published_devices=1000, allocated_devices=1000, pending_pods=1000, pending_namespaces=1
            ),
            ConditionContent(
                "False",
                "NoEffect",
                "1000 published devices selected. 1000 allocated devices selected. "
                "1000 pods would be evicted in 1 namespace " + TAIL,
            ),
            id="dry-run-mass",
        ),
        pytest.param(
            "None",
            RuleCounts(published_devices=3, allocated_devices=1, evicted_pods=1),
            ConditionContent(
                "False",
                "NoEffect",
                "3 published devices selected. 1 allocated device selected. 0 pods would be evicted in "
                "0 different namespaces " + TAIL + " 1 pod evicted since starting the controller.",
            ),
            id="dry-run-after-eviction",
        ),
        pytest.param(
            "NoSchedule",
            RuleCounts(evicted_pods=2),
            ConditionContent(
                "False",
                "OtherEffect",
                "Eviction only happens for the NoExecute effect. 2 pods evicted since starting the controller.",  # noqa: E501
            ),
            id="other-effect-after-evictions",
        ),
        pytest.param(
            "Sideways",
            RuleCounts(),
            ConditionContent("False", "OtherEffect", "Eviction only happens for the NoExecute effect."),
            id="unknown-effect",
        ),
    ],
)
def test_condition_content(effect: str, counts: RuleCounts, expected: ConditionContent) -> None:
    assert eviction_in_progress(effect, counts) == expected


def test_other_effect_ignores_pending_counts() -> None:
    content = eviction_in_progress("NoSchedule", RuleCounts(pending_pods=4, pending_namespaces=2))
    assert content.message == "Eviction only happens for the NoExecute effect."


@pytest.mark.parametrize(
    ("pods", "namespaces", "expected"),
    [
        (1, 1, "1 pod needs to be evicted in 1 namespace."),
        (2, 1, "2 pods need to be evicted in 1 namespace."),
        (1, 0, "1 pod needs to be evicted in 0 different namespaces."),
        (5, 3, "5 pods need to be evicted in 3 different namespaces."),
    ],
)
def test_pending_text(pods: int, namespaces: int, expected: str) -> None:
    assert pending_text(pods, namespaces) == expected


def test_dry_run_text_singulars() -> None:
    counts = RuleCounts(published_devices=1, allocated_devices=1, pending_pods=1, pending_namespaces=1)
    assert dry_run_text(counts) == (
        "1 published device selected. 1 allocated device selected. 1 pod would be evicted in 1 namespace "
        + TAIL
    )


def test_dry_run_text_shared_device() -> None:
    assert "2 allocated devices selected." in dry_run_text(RuleCounts(allocated_devices=2))


def test_suffix_only_for_evictions() -> None:
    assert with_evicted_suffix("", 0) == ""
    assert with_evicted_suffix("x.", 0) == "x."
    assert with_evicted_suffix("", 2) == "2 pods evicted since starting the controller."
    assert with_evicted_suffix("x.", 1) == "x. 1 pod evicted since starting the controller."


# --- Throttle and write decision ---------------------------------------------------------------------


def observed(
    seconds_ago: float, generation: int = 1, status: str = "True", message: str = "m"
) -> ObservedCondition:
    return ObservedCondition(
        type="EvictionInProgress",
        status=status,
        reason="PodsPendingEviction",
        message=message,
        observed_generation=generation,
        last_transition_time=NOW - timedelta(seconds=seconds_ago),
    )


def test_throttle_within_period_requeues_for_the_remainder() -> None:
    assert throttle_delay(observed(3), 1, NOW) == pytest.approx(7.0)


def test_throttle_expires_after_period() -> None:
    assert throttle_delay(observed(10), 1, NOW) is None
    assert throttle_delay(observed(25), 1, NOW) is None


def test_no_throttle_after_spec_change() -> None:
    assert throttle_delay(observed(1, generation=1), 2, NOW) is None


def test_no_throttle_without_condition() -> None:
    assert throttle_delay(None, 1, NOW) is None
    untimed = ObservedCondition(type="EvictionInProgress", observed_generation=1)
    assert throttle_delay(untimed, 1, NOW) is None


def test_throttle_capped_under_clock_skew() -> None:
    assert throttle_delay(observed(-60), 1, NOW) == pytest.approx(10.0)


def test_identical_content_writes_nothing() -> None:
    existing = observed(60)
    content = ConditionContent("True", "PodsPendingEviction", "m")
    assert status_decision(existing, content, 1, NOW) == RuleUnchanged()


@pytest.mark.parametrize(
    ("content", "generation"),
    [
        (ConditionContent("True", "PodsPendingEviction", "other"), 1),
        (ConditionContent("False", "PodsPendingEviction", "m"), 1),
        (ConditionContent("True", "Completed", "m"), 1),
        (ConditionContent("True", "PodsPendingEviction", "m"), 2),
    ],
)
def test_any_difference_writes_with_new_transition_time(content: ConditionContent, generation: int) -> None:
    decision = status_decision(observed(60), content, generation, NOW)
    assert isinstance(decision, RuleWrite)
    assert decision.condition.to_dict() == {
        "type": "EvictionInProgress",
        "status": content.status,
        "reason": content.reason,
        "message": content.message,
        "observedGeneration": generation,
        "lastTransitionTime": "2026-03-01T12:00:00Z",
    }


def test_first_write() -> None:
    decision = status_decision(None, ConditionContent("False", "NotStarted", ""), 1, NOW)
    assert isinstance(decision, RuleWrite)
    assert decision.condition.message == ""


# --- The plans: what the worker sends for a rule ----------------------------------------------------------

RULE_KEY = Key(RULE, "", "example", "R1")
V1_RULES = ServedResource("resource.k8s.io", "v1", "devicetaintrules", False, kind="DeviceTaintRule")


def test_a_new_condition_is_applied_to_the_rule_status_and_a_gone_rule_ends_it() -> None:
    decision = status_decision(None, ConditionContent("False", "NotStarted", ""), 1, NOW)
    assert isinstance(decision, RuleWrite)
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "example"},
        "status": {
            "conditions": [
                {
                    "type": "EvictionInProgress",
                    "status": "False",
                    "reason": "NotStarted",
                    "message": "",
                    "observedGeneration": 1,
                    "lastTransitionTime": "2026-03-01T12:00:00Z",
                }
            ]
        },
    }
    path = "/apis/resource.k8s.io/v1/devicetaintrules/example/status"
    expected = Apply(path, body, ends={404: Done()}, uid="R1")
    assert rule_plan(RULE_KEY, decision, V1_RULES) == Plan((expected,)), "only the rule read, by its UID"


def test_a_throttled_or_unwritable_status_sends_nothing() -> None:
    assert rule_plan(RULE_KEY, RuleRequeue(12.5), V1_RULES) == Plan(
        result=Requeue(12.5, "rule status throttled")
    )
    assert rule_plan(RULE_KEY, RuleDrop(), V1_RULES) == Plan()
    assert rule_plan(RULE_KEY, RuleUnchanged(), V1_RULES) == Plan()
    decision = status_decision(None, ConditionContent("False", "NotStarted", ""), 1, NOW)
    assert rule_plan(RULE_KEY, decision, None) == Plan(), "no devicetaintrules/status served"
