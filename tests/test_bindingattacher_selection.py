from __future__ import annotations

from datetime import timedelta

from bindingattacher_builders import (
    ATTACH_FAILED,
    ATTACHED,
    CLAIM_UID,
    FABRIC,
    FOREIGN,
    NIC,
    T0,
    claim,
    condition,
    entry,
    record,
    result,
)

from operators.bindingattacher import ledger
from operators.bindingattacher.identity import (
    AllocationIdentity,
    DeviceKey,
    attachment_key,
    record_key,
)
from operators.bindingattacher.models import DeviceAttachmentStatus, Phase
from operators.bindingattacher.selection import (
    EntryState,
    SelectionRules,
    entry_state,
    foreign_failure,
    scheduler_reads_ready,
    select,
    shown_failure,
)
from operators.bindingattacher.statemachine import IdentityState
from operators.dra.attachments import RECORD_FINALIZER
from operators.dra.pools import DeviceId

RULES = {FABRIC: SelectionRules(driver=FABRIC, ready=True), NIC: SelectionRules(driver=NIC, ready=True)}


def test_selects_only_configured_drivers_with_binding_conditions() -> None:
    the_claim = claim(
        [
            result("f0"),
            result("f1", ready=(), failure=()),
            result("n0", driver=NIC, pool="node-a"),
            result("x0", driver=FOREIGN, pool="node-a"),
        ]
    )
    chosen = select(the_claim, RULES)
    assert [o.result.device for o in chosen.ours] == ["f0", "n0"]
    assert chosen.ours[0].readiness_types == (ATTACHED,)
    assert not chosen.blocked_by_policy
    assert not chosen.missing_allocation_timestamp


def test_pool_filter_and_managed_types() -> None:
    rules = {FABRIC: SelectionRules(driver=FABRIC, ready=True, pools=frozenset({"other"}))}
    assert select(claim([result("f0")]), rules).ours == ()
    managed = {FABRIC: SelectionRules(driver=FABRIC, ready=True, managed_types=frozenset({ATTACHED}))}
    ours = select(claim([result("f0")]), managed).ours
    assert ours[0].readiness_types == (ATTACHED,)
    assert ours[0].failure_types == ()
    unrelated = {FABRIC: SelectionRules(driver=FABRIC, ready=True, managed_types=frozenset({"x.io/other"}))}
    assert select(claim([result("f0")]), unrelated).ours == ()


def test_policy_not_ready_and_missing_timestamp() -> None:
    not_ready = {FABRIC: SelectionRules(driver=FABRIC, ready=False, not_ready_message="unknown entry point")}
    chosen = select(claim([result("f0")]), not_ready)
    assert chosen.ours == ()
    assert [r.device for r, _ in chosen.blocked_by_policy] == ["f0"]
    assert select(claim([result("f0")], timestamp=None), RULES).missing_allocation_timestamp
    assert select(claim(allocated=False), RULES) == select(claim(allocated=False), {})


def test_entry_states_for_adoption() -> None:
    base = [result("f0")]
    ours = select(claim(base), RULES).ours[0]
    assert entry_state(claim(base), ours) is EntryState.ABSENT
    ready = claim(base, devices=[entry("f0", [condition(ATTACHED, "True", "Attached")])])
    assert entry_state(ready, ours) is EntryState.READY
    failed = claim(
        base,
        devices=[
            entry(
                "f0",
                [condition(ATTACHED, "False", "AttachFailed"), condition(ATTACH_FAILED, "True", "X", "m")],
            )
        ],
    )
    assert entry_state(failed, ours) is EntryState.FAILED
    failure = shown_failure(failed, ours)
    assert failure is not None
    assert (failure.reason, failure.message, failure.condition_type) == ("X", "m", ATTACH_FAILED)
    progress = claim(base, devices=[entry("f0", [condition(ATTACHED, "False")])])
    assert entry_state(progress, ours) is EntryState.OTHER


def test_foreign_failure_counts_other_writers_only() -> None:
    results = [result("f0"), result("x0", driver=FOREIGN, pool="node-a")]
    ours = select(claim(results), RULES).ours
    own_failure = claim(results, devices=[entry("f0", [condition(ATTACH_FAILED, "True")])])
    assert not foreign_failure(own_failure, ours)
    other = claim(
        results,
        devices=[entry("x0", [condition(f"{FOREIGN}/failed", "True")], driver=FOREIGN, pool="node-a")],
    )
    assert foreign_failure(other, ours)
    # Failure lists of results without binding conditions are ignored, as the scheduler does.
    silent = [result("f0"), result("x0", driver=FOREIGN, pool="node-a", ready=())]
    other_silent = claim(
        silent,
        devices=[entry("x0", [condition(f"{FOREIGN}/failed", "True")], driver=FOREIGN, pool="node-a")],
    )
    assert not foreign_failure(other_silent, select(claim(silent), RULES).ours)


def test_the_scheduler_reads_the_first_entry_of_a_device_whatever_its_share() -> None:
    def shared(share: str, *conditions: dict[str, object]) -> dict[str, object]:
        return {**entry("f0", list(conditions)), "shareID": share}

    ready, failed = condition(ATTACHED, "True", "Attached"), condition(ATTACH_FAILED, "True", "AttachFailed")
    shares = [result("f0", share_id="a"), result("f0", share_id="b")]
    ours = select(claim(shares), RULES).ours
    assert scheduler_reads_ready(claim(shares, devices=[shared("a", ready), shared("b", failed)]), ours)
    assert not scheduler_reads_ready(claim(shares, devices=[shared("b", failed), shared("a", ready)]), ours)
    assert not scheduler_reads_ready(claim(shares, devices=[shared("a", condition(ATTACHED, "False"))]), ours)
    # Without shares every device has its own entry: one not ready is read as such.
    two = [result("f0"), result("f1")]
    both = claim(two, devices=[entry("f0", [ready]), entry("f1", [ready])])
    assert scheduler_reads_ready(both, select(both, RULES).ours)
    one = claim(two, devices=[entry("f0", [ready]), entry("f1", [failed])])
    assert not scheduler_reads_ready(one, select(one, RULES).ours)
    assert not scheduler_reads_ready(claim(two), ())


def test_attachment_key_is_stable_and_distinguishes_allocations() -> None:
    identity = AllocationIdentity.of(CLAIM_UID, T0)
    f0 = DeviceKey(DeviceId(FABRIC, "fabric-pool", "f0"))
    key = attachment_key(identity, f0)
    assert key.startswith("da-")
    assert len(key) == 43
    same = attachment_key(AllocationIdentity.of(CLAIM_UID, T0.replace(microsecond=500)), f0)
    assert same == key  # the key uses the one-second serialized form
    later = attachment_key(AllocationIdentity.of(CLAIM_UID, T0 + timedelta(seconds=1)), f0)
    assert later != key
    shared = attachment_key(identity, DeviceKey(f0.device, "share-1"))
    assert shared != key
    # Pool names with "/" cannot collide with device names thanks to the JSON encoding.
    assert attachment_key(identity, DeviceKey(DeviceId(FABRIC, "a/b", "c"))) != attachment_key(
        identity, DeviceKey(DeviceId(FABRIC, "a", "b/c"))
    )
    assert record_key(record()) == key


def test_identity_state_of_records() -> None:
    the_record = record()
    assert ledger.identity_state(the_record, claim([result("f0")])) is IdentityState.LIVE
    assert ledger.identity_state(the_record, None) is IdentityState.CLAIM_DELETED
    assert (
        ledger.identity_state(the_record, claim([result("f0")], uid="other")) is IdentityState.CLAIM_DELETED
    )
    assert ledger.identity_state(the_record, claim(allocated=False)) is IdentityState.DEALLOCATED
    assert ledger.identity_state(the_record, claim([result("f1")])) is IdentityState.DEALLOCATED
    later = claim([result("f0")], timestamp=T0 + timedelta(seconds=40))
    assert ledger.identity_state(the_record, later) is IdentityState.REALLOCATED


def test_manifest_shape() -> None:
    body = ledger.manifest(record(status=DeviceAttachmentStatus(phase=Phase.ATTACHING, attempts=1)))
    assert body["metadata"]["finalizers"] == [RECORD_FINALIZER]
    assert body["metadata"]["labels"][ledger.LABEL_CLAIM_UID] == CLAIM_UID
    assert body["spec"]["allocationTimestamp"] == "2026-08-01T10:00:00Z"
    assert body["spec"]["node"] == "node-a"
    assert body["spec"]["nodeSource"] == "Allocation"
    assert "shareID" not in body["spec"]
    assert body["status"] == {
        "phase": "Attaching",
        "attempts": 1,
        "detachAttempts": 0,
        "reported": "None",
        "adopted": False,
        "actionMessage": "",
        "lastError": "",
    }


def test_device_serialization_across_claims() -> None:
    first = record(
        claim([result("f0")], uid="claim-a"), status=DeviceAttachmentStatus(phase=Phase.DETACHING, attempts=1)
    )
    second = record(claim([result("f0")], uid="claim-b", timestamp=T0 + timedelta(seconds=5)))
    index = ledger.LedgerIndex([first, second])
    assert index.blocking(second) == first
    assert index.blocking(first) is None
    index.put(first.model_copy(update={"status": DeviceAttachmentStatus(phase=Phase.DETACHED)}))
    assert index.blocking(second) is None
    index.remove(first.metadata.name)
    assert [r.metadata.name for r in index.for_claim("claim-b")] == [second.metadata.name]
    assert index.for_claim("claim-a") == []
    assert len(index) == 1


def test_waiting_records_are_served_oldest_first_and_admin_access_never_waits() -> None:
    older = record(claim([result("f0")], uid="claim-a"))
    newer = record(claim([result("f0")], uid="claim-b", timestamp=T0 + timedelta(seconds=5)))
    admin = record(
        claim([result("f0", admin=True)], uid="claim-c"), status=DeviceAttachmentStatus(phase=Phase.PENDING)
    )
    index = ledger.LedgerIndex([older, newer, admin])
    assert index.blocking(newer) == older
    assert index.blocking(older) is None
    assert index.blocking(admin) is None


def test_record_counts() -> None:
    records = [
        record(claim([result("f0")], uid="a"), status=DeviceAttachmentStatus(phase=Phase.ATTACHED)),
        record(claim([result("f0")], uid="b"), status=DeviceAttachmentStatus(phase=Phase.ATTACHED)),
        record(claim([result("f0")], uid="c"), status=DeviceAttachmentStatus(phase=Phase.DETACHED)),
    ]
    assert ledger.record_counts(records, "fabric") == {
        "pending": 0,
        "attaching": 0,
        "attached": 2,
        "failed": 0,
        "detaching": 0,
    }
    assert ledger.record_counts(records, "other")["attached"] == 0
