"""Which taints count (spec §5), which pods are affected (§7), and what a rule selects (§10.2)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from devicetaint_builders import (
    DRIVER,
    FOREVER,
    T,
    claim,
    pod,
    resource_slice,
    rule,
    seconds,
    taint,
    tolerating,
)

from operators.core.models import parse
from operators.devicetaint import evaluation
from operators.devicetaint.evaluation import (
    ClaimEntry,
    Consumers,
    PodEviction,
    RuleTaintReason,
    SliceTaintReason,
    allocated_devices,
    claim_eviction,
    describe_reasons,
    due_reasons,
    pending_pods,
    pod_affected_by,
    pod_eviction,
    published_devices,
    referenced_claims,
)
from operators.devicetaint.models import Pod, ResourceClaim, ResourceSlice
from operators.devicetaint.pools import PoolIndex
from operators.dra.taints import Eviction

GPU0_TAINT = SliceTaintReason(DRIVER, "node-1", "gpu-0", 0, "node-1-slice")


def pools_with(*slices: ResourceSlice) -> PoolIndex:
    index = PoolIndex()
    for resource_slice_ in slices:
        index.apply(resource_slice_)
    return index


def entries(*claims: ResourceClaim) -> dict[tuple[str, str], ClaimEntry]:
    return {c.key: ClaimEntry(c, None) for c in claims}


# --- §5 Which taints count ---------------------------------------------------------------------------


def test_slice_taint_evicts_at_time_added() -> None:
    pools = pools_with(resource_slice(taints={"gpu-0": [taint()]}))
    assert claim_eviction(claim(), pools, []) == Eviction(T, frozenset({GPU0_TAINT}))


def test_non_evicting_effects() -> None:
    for effect in ("NoSchedule", "None", "Sideways"):
        pools = pools_with(resource_slice(taints={"gpu-0": [taint(effect)]}))
        assert claim_eviction(claim(), pools, [rule(effect=effect, selector={})]) is None


def test_taint_on_other_device_does_not_count() -> None:
    pools = pools_with(resource_slice(taints={"gpu-1": [taint()]}))
    assert claim_eviction(claim(), pools, []) is None


def test_newest_generation_only() -> None:
    old = resource_slice(name="gen-1", generation=1, taints={"gpu-0": [taint()]})
    new = resource_slice(name="gen-2", generation=2)
    pools = pools_with(old, new)
    assert claim_eviction(claim(), pools, []) is None
    pools.delete("gen-2")
    assert claim_eviction(claim(), pools, []) == Eviction(
        T, frozenset({SliceTaintReason(DRIVER, "node-1", "gpu-0", 0, "gen-1")})
    )


def test_older_generation_ignored_even_if_only_it_lists_the_device() -> None:
    old = resource_slice(name="gen-1", generation=1, devices=["gpu-0"], taints={"gpu-0": [taint()]})
    new = resource_slice(name="gen-2", generation=2, devices=["gpu-1"])
    assert claim_eviction(claim(), pools_with(old, new), []) is None


def test_rule_matches_the_allocation_even_without_a_slice() -> None:
    the_rule = rule(selector={"driver": DRIVER, "pool": "node-1", "device": "gpu-0"})
    assert claim_eviction(claim(), PoolIndex(), [the_rule]) == Eviction(
        T, frozenset({RuleTaintReason("example", "R1")})
    )


def test_rule_without_selector_matches_nothing_and_empty_selector_everything() -> None:
    assert claim_eviction(claim(), PoolIndex(), [rule(selector=None)]) is None
    assert claim_eviction(claim(), PoolIndex(), [rule(selector={})]) is not None


def test_admin_access_gets_no_exemption() -> None:
    body = {
        "metadata": {"name": "c1", "namespace": "ns1", "uid": "C1"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"driver": DRIVER, "pool": "node-1", "device": "gpu-0", "adminAccess": True}]
                }
            },
            "reservedFor": [{"resource": "pods", "name": "p1", "uid": "U1"}],
        },
    }
    pools = pools_with(resource_slice(taints={"gpu-0": [taint()]}))
    assert claim_eviction(parse(ResourceClaim, body), pools, []) is not None


def test_every_non_ignored_taint_is_a_reason_sorted_rules_first() -> None:
    pools = pools_with(resource_slice(taints={"gpu-0": [taint(), taint(time_added=T + seconds(50))]}))
    rules = [rule(name="b", uid="RB", selector={}), rule(name="a", uid="RA", selector={})]
    eviction = claim_eviction(claim(), pools, rules)
    assert eviction is not None
    assert eviction.when == T
    assert describe_reasons(eviction.reasons) == (
        "DeviceTaintRule a, DeviceTaintRule b, "
        "ResourceSlice node-1-slice dra.example.com/node-1/gpu-0 taint #0, "
        "ResourceSlice node-1-slice dra.example.com/node-1/gpu-0 taint #1"
    )


def test_taint_without_time_added_is_ignored() -> None:
    pools = pools_with(resource_slice(taints={"gpu-0": [taint(time_added=None)]}))
    assert claim_eviction(claim(), pools, [rule(selector={}, time_added=None)]) is None


def test_two_results_earliest_wins() -> None:
    pools = pools_with(resource_slice(taints={"gpu-0": [taint()], "gpu-1": [taint()]}))
    tolerant = claim(devices=["gpu-0"], tolerations=[tolerating(100)])
    assert claim_eviction(tolerant, pools, []) == Eviction(T + seconds(100), frozenset({GPU0_TAINT}))


# --- §7 Which pods are affected ----------------------------------------------------------------------


def test_direct_reference_affects() -> None:
    assert pod_affected_by(pod(), claim())


def test_unscheduled_pod_is_not_affected() -> None:
    assert not pod_affected_by(pod(node=""), claim())


def test_pod_not_in_reserved_for_is_not_affected() -> None:
    assert not pod_affected_by(pod(), claim(reserved_for=[("p1", "OTHER")]))


def test_unallocated_claim_affects_nothing() -> None:
    assert not pod_affected_by(pod(), claim(allocated=False))


def test_template_claim_must_be_controlled_by_the_pod() -> None:
    templated = pod(
        claims=[{"name": "gpu", "resourceClaimTemplateName": "tmpl"}],
        statuses=[{"name": "gpu", "resourceClaimName": "p1-gpu-abc"}],
    )
    owned = claim(name="p1-gpu-abc", owner_uid="U1")
    foreign = claim(name="p1-gpu-abc", owner_uid="SOMEONE-ELSE")
    assert pod_affected_by(templated, owned)
    assert not pod_affected_by(templated, foreign)


def test_template_entry_without_recorded_claim_references_nothing() -> None:
    templated = pod(
        claims=[{"name": "gpu", "resourceClaimTemplateName": "tmpl"}],
        statuses=[{"name": "gpu"}],
    )
    assert list(referenced_claims(templated)) == []


def test_extended_resource_claim_is_evicted_too() -> None:
    p2 = pod(name="p2", uid="U2", claims=[], extended="c-ext")
    c_ext = claim(name="c-ext", devices=["gpu-1"], reserved_for=[("p2", "U2")], owner_uid="U2")
    assert list(referenced_claims(p2)) == [("c-ext", True)]
    assert pod_affected_by(p2, c_ext)
    assert not pod_affected_by(p2, claim(name="c-ext", reserved_for=[("p2", "U2")], owner_uid="U9"))


@pytest.mark.parametrize("direct_first", [True, False])
def test_claim_also_named_directly_needs_no_control(direct_first: bool) -> None:
    direct = {"name": "direct", "resourceClaimName": "shared"}
    templated = {"name": "gpu", "resourceClaimTemplateName": "tmpl"}
    both = pod(
        claims=[direct, templated] if direct_first else [templated, direct],
        statuses=[{"name": "gpu", "resourceClaimName": "shared"}],
    )
    foreign = claim(name="shared", owner_uid="SOMEONE-ELSE")
    assert pod_affected_by(both, foreign)
    assert pod_eviction(both, {foreign.key: ClaimEntry(foreign, Eviction(T, frozenset({GPU0_TAINT})))})


GROUP_ENTRY = [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]


def member(name: str, uid: str, claim_name: str = "gang-gpu-x", group: str = "gang") -> Pod:
    """A member of a PodGroup whose status names the group's claim for its template entry."""
    return pod(
        name=name,
        uid=uid,
        claims=GROUP_ENTRY,
        statuses=[{"name": "gpu", "resourceClaimName": claim_name}],
        group=group,
    )


def test_members_use_the_claim_reserved_for_their_group() -> None:
    """Upstream's IsForPod and IsReservedForPod with DRAWorkloadResourceClaims: every member of the
    group that owns the claim and is its consumer is affected, none of another group."""
    shared = claim(name="gang-gpu-x", group="gang")
    assert pod_affected_by(member("m1", "M1"), shared, workload_claims=True)
    assert pod_affected_by(member("m2", "M2"), shared, workload_claims=True)
    assert not pod_affected_by(member("other", "O1", group="other-gang"), shared, workload_claims=True)
    assert not pod_affected_by(member("m1", "M1"), shared, workload_claims=False)
    by_name = pod(
        name="m3", uid="M3", claims=[{"name": "gpu", "resourceClaimName": "gang-gpu-x"}], group="gang"
    )
    assert pod_affected_by(by_name, shared, workload_claims=True)


def test_every_member_of_a_group_is_pending_for_a_rule_on_its_device() -> None:
    shared = claim(name="gang-gpu-x", group="gang")
    members = [member("m1", "M1"), member("m2", "M2"), member("m3", "M3")]
    the_rule = rule(selector={"pool": "node-1"})
    pending = pending_pods(the_rule, entries(shared), pods_by_key(*members, workload_claims=True))
    assert pending == {("ns1", "m1"), ("ns1", "m2"), ("ns1", "m3")}
    assert pending_pods(the_rule, entries(shared), pods_by_key(*members)) == set()


def test_claim_in_other_namespace_never_affects() -> None:
    assert not pod_affected_by(pod(), claim(namespace="ns2"))


def test_pod_eviction_merges_claims() -> None:
    late: PodEviction = Eviction(T + seconds(100), frozenset({RuleTaintReason("a", "RA")}))
    now: PodEviction = Eviction(T, frozenset({GPU0_TAINT}))
    c1 = claim()
    c2 = claim(name="c2", devices=["gpu-1"])
    both = pod(claims=[{"name": "a", "resourceClaimName": "c1"}, {"name": "b", "resourceClaimName": "c2"}])
    claims = {c1.key: ClaimEntry(c1, late), c2.key: ClaimEntry(c2, now)}
    assert pod_eviction(both, claims) == Eviction(T, late.reasons | now.reasons)


def test_pod_eviction_skips_unaffecting_claims() -> None:
    c1 = claim(reserved_for=[("p1", "OTHER")])
    claims = {c1.key: ClaimEntry(c1, Eviction(T, frozenset({GPU0_TAINT})))}
    assert pod_eviction(pod(), claims) is None


# --- Rule counts -------------------------------------------------------------------------------------


def pods_by_key(*pods: Pod, workload_claims: bool = False) -> Consumers:
    members: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for p in pods:
        if p.pod_group_name:
            members.setdefault((p.metadata.namespace, p.pod_group_name), set()).add(p.key)
    return Consumers({p.key: p for p in pods}, members, workload_claims)


def test_pending_pods_count_tolerating_pods_but_not_forever_ones() -> None:
    a = claim(name="ca", reserved_for=[("a", "UA")])
    b = claim(name="cb", devices=["gpu-1"], reserved_for=[("b", "UB")], tolerations=[tolerating(600)])
    c = claim(
        name="cc", namespace="ns2", devices=["gpu-2"], reserved_for=[("c", "UC")], tolerations=[FOREVER]
    )
    pods = pods_by_key(
        pod(name="a", uid="UA", claims=[{"name": "g", "resourceClaimName": "ca"}]),
        pod(name="b", uid="UB", claims=[{"name": "g", "resourceClaimName": "cb"}]),
        pod(name="c", namespace="ns2", uid="UC", claims=[{"name": "g", "resourceClaimName": "cc"}]),
    )
    pending = pending_pods(rule(selector={"pool": "node-1"}), entries(a, b, c), pods)
    assert pending == {("ns1", "a"), ("ns1", "b")}


def test_pending_pods_skip_terminating_and_replaced_pods() -> None:
    c1 = claim()
    the_rule = rule(selector={})
    assert pending_pods(the_rule, entries(c1), pods_by_key(pod(deleting=True))) == set()
    assert pending_pods(the_rule, entries(c1), pods_by_key(pod(uid="U2"))) == set()
    assert pending_pods(the_rule, entries(c1), pods_by_key(pod())) == {("ns1", "p1")}


def test_dry_run_reads_none_as_no_execute_and_honours_empty_effect() -> None:
    dry = rule(effect="None", selector={"driver": DRIVER, "pool": "node-1"})
    plain = claim()
    empty_effect = claim(tolerations=[{"key": "dra.example.com/unhealthy", "operator": "Exists"}])
    pods = pods_by_key(pod())
    assert pending_pods(dry, entries(plain), pods) == {("ns1", "p1")}
    assert pending_pods(dry, entries(empty_effect), pods) == set()


def test_published_and_allocated_device_counts() -> None:
    pools = pools_with(
        resource_slice(),
        resource_slice(name="old", generation=0, devices=["gpu-7"]),
        resource_slice(name="other", pool="node-2", devices=["gpu-0"]),
    )
    shared = entries(claim(), claim(name="c2", reserved_for=[("p2", "U2")]))
    selector = rule(selector={"driver": DRIVER, "pool": "node-1"}).spec.device_selector
    assert published_devices(selector, pools) == 3
    assert allocated_devices(selector, shared) == 2
    nothing = rule(selector={"device": "nothing-here"}).spec.device_selector
    assert published_devices(nothing, pools) == 0
    assert allocated_devices(nothing, shared) == 0
    assert published_devices(None, pools) == 0


# --- A pod's references are read once per evaluation ------------------------------------------------
# A tenant sets how many claims a pod references: reading them again for each claim made every pod
# event, and every rule's status, quadratic in that number.

MANY = 2000


def counted_reference_reads(monkeypatch: pytest.MonkeyPatch) -> list[Pod]:
    """The pods whose references are read, once per reading, from now on."""
    reads: list[Pod] = []
    read = evaluation.referenced_claims

    def counting(pod_: Pod) -> Iterator[tuple[str, bool]]:
        reads.append(pod_)
        return read(pod_)

    monkeypatch.setattr(evaluation, "referenced_claims", counting)
    return reads


def many_claims() -> list[ResourceClaim]:
    return [claim(name=f"c{index}", devices=[f"gpu-{index}"]) for index in range(MANY)]


def pod_using(claims: list[ResourceClaim]) -> Pod:
    return pod(
        claims=[{"name": f"e{index}", "resourceClaimName": c.metadata.name} for index, c in enumerate(claims)]
    )


def test_pod_eviction_reads_the_references_once(monkeypatch: pytest.MonkeyPatch) -> None:
    claims = many_claims()
    reasons = [RuleTaintReason(f"r{index}", f"R{index}") for index in range(MANY)]
    evictions = {
        c.key: ClaimEntry(c, Eviction(T + seconds(index), frozenset({reason})))
        for index, (c, reason) in enumerate(zip(claims, reasons, strict=True))
    }
    user = pod_using(claims)
    reads = counted_reference_reads(monkeypatch)
    assert pod_eviction(user, evictions) == Eviction(T, frozenset(reasons))
    assert len(reads) == 1


def test_due_reasons_read_the_references_once(monkeypatch: pytest.MonkeyPatch) -> None:
    claims = many_claims()
    devices = [f"gpu-{index}" for index in range(MANY)]
    pools = pools_with(resource_slice(devices=devices, taints={device: [taint()] for device in devices}))
    user = pod_using(claims)
    reads = counted_reference_reads(monkeypatch)
    due = due_reasons(user, entries(*claims), pools, [], T)
    assert due == {SliceTaintReason(DRIVER, "node-1", device, 0, "node-1-slice") for device in devices}
    assert len(reads) == 1


def test_pending_pods_read_each_pods_references_once(monkeypatch: pytest.MonkeyPatch) -> None:
    claims = many_claims()
    user = pod_using(claims)
    reads = counted_reference_reads(monkeypatch)
    assert pending_pods(rule(selector={}), entries(*claims), pods_by_key(user)) == {user.key}
    assert len(reads) == 1
