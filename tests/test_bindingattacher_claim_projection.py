"""What the claim watch keeps of a claim (spec §15.3), through the controller's watch callbacks.

The watch is cluster-wide, so every claim of every driver passes through it: of ``status.devices``
only the entries of configured drivers may stay in memory, since another driver may write up to
the object size limit into its entries' ``data``. Of another driver's result with binding
conditions, only whether it shows a failure is kept. A claim seen before its driver was configured
lacks that driver's entries: it is read again before anything is decided on it.
"""

from __future__ import annotations

import pickle
from datetime import UTC, datetime
from typing import Any

import pytest
from bindingattacher_builders import (
    ATTACH_FAILED,
    ATTACH_TIMEOUT,
    ATTACHED,
    CLAIM_UID,
    FABRIC,
    FOREIGN,
    NIC,
    attacher,
    claim,
    claim_body,
    condition,
    entry,
    record,
    result,
)
from runtime_support import drain
from test_bindingattacher_pipeline import POLICY, ClusterServer

from operators.bindingattacher.cache import POLICY as POLICY_KIND
from operators.bindingattacher.cache import ClusterCache, claim_key
from operators.bindingattacher.models import DeviceAttachment, Phase, ResourceClaim
from operators.bindingattacher.operator import DEFINITION
from operators.bindingattacher.selection import foreign_failure
from operators.core.keys import CLAIM, Key
from operators.core.namespace import Presence

DATA_BYTES = 10 * 1024
"""What another driver keeps in an entry's ``data`` here: opaque to the attacher."""


def foreign_result(device: str) -> dict[str, Any]:
    return result(device, driver=FOREIGN, pool="foreign-pool")


def foreign_entry(device: str, *, failed: bool = False) -> dict[str, Any]:
    conditions = [
        condition(f"{FOREIGN}/ready", "False", "Preparing"),
        condition(f"{FOREIGN}/failed", "True" if failed else "False", "Broken" if failed else "Fine"),
    ]
    data = {"blob": device + "x" * DATA_BYTES}
    return entry(device, conditions, driver=FOREIGN, pool="foreign-pool") | {"data": data}


def fabric_entry(device: str, attached: str = "False") -> dict[str, Any]:
    conditions = [condition(ATTACHED, attached), condition(ATTACH_FAILED, "False")]
    return entry(device, conditions) | {"data": {"fabricPort": f"port-{device}"}}


def watched(body: dict[str, Any]) -> ResourceClaim:
    """What a controller that saw the fabric policy and then ``body`` caches of the claim."""
    controller = attacher(ClusterServer(body), Presence.PRESENT)
    controller.upsert_policy(POLICY)
    controller.upsert_claim(body)
    cached = controller.shared.cache.claims.get(CLAIM_UID)
    assert cached is not None
    return cached


def test_no_entry_of_a_driver_without_a_policy_is_kept() -> None:
    body = claim_body(
        [result("f0"), foreign_result("x0"), foreign_result("x1")],
        devices=[fabric_entry("f0"), foreign_entry("x0"), foreign_entry("x1")],
    )
    cached = watched(body)
    assert [e.device for e in cached.status.devices] == ["f0"]
    allocation = cached.status.allocation
    assert allocation is not None
    assert [r.device for r in allocation.devices.results] == ["f0", "x0", "x1"]


def test_the_configured_drivers_entries_are_kept_as_shown() -> None:
    shown = [fabric_entry("f0", attached="True"), fabric_entry("f1")]
    body = claim_body(
        [result("f0"), result("f1"), foreign_result("x0")], devices=[*shown, foreign_entry("x0")]
    )
    cached = watched(body)
    assert cached.status.devices == ResourceClaim.model_validate(claim_body(devices=shown)).status.devices


@pytest.mark.parametrize("failed", [True, False])
def test_of_another_drivers_result_only_whether_it_shows_a_failure_is_kept(failed: bool) -> None:
    body = claim_body([result("f0"), foreign_result("x0")], devices=[foreign_entry("x0", failed=failed)])
    cached = watched(body)
    assert foreign_failure(cached, ()) is failed, "the failure stops new attaches to the allocation (§9)"
    assert all(e.data is None for e in cached.status.devices)
    assert all(c.status == "True" for e in cached.status.devices for c in e.conditions)


def test_a_claim_without_a_result_of_a_configured_driver_keeps_only_its_metadata() -> None:
    body = claim_body([foreign_result("x0")], devices=[foreign_entry("x0", failed=True)])
    cached = watched(body)
    allocation = cached.status.allocation
    assert allocation is not None
    assert (allocation.devices.results, allocation.node_selector) == ((), None)
    assert (cached.status.devices, cached.status.reserved_for) == ((), ())
    assert cached.metadata.uid == CLAIM_UID


def test_three_other_drivers_entries_cost_the_projection_almost_nothing() -> None:
    others = [foreign_result(f"x{i}") for i in range(3)]
    body = claim_body([result("f0"), *others], devices=[foreign_entry(f"x{i}") for i in range(3)])
    everything = ResourceClaim.model_validate(body)
    cached = watched(body)
    assert len(pickle.dumps(everything)) > 3 * DATA_BYTES
    assert len(pickle.dumps(cached)) < 4 * 1024


def test_policies_and_records_are_listed_before_claims() -> None:
    # At start the claims are projected as the listing delivers them: with every policy known
    # by then, none of them has to be read again.
    order = [watch.plural for watch in DEFINITION.watches]
    assert order.index("deviceattachpolicies") < order.index("resourceclaims")
    assert order.index("deviceattachments") < order.index("resourceclaims")


NIC_POLICY = {
    "metadata": {"name": "nic", "uid": "nic-policy-uid", "generation": 1, "resourceVersion": "1"},
    "spec": {"driver": NIC, "action": {"kind": "Noop"}},
}


@pytest.mark.parametrize("nic_configured", [False, True], ids=["metadata-only", "entries-left-out"])
async def test_a_claim_seen_before_its_drivers_policy_is_read_again_before_a_decision(
    nic_configured: bool,
) -> None:
    """A previous instance attached f0 and the claim shows it ready: adopted, not attached again.
    The claim was projected before the fabric policy came: as its metadata only, or, with a
    result of another configured driver (nic), with its results but without fabric's entries."""
    shown = [condition(ATTACHED, "True", "Attached"), condition(ATTACH_FAILED, "False")]
    ready = entry("f0", [*shown, condition(ATTACH_TIMEOUT, "False")])
    now = datetime.now(UTC).replace(microsecond=0)
    body = claim_body(
        [result("f0"), result("n0", driver=NIC, ready=(), failure=())], timestamp=now, devices=[ready]
    )
    server = ClusterServer(body)
    controller = attacher(server, Presence.PRESENT)
    if nic_configured:
        controller.upsert_policy(NIC_POLICY)
        await controller.sync(Key(POLICY_KIND, "", "nic"))
    controller.upsert_claim(body)
    seen = controller.shared.cache.claims.get(CLAIM_UID)
    assert seen is not None
    assert seen.status.devices == ()

    controller.upsert_policy(POLICY)
    await controller.sync(Key(POLICY_KIND, "", "fabric"))
    runtime = controller.runtime
    queued = await drain(runtime.queue)
    key = Key(CLAIM, "team-a", "trainer-0-gpu", CLAIM_UID)
    assert key in queued, "the driver's new policy concerns the claim"

    await controller.sync(key)
    assert len(server.records) == 1, "f0 has a record"
    (stored,) = (DeviceAttachment.model_validate(r) for r in server.records.values())
    assert (stored.status.phase, stored.status.adopted) == (Phase.ATTACHED, True), "adopted"
    assert controller.shared.calls.counts() == {}, "no second attach of an attached device"
    assert ("apply", "trainer-0-gpu") not in server.writes
    cached = controller.shared.cache.claims.get(CLAIM_UID)
    assert cached is not None
    assert [e.device for e in cached.status.devices] == ["f0"]


def test_a_records_driver_counts_as_configured_while_no_policy_names_it() -> None:
    # A policy deleted by force leaves its records behind; they are still driven (spec §5), and
    # a claim they are observed against must show what their driver shows.
    caches = ClusterCache()
    caches.records.put(record(claim([result("f0")])))
    kept = caches.project(claim_body([result("f0")], devices=[fabric_entry("f0", "True")]), False)
    assert [e.device for e in kept.status.devices] == ["f0"]
    assert not caches.projected_without_a_driver(kept)


def test_a_claim_is_stale_once_a_driver_it_left_out_is_configured() -> None:
    caches = ClusterCache()
    kept = caches.project(claim_body([result("f0")], devices=[fabric_entry("f0")]), False)
    assert caches.claims.put(kept)
    assert kept.status.drivers_left_out == {FABRIC}
    assert not caches.projected_without_a_driver(kept)
    caches.policies.observe(POLICY)
    assert caches.projected_without_a_driver(kept)
    assert list(caches.driver_keys(FABRIC)) == [claim_key(kept)]
