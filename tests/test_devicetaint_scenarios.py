"""Acceptance scenarios of spec §17 on plain data: the state, the work-item decisions and the condition.

A tiny in-test "worker" stands in for the controller: it runs pod items (reporting every eviction as
successful) and rule items (recording every write), so a scenario reads as a timeline.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pytest
from devicetaint_builders import (
    DRIVER,
    FOREVER,
    KEY,
    P1,
    R1,
    TAINTED,
    T,
    claim,
    delays_of,
    enqueued,
    fixture_f,
    pod,
    resource_slice,
    rule,
    seconds,
    taint,
    tolerating,
)

from operators.core.conditions import Condition
from operators.core.keys import POD, Key
from operators.devicetaint.cache import ClusterCache, Effects
from operators.devicetaint.messages import (
    RULE_STATUS_PERIOD,
    RuleDecision,
    RuleRequeue,
    RuleUnchanged,
    RuleWrite,
)
from operators.devicetaint.models import RULE, pod_key
from operators.devicetaint.podeviction import EvictionResult, PodDecision, PodDone, PodEvict, PodNotYet

DRY_TAIL = (
    "if the effect was NoExecute. This information will not be updated again. "
    "Recreate the DeviceTaintRule to trigger an update."
)


def run_pod(state: ClusterCache, item: Key, now: datetime) -> PodDecision:
    decision = state.decide_pod(item, now)
    if isinstance(decision, PodEvict):
        state.finish_pod(decision, EvictionResult.EVICTED, now)
        # The watch then shows the pod terminating.
        cached = state.cached_pod(item.namespace, item.name)
        assert cached is not None
        terminating = cached.metadata.model_copy(update={"deletion_timestamp": "2026-03-01T12:00:00Z"})
        state.apply_pod(cached.model_copy(update={"metadata": terminating}), now)
    return decision


def run_rule(state: ClusterCache, now: datetime, item: Key = R1) -> RuleDecision:
    decision = state.decide_rule(item, now)
    if isinstance(decision, RuleWrite):
        state.rule_status_written(item, decision.condition)
    return decision


def written(decision: RuleDecision) -> Condition:
    assert isinstance(decision, RuleWrite), decision
    return decision.condition


def summary(decision: RuleDecision) -> tuple[str, str, str]:
    condition = written(decision)
    return (condition.status, condition.reason, condition.message)


def evicts_at(state: ClusterCache, when: datetime, item: Key = P1) -> None:
    eviction = state.scheduled_eviction(item)
    assert eviction is not None
    assert eviction.when == when


# --- 1-14: which pods go, and when -------------------------------------------------------------------


def test_01_slice_taint_evicts_at_once() -> None:
    state = fixture_f(TAINTED)
    decision = state.decide_pod(P1, T + seconds(1))
    assert isinstance(decision, PodEvict)
    assert not decision.already_terminating
    assert decision.status_patch is not None
    finished = state.finish_pod(decision, EvictionResult.EVICTED, T + seconds(1))
    assert finished.latency == pytest.approx(1.0)
    assert isinstance(state.decide_pod(P1, T + seconds(2)), PodDone)


@pytest.mark.parametrize("effect", ["NoSchedule", "None"])
def test_02_non_evicting_effects(effect: str) -> None:
    state = fixture_f({"gpu-0": [taint(effect)]})
    assert state.scheduled_eviction(P1) is None
    assert isinstance(state.decide_pod(P1, T + seconds(30)), PodDone)


def test_03_newest_generation_only() -> None:
    state = ClusterCache()
    state.apply_slice(resource_slice(name="gen-1", generation=1, taints=TAINTED), T)
    state.apply_slice(resource_slice(name="gen-2", generation=2), T)
    state.apply_claim(claim(), T)
    state.apply_pod(pod(), T)
    assert state.scheduled_eviction(P1) is None
    assert enqueued(state.delete_slice(resource_slice(name="gen-2", generation=2), T)) == [(P1, 0.0)]


def test_04_toleration_seconds() -> None:
    state = fixture_f(TAINTED, tolerations=[tolerating(20)])
    assert state.decide_pod(P1, T + seconds(15)) == PodNotYet(5.0)
    assert isinstance(state.decide_pod(P1, T + seconds(25)), PodEvict)


def test_05_infinite_toleration() -> None:
    assert fixture_f(TAINTED, tolerations=[FOREVER]).scheduled_eviction(P1) is None


@pytest.mark.parametrize(
    ("toleration", "when"),
    [
        pytest.param({"key": KEY, "operator": "Exists"}, None, id="empty-effect"),
        pytest.param({"operator": "Exists"}, None, id="empty-key-and-effect"),
        pytest.param({"key": KEY, "operator": "Exists", "tolerationSeconds": 20}, T + seconds(20), id="20s"),
    ],
)
def test_06_empty_effect_ours(toleration: dict[str, object], when: datetime | None) -> None:
    state = fixture_f(TAINTED, tolerations=[toleration])
    if when is None:
        assert state.scheduled_eviction(P1) is None
    else:
        evicts_at(state, when)


@pytest.mark.parametrize(
    "toleration",
    [
        tolerating(effect="NoSchedule"),
        tolerating(effect="None"),
        {"key": KEY, "operator": "Equal", "value": "Fine", "effect": "NoExecute"},
    ],
    ids=["noschedule", "none", "08-value-mismatch"],
)
def test_07_08_non_matching_tolerations_evict_at_once(toleration: dict[str, object]) -> None:
    evicts_at(fixture_f(TAINTED, tolerations=[toleration]), T)


@pytest.mark.parametrize(
    ("tolerations", "when"),
    [
        pytest.param([tolerating(100), tolerating(30)], T + seconds(30), id="100-and-30"),
        pytest.param([tolerating(30), FOREVER], None, id="30-and-forever"),
        pytest.param([tolerating(-5)], T, id="negative"),
    ],
)
def test_09_several_tolerations(tolerations: list[dict[str, object]], when: datetime | None) -> None:
    state = fixture_f(TAINTED, tolerations=tolerations)
    if when is None:
        assert state.scheduled_eviction(P1) is None
    else:
        evicts_at(state, when)


def test_10_time_added_in_the_past() -> None:
    now = T + seconds(3600)
    state = fixture_f(tolerations=[tolerating(60)], now=now)
    effects = state.apply_rule(rule(selector={"device": "gpu-0"}, time_added=T), now)
    assert (P1, 0.0) in enqueued(effects)


def test_11_cancel() -> None:
    state = fixture_f(TAINTED, tolerations=[tolerating(60)])
    effects = state.apply_slice(resource_slice(), T + seconds(10))
    assert effects.cancelled == [P1]
    assert isinstance(state.decide_pod(P1, T + seconds(70)), PodDone)


def test_12_not_affected() -> None:
    state = ClusterCache()
    state.apply_slice(resource_slice(taints=TAINTED), T)
    state.apply_claim(claim(name="c-unsched", reserved_for=[("unscheduled", "UA")]), T)
    state.apply_claim(claim(name="c-other", reserved_for=[("unreserved", "SOMEONE")]), T)
    state.apply_claim(claim(name="c-unalloc", allocated=False, reserved_for=[("unallocated", "UC")]), T)
    state.apply_claim(claim(name="tmpl-claim", reserved_for=[("foreign", "UD")], owner_uid="OTHER"), T)
    pods = [
        pod(name="unscheduled", uid="UA", node="", claims=[{"name": "g", "resourceClaimName": "c-unsched"}]),
        pod(name="unreserved", uid="UB", claims=[{"name": "g", "resourceClaimName": "c-other"}]),
        pod(name="unallocated", uid="UC", claims=[{"name": "g", "resourceClaimName": "c-unalloc"}]),
        pod(
            name="foreign",
            uid="UD",
            claims=[{"name": "g", "resourceClaimTemplateName": "t"}],
            statuses=[{"name": "g", "resourceClaimName": "tmpl-claim"}],
        ),
    ]
    for p in pods:
        assert enqueued(state.apply_pod(p, T)) == []
        assert state.scheduled_eviction(pod_key(p)) is None


def test_13_two_claims() -> None:
    state = ClusterCache()
    state.apply_slice(resource_slice(taints={"gpu-0": [taint()], "gpu-1": [taint()]}), T)
    state.apply_claim(claim(tolerations=[tolerating(100)]), T)
    state.apply_claim(claim(name="c2", devices=["gpu-1"]), T)
    state.apply_pod(
        pod(claims=[{"name": "a", "resourceClaimName": "c1"}, {"name": "b", "resourceClaimName": "c2"}]), T
    )
    evicts_at(state, T)


def test_14_extended_resource_claim_ours() -> None:
    state = ClusterCache()
    state.apply_slice(resource_slice(), T)
    state.apply_claim(claim(name="c-ext", devices=["gpu-1"], reserved_for=[("p2", "U2")], owner_uid="U2"), T)
    state.apply_pod(pod(name="p2", uid="U2", claims=[], extended="c-ext"), T)
    effects = state.apply_slice(resource_slice(taints={"gpu-1": [taint()]}), T)
    assert enqueued(effects) == [(Key(POD, "ns1", "p2", "U2"), 0.0)]


def test_36_admin_access_has_no_exemption() -> None:
    state = ClusterCache()
    state.apply_slice(resource_slice(taints=TAINTED), T)
    admin = claim().model_dump(by_alias=True)
    admin["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    state.apply_claim(type(claim()).model_validate(admin), T)
    state.apply_pod(pod(), T)
    evicts_at(state, T)


# --- 15-29, 37-38: rules and their condition ---------------------------------------------------------


def test_15_rule_completed() -> None:
    state = fixture_f()
    state.apply_rule(rule(selector={"driver": DRIVER}), T)
    first = run_rule(state, T)
    assert summary(first) == ("True", "PodsPendingEviction", "1 pod needs to be evicted in 1 namespace.")
    assert isinstance(run_pod(state, P1, T), PodEvict)
    assert state.evicted_count("R1") == 1
    assert isinstance(run_rule(state, T + seconds(5)), RuleRequeue)
    final = written(run_rule(state, T + seconds(10)))
    assert (final.status, final.reason, final.message) == (
        "False",
        "Completed",
        "1 pod evicted since starting the controller.",
    )
    assert final.observed_generation == 1


def test_15_condition_never_false_while_pod_lacks_deletion_timestamp() -> None:
    state = fixture_f()
    state.apply_rule(rule(selector={"driver": DRIVER}), T)
    run_rule(state, T)
    decision = state.decide_pod(P1, T)
    assert isinstance(decision, PodEvict)
    state.finish_pod(decision, EvictionResult.EVICTED, T)
    # The watch has not shown the deletion yet: still pending, now with the suffix.
    assert summary(run_rule(state, T + seconds(10))) == (
        "True",
        "PodsPendingEviction",
        "1 pod needs to be evicted in 1 namespace. 1 pod evicted since starting the controller.",
    )


def pool_rule_state(b_tolerates: bool = True) -> ClusterCache:
    """Scenario 16: A (ns1, untolerated), B (ns1, gpu-1) and C (ns2, gpu-2) tolerating 600 s."""
    state = ClusterCache()
    state.apply_slice(resource_slice(), T)
    specs = [("a", "ns1", "gpu-0", []), ("b", "ns1", "gpu-1", [tolerating(600)] if b_tolerates else [])]
    specs.append(("c", "ns2", "gpu-2", [tolerating(600)]))
    for name, namespace, device, tolerations in specs:
        state.apply_claim(
            claim(
                name=f"c-{name}",
                namespace=namespace,
                devices=[device],
                tolerations=tolerations,
                reserved_for=[(name, f"U-{name}")],
            ),
            T,
        )
        state.apply_pod(
            pod(
                name=name,
                namespace=namespace,
                uid=f"U-{name}",
                claims=[{"name": "g", "resourceClaimName": f"c-{name}"}],
            ),
            T,
        )
    state.apply_rule(rule(selector={"driver": DRIVER, "pool": "node-1"}), T)
    return state


def test_16_seed_message_pending() -> None:
    state = pool_rule_state()
    assert summary(run_rule(state, T)) == (
        "True",
        "PodsPendingEviction",
        "3 pods need to be evicted in 2 different namespaces.",
    )
    assert isinstance(run_pod(state, Key(POD, "ns1", "a", "U-a"), T), PodEvict)
    assert isinstance(run_pod(state, Key(POD, "ns1", "b", "U-b"), T), PodNotYet)
    assert summary(run_rule(state, T + seconds(10))) == (
        "True",
        "PodsPendingEviction",
        "2 pods need to be evicted in 2 different namespaces. 1 pod evicted since starting the controller.",
    )


def test_17_singular_pending() -> None:
    state = fixture_f(tolerations=[tolerating(600)])
    state.apply_rule(rule(selector={"driver": DRIVER, "pool": "node-1"}), T)
    assert summary(run_rule(state, T)) == (
        "True",
        "PodsPendingEviction",
        "1 pod needs to be evicted in 1 namespace.",
    )


@pytest.mark.parametrize(
    "goes",
    [
        pytest.param(
            lambda state, now: state.apply_claim(claim(tolerations=[tolerating(600)], reserved_for=[]), now),
            id="reservation-removed",
        ),
        pytest.param(lambda state, now: state.delete_pod(pod()), id="pod-deleted"),
    ],
)
def test_17_a_pod_that_goes_within_its_toleration_window_is_no_longer_pending(
    goes: Callable[[ClusterCache, datetime], Effects],
) -> None:
    """Nothing else of the rule's changes: its status pass must be queued by the pod's going, or
    the rule goes on saying that the pod needs to be evicted."""
    state = fixture_f(tolerations=[tolerating(600)])
    state.apply_rule(rule(selector={"driver": DRIVER, "pool": "node-1"}), T)
    assert summary(run_rule(state, T))[1] == "PodsPendingEviction"
    effects = goes(state, T + seconds(30))
    assert delays_of(effects, R1) == [RULE_STATUS_PERIOD.total_seconds()]
    assert summary(run_rule(state, T + seconds(40))) == ("False", "NotStarted", "")


def test_18_not_started() -> None:
    state = fixture_f()
    state.apply_rule(rule(selector={"device": "gpu-9"}), T)
    condition = written(run_rule(state, T))
    assert (condition.status, condition.reason, condition.message, condition.observed_generation) == (
        "False",
        "NotStarted",
        "",
        1,
    )


def test_19_dry_run_seed() -> None:
    state = fixture_f()
    effects = state.apply_rule(rule(effect="None", selector={"driver": DRIVER, "pool": "node-1"}), T)
    assert enqueued(effects) == [(R1, 0.0)]
    assert summary(run_rule(state, T)) == (
        "False",
        "NoEffect",
        "3 published devices selected. 1 allocated device selected. 1 pod would be evicted in 1 namespace "
        + DRY_TAIL,
    )
    assert state.scheduled_eviction(P1) is None


def test_20_dry_run_zero() -> None:
    state = fixture_f()
    state.apply_rule(rule(effect="None", selector={"device": "nothing-here"}), T)
    assert written(run_rule(state, T)).message == (
        "0 published devices selected. 0 allocated devices selected. 0 pods would be evicted in "
        "0 different namespaces " + DRY_TAIL
    )


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        pytest.param(
            [FOREVER],
            "1 allocated device selected. 0 pods would be evicted in 0 different namespaces",
            id="forever",
        ),
        pytest.param(
            [{"key": KEY, "operator": "Exists"}],
            "1 allocated device selected. 0 pods would be evicted in 0 different namespaces",
            id="empty-effect-ours",
        ),
        pytest.param([tolerating(600)], "1 pod would be evicted in 1 namespace", id="600s"),
    ],
)
def test_21_dry_run_honours_tolerations(tolerations: list[dict[str, object]], expected: str) -> None:
    state = fixture_f(tolerations=tolerations)
    state.apply_rule(rule(effect="None", selector={"driver": DRIVER, "pool": "node-1"}), T)
    assert expected in written(run_rule(state, T)).message


def test_22_dry_run_is_not_refreshed() -> None:
    state = fixture_f()
    state.apply_rule(rule(effect="None", selector={"driver": DRIVER, "pool": "node-1"}), T)
    run_rule(state, T)
    effects = state.apply_claim(
        claim(name="c2", devices=["gpu-1"], reserved_for=[("p2", "U2")]), T + seconds(1)
    )
    effects.extend(
        state.apply_pod(pod(name="p2", uid="U2", claims=[{"name": "g", "resourceClaimName": "c2"}]), T)
    )
    assert [item for item, _ in enqueued(effects) if isinstance(item, Key)] == []


def test_23_none_to_no_execute() -> None:
    state = fixture_f()
    state.apply_rule(rule(effect="None", selector={"driver": DRIVER, "pool": "node-1"}), T)
    run_rule(state, T)
    bumped = T + seconds(2)
    effects = state.apply_rule(
        rule(generation=2, selector={"driver": DRIVER, "pool": "node-1"}, time_added=bumped), bumped
    )
    assert enqueued(effects)[:2] == [(R1, 0.0), (P1, 0.0)]
    rewritten = written(run_rule(state, bumped))
    assert (rewritten.observed_generation, rewritten.reason) == (2, "PodsPendingEviction")
    run_pod(state, P1, bumped)
    final = written(run_rule(state, bumped + seconds(10)))
    assert (final.reason, final.message) == ("Completed", "1 pod evicted since starting the controller.")


def test_24_no_execute_to_no_schedule_after_evictions() -> None:
    state = pool_rule_state(b_tolerates=False)
    run_rule(state, T)
    run_pod(state, Key(POD, "ns1", "a", "U-a"), T)
    run_pod(state, Key(POD, "ns1", "b", "U-b"), T)
    changed = rule(generation=2, effect="NoSchedule", selector={"driver": DRIVER, "pool": "node-1"})
    effects = state.apply_rule(changed, T)
    assert effects.cancelled == [Key(POD, "ns2", "c", "U-c")]
    assert summary(run_rule(state, T + seconds(1))) == (
        "False",
        "OtherEffect",
        "Eviction only happens for the NoExecute effect. 2 pods evicted since starting the controller.",
    )


def test_25_no_execute_to_none_after_an_eviction() -> None:
    state = fixture_f()
    state.apply_rule(rule(selector={"driver": DRIVER}), T)
    run_rule(state, T)
    run_pod(state, P1, T)
    state.apply_rule(rule(generation=2, effect="None", selector={"driver": DRIVER}), T + seconds(3))
    message = written(run_rule(state, T + seconds(3))).message
    assert message.endswith(
        "Recreate the DeviceTaintRule to trigger an update. 1 pod evicted since starting the controller."
    )


@pytest.mark.parametrize(
    ("selector", "evicted"),
    [
        pytest.param(None, False, id="no-selector"),
        pytest.param({}, True, id="empty"),
        pytest.param({"pool": "node-1"}, True, id="pool-only"),
        pytest.param({"driver": "other.example.com"}, False, id="other-driver"),
    ],
)
def test_26_selectors(selector: dict[str, object] | None, evicted: bool) -> None:
    state = fixture_f()
    state.apply_rule(rule(selector=selector), T)
    assert (state.scheduled_eviction(P1) is not None) is evicted
    if not evicted:
        assert summary(run_rule(state, T))[1] == "NotStarted"


def test_27_device_no_longer_published() -> None:
    state = fixture_f()
    state.delete_slice(resource_slice(), T)
    state.apply_rule(rule(selector={"driver": DRIVER, "pool": "node-1", "device": "gpu-0"}), T)
    evicts_at(state, T)


def test_28_throttle() -> None:
    state = ClusterCache()
    state.apply_slice(resource_slice(), T)
    items = []
    for index, wait in enumerate((0, 4, 8)):
        name, uid = f"p{index}", f"U{index}"
        state.apply_claim(
            claim(
                name=f"c{index}",
                devices=[f"gpu-{index}"],
                tolerations=[tolerating(wait)],
                reserved_for=[(name, uid)],
            ),
            T,
        )
        state.apply_pod(pod(name=name, uid=uid, claims=[{"name": "g", "resourceClaimName": f"c{index}"}]), T)
        items.append((Key(POD, "ns1", name, uid), wait))
    state.apply_rule(rule(selector={"driver": DRIVER}), T)
    writes = [(T, summary(run_rule(state, T)))]
    assert writes[0][1] == ("True", "PodsPendingEviction", "3 pods need to be evicted in 1 namespace.")
    for item, wait in items:
        run_pod(state, item, T + seconds(wait))
        assert isinstance(run_rule(state, T + seconds(wait + 1)), RuleRequeue | RuleUnchanged)
    final = run_rule(state, T + seconds(18))
    assert summary(final) == ("False", "Completed", "3 pods evicted since starting the controller.")


def test_28_throttle_requeues_for_the_remainder() -> None:
    state = fixture_f()
    state.apply_rule(rule(selector={}), T)
    run_rule(state, T)
    assert run_rule(state, T + seconds(4)) == RuleRequeue(6.0)


def test_29_rule_recreated_starts_afresh() -> None:
    state = fixture_f()
    state.apply_rule(rule(selector={"driver": DRIVER}), T)
    run_rule(state, T)
    run_pod(state, P1, T)
    state.delete_rule(rule(selector={"driver": DRIVER}), T + seconds(20))
    state.apply_rule(rule(uid="R2", selector={"driver": DRIVER}), T + seconds(20))
    assert state.evicted_count("R1") == 0
    recreated = run_rule(state, T + seconds(20), Key(RULE, "", "example", "R2"))
    assert summary(recreated) == ("False", "NotStarted", "")
    assert run_rule(state, T + seconds(20)) == run_rule(state, T, R1)


def test_37_shared_device_in_dry_run() -> None:
    state = fixture_f()
    state.apply_claim(claim(name="c2", reserved_for=[("p2", "U2")]), T)
    state.apply_rule(rule(effect="None", selector={"device": "gpu-0"}), T)
    assert "2 allocated devices selected." in written(run_rule(state, T)).message


def test_38_two_rules_one_pod() -> None:
    state = fixture_f()
    state.apply_rule(rule(name="r1", uid="U-R1", selector={"device": "gpu-0"}), T)
    state.apply_rule(rule(name="r2", uid="U-R2", selector={"device": "gpu-0"}), T)
    decision = state.decide_pod(P1, T)
    assert isinstance(decision, PodEvict)
    finished = state.finish_pod(decision, EvictionResult.EVICTED, T)
    assert enqueued(finished.effects) == [
        (Key(RULE, "", "r1", "U-R1"), 10.0),
        (Key(RULE, "", "r2", "U-R2"), 10.0),
    ]
    state.apply_pod(pod(deleting=True), T)
    for name, uid in (("r1", "U-R1"), ("r2", "U-R2")):
        assert summary(run_rule(state, T + seconds(10), Key(RULE, "", name, uid))) == (
            "False",
            "Completed",
            "1 pod evicted since starting the controller.",
        )
    assert isinstance(state.decide_pod(P1, T + seconds(11)), PodDone)


# --- 30-34: replacement, termination, retries, restarts ----------------------------------------------


def test_30_pod_replaced_before_deletion() -> None:
    state = fixture_f(TAINTED, tolerations=[tolerating(20)])
    assert state.delete_pod(pod()).cancelled == []
    effects = state.apply_pod(pod(uid="U2"), T + seconds(10))
    assert enqueued(effects) == []
    assert isinstance(state.decide_pod(P1, T + seconds(20)), PodDone)


def test_31_already_terminating_counts_without_writes() -> None:
    state = ClusterCache()
    state.apply_slice(resource_slice(), T)
    state.apply_claim(claim(), T)
    state.apply_pod(pod(deleting=True), T)
    state.apply_rule(rule(selector={"device": "gpu-0"}), T)
    decision = state.decide_pod(P1, T)
    assert isinstance(decision, PodEvict)
    assert decision.already_terminating
    assert state.finish_pod(decision, EvictionResult.EVICTED, T).latency == 0.0
    final = run_rule(state, T + seconds(10))
    assert summary(final) == ("False", "Completed", "1 pod evicted since starting the controller.")


def test_32_retry_after_patch_skips_the_second_patch() -> None:
    state = fixture_f(TAINTED)
    first = state.decide_pod(P1, T)
    assert isinstance(first, PodEvict)
    assert first.status_patch is not None
    # The DELETE failed; meanwhile the watch showed our condition.
    condition = first.status_patch["status"]["conditions"][0]
    state.apply_pod(pod(conditions=[condition]), T)
    retry = state.decide_pod(P1, T + seconds(1))
    assert isinstance(retry, PodEvict)
    assert retry.status_patch is None


def test_32_gone_does_not_count() -> None:
    state = fixture_f()
    state.apply_rule(rule(selector={}), T)
    decision = state.decide_pod(P1, T)
    assert isinstance(decision, PodEvict)
    finished = state.finish_pod(decision, EvictionResult.GONE, T)
    assert finished.latency is None
    assert finished.effects.enqueue == []
    assert state.evicted_count("R1") == 0


def test_33_restart_resets_the_counter() -> None:
    state = fixture_f()
    state.apply_rule(rule(selector={"driver": DRIVER}), T)
    run_rule(state, T)
    run_pod(state, P1, T)
    run_rule(state, T + seconds(10))
    restarted = ClusterCache()
    restarted.apply_slice(resource_slice(), T + seconds(60))
    restarted.apply_claim(claim(reserved_for=[]), T + seconds(60))
    completed = state.cached_rule("example")
    assert completed is not None
    effects = restarted.apply_rule(completed, T + seconds(60))
    assert enqueued(effects) == [(R1, 0.0)]
    assert summary(run_rule(restarted, T + seconds(60))) == ("False", "NotStarted", "")


def test_34_restart_mid_eviction() -> None:
    state = ClusterCache()
    devices = [f"gpu-{i}" for i in range(300)]
    state.apply_slice(resource_slice(devices=devices, taints={d: [taint()] for d in devices}), T)
    for i, device in enumerate(devices):
        tolerations = [FOREVER] if i < 30 else []
        state.apply_claim(
            claim(name=f"c{i}", devices=[device], tolerations=tolerations, reserved_for=[(f"p{i}", f"U{i}")]),
            T,
        )
        deleting = 30 <= i < 130
        state.apply_pod(
            pod(
                name=f"p{i}",
                uid=f"U{i}",
                claims=[{"name": "g", "resourceClaimName": f"c{i}"}],
                deleting=deleting,
            ),
            T,
        )
    decisions = [state.decide_pod(Key(POD, "ns1", f"p{i}", f"U{i}"), T) for i in range(300)]
    assert all(isinstance(d, PodDone) for d in decisions[:30])
    evictions = [d for d in decisions[30:] if isinstance(d, PodEvict)]
    assert len(evictions) == 270
    assert sum(d.already_terminating for d in evictions) == 100


def test_39_mass_dry_run_message() -> None:
    state = ClusterCache()
    for s in range(20):
        state.apply_slice(resource_slice(name=f"s{s}", devices=[f"gpu-{s}-{d}" for d in range(50)]), T)
    for i in range(1000):
        device = f"gpu-{i // 50}-{i % 50}"
        state.apply_claim(claim(name=f"c{i}", devices=[device], reserved_for=[(f"p{i}", f"U{i}")]), T)
        state.apply_pod(
            pod(name=f"p{i}", uid=f"U{i}", claims=[{"name": "g", "resourceClaimName": f"c{i}"}]), T
        )
    state.apply_rule(rule(effect="None", selector={"pool": "node-1"}), T)
    assert written(run_rule(state, T)).message == (
        "1000 published devices selected. 1000 allocated devices selected. 1000 pods would be evicted in "
        "1 namespace " + DRY_TAIL
    )
