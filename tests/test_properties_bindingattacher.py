"""Properties of the binding attacher's pure selection and naming (spec bindingattacher.md).

Examples per property (the ``unit`` profile; ``thorough`` runs ten times as many):

- ``test_selection_takes_only_results_a_ready_policy_manages``: 150
- ``test_keys_and_rule_names_are_valid_and_stable``: 200
"""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st
from strategies import DRIVERS, POOLS, Body, claim_bodies, dns_labels, examples, rfc3339, slice_sets, uids

from operators.bindingattacher.identity import AllocationIdentity, DeviceKey, attachment_key, taint_rule_name
from operators.bindingattacher.models import ResourceClaim
from operators.bindingattacher.selection import SelectionRules, select
from operators.core.conditions import parse_time
from operators.core.models import parse
from operators.dra.pools import DeviceId

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
CONDITIONS = ("dra.example.com/Attached", "dra.example.com/Failed", "Ready")


@st.composite
def claims_and_rules(draw: st.DrawFn) -> tuple[ResourceClaim, dict[str, SelectionRules]]:
    slices = draw(slice_sets(max_pools=2, max_devices=3))
    body: Body = draw(claim_bodies("demo", "gpu-claim", slices=slices, allocated=True))
    if draw(st.booleans()):
        body["status"]["allocation"]["allocationTimestamp"] = draw(rfc3339())
    rules = {
        driver: SelectionRules(
            driver=driver,
            ready=draw(st.booleans()),
            pools=frozenset(draw(st.lists(dns_labels(*POOLS), max_size=2))),
            managed_types=frozenset(draw(st.lists(st.sampled_from(CONDITIONS), max_size=2))),
        )
        for driver in draw(st.lists(st.sampled_from(DRIVERS), unique=True))
    }
    return parse(ResourceClaim, body), rules


@examples(150)
@given(claims_and_rules())
def test_selection_takes_only_results_a_ready_policy_manages(
    case: tuple[ResourceClaim, dict[str, SelectionRules]],
) -> None:
    """Spec bindingattacher §11 (selection): a result is ours only when a Ready policy of its driver
    covers its pool and manages one of its binding conditions, and only when the allocation has a
    timestamp; the types taken are the managed ones, in the result's order; a result that would be
    ours under a policy that is not Ready is reported as blocked instead."""
    claim, rules = case
    selection = select(claim, rules)
    allocation = claim.status.allocation
    assert allocation is not None
    if selection.missing_allocation_timestamp:
        assert allocation.allocation_timestamp is None
        assert not selection.ours
        assert not selection.blocked_by_policy
        return
    for ours in selection.ours:
        policy = rules[ours.result.driver]
        assert policy.ready
        assert not policy.pools or ours.result.pool in policy.pools
        assert ours.result.binding_conditions
        assert ours.readiness_types == tuple(t for t in ours.result.binding_conditions if policy.manages(t))
        assert ours.failure_types == tuple(
            t for t in ours.result.binding_failure_conditions if policy.manages(t)
        )
        assert ours.readiness_types or ours.failure_types
    for result, policy in selection.blocked_by_policy:
        assert not policy.ready
        assert result.driver == policy.driver
    if selection.ours or selection.blocked_by_policy:
        assert allocation.allocation_timestamp is not None


@examples(200)
@given(
    uids(),
    rfc3339(),
    st.sampled_from(DRIVERS),
    dns_labels(*POOLS),
    dns_labels("gpu-0"),
    st.one_of(st.none(), uids()),
)
def test_keys_and_rule_names_are_valid_and_stable(
    claim_uid: str, timestamp: str, driver: str, pool: str, device: str, share_id: str | None
) -> None:
    """Spec bindingattacher §7 (identities) and §14 (taint rules): the attachment key and the taint
    rule name are DNS labels whatever the pool and device are called, and the key is the same for a
    timestamp read back from its stored form."""
    identity = AllocationIdentity.of(claim_uid, parse_time(timestamp))
    key = DeviceKey(DeviceId(driver, pool, device), share_id or "")
    name = attachment_key(identity, key)
    assert len(name) <= 63
    assert _DNS_LABEL.fullmatch(name)
    assert attachment_key(AllocationIdentity(claim_uid, timestamp), key) == name
    rule = taint_rule_name(key.device)
    assert len(rule) <= 63
    assert _DNS_LABEL.fullmatch(rule)


def test_names_kept_in_the_cluster_do_not_change_between_releases() -> None:
    """A DeviceAttachment record and a failure DeviceTaintRule are found again by the name these
    hashes give: a release that computed another name would lose track of every record and taint an
    older one wrote. The values were computed by the release that introduced them."""
    identity = AllocationIdentity("6b3a0c1e-0000-4000-8000-000000000001", "2026-08-01T10:00:00Z")
    share = DeviceKey(DeviceId("fabric.example.com", "pool/a", "f0"), "s1")
    assert attachment_key(identity, share) == "da-5dffd8bf48b508b765493fcdef02fbdc32f51279"
    assert taint_rule_name(share.device) == "dra-operators-5583148933ca9a55"
