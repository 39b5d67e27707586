"""The attacher's ``ClusterCache``: its in-memory view of what it watches, read by every sync.

Claim projections (:class:`ClaimCache`), the ledger records (:class:`~.ledger.LedgerIndex`) and
the policies with what their last evaluation decided (:class:`~.policy.PolicyBook`), fed by the
watch callbacks and by the answers of our own writes; and the work-queue keys.

Concurrency contract: watch callbacks and workers run on one event loop. Callbacks replace
entries synchronously; a worker reads a snapshot, awaits its API calls, and writes the
objects the API server returned back with :meth:`ClaimCache.put` / :func:`put_record`. Both
keep the *newer* of two versions (by ``resourceVersion``), so a watch event that is older
than our own write never rolls the cache back, and our write never waits for the watch.

Claims are reduced to a projection (spec §15.3): the typed model already keeps only the
fields the attacher reads; labels are dropped and annotations are kept only when they steer
the Test action (``test.dra-operators.io/*``) and test actions are enabled; a claim whose
allocation has no binding conditions keeps no results, consumers or device status.

The claim watch is cluster-wide, and any driver may write up to the object size limit into the
``data`` of its ``status.devices`` entries, so only the entries of *configured* drivers (those a
policy names, and those of the claim's records) are kept. Of another driver's result with binding
conditions only a True failure condition is kept, which is all that §9 reads of it; a claim with
no result of a configured driver keeps its metadata and allocation timestamp. What a projection
left out is named in ``status.drivers_left_out``: once one of those drivers is configured, the
claim lacks what that driver shows (:meth:`ClusterCache.projected_without_a_driver`) and is read
again before anything is decided on it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any

from operators.core.keys import CLAIM, Key
from operators.core.models import body_metadata
from operators.core.recent import RecentKeys

from .actions.testaction import TEST_ANNOTATION_PREFIX
from .identity import DeviceKey
from .ledger import LedgerIndex
from .models import (
    AllocatedDeviceStatus,
    AllocationResult,
    DeviceAttachment,
    DeviceRequestAllocationResult,
    ResourceClaim,
    ResourceClaimStatus,
)
from .policy import PolicyBook
from .selection import TRUE, find_entry

POLICY = "policy"
"""The work-queue kind of a DeviceAttachPolicy (cluster-scoped: no namespace)."""


def record_claim_key(record: DeviceAttachment) -> Key:
    """The work key of the claim a ledger record is for.

    Claim keys carry the claim's UID (``Key(CLAIM, namespace, name, uid)``): the attacher's work is
    about one incarnation of a claim. The records of a deleted claim must still be detached and
    removed after a claim of the same name was created again, and the new claim must never be
    taken for the old one (its allocation, hence its attachments, are new).
    """
    ref = record.spec.claim
    return Key(CLAIM, ref.namespace, ref.name, ref.uid)


def claim_key(claim: ResourceClaim) -> Key:
    """The work key of a cached claim, the same as :func:`record_claim_key` of its records."""
    meta = claim.metadata
    return Key(CLAIM, meta.namespace, meta.name, meta.uid)


def policy_key(name: str) -> Key:
    return Key(POLICY, "", name)


def newer(candidate: str, current: str) -> bool:
    """Whether ``candidate`` is at least as new as ``current``.

    resourceVersions are opaque by contract, but kube-apiserver backed by etcd hands out
    increasing integers; when either is not an integer the candidate wins, as a plain
    last-writer-wins cache would do.
    """
    try:
        return int(candidate) >= int(current)
    except ValueError:
        return True


def project_claim(
    body: Mapping[str, Any], keep_test_annotations: bool, configured_drivers: Collection[str]
) -> ResourceClaim:
    """Parse a claim and drop what the attacher never reads (raises pydantic's ValidationError).

    An allocation without binding conditions can never be attached: of such a claim only the
    metadata and the allocation's timestamp are kept, which still tells the records of an
    earlier allocation whether the claim was deallocated or allocated again. The same holds for
    a claim none of whose results is of one of ``configured_drivers``.
    """
    claim = ResourceClaim.model_validate(body)
    meta = claim.metadata
    annotations = (
        {k: v for k, v in meta.annotations.items() if k.startswith(TEST_ANNOTATION_PREFIX)}
        if keep_test_annotations
        else {}
    )
    slim = meta.model_copy(update={"labels": {}, "annotations": annotations, "owner_references": ()})
    return claim.model_copy(update={"metadata": slim, "status": _project_status(claim, configured_drivers)})


def _project_status(claim: ResourceClaim, configured: Collection[str]) -> ResourceClaimStatus:
    status = claim.status
    allocation = status.allocation
    if allocation is None:
        return status
    stamp_only = AllocationResult(allocation_timestamp=allocation.allocation_timestamp)
    attachable = [r for r in allocation.devices.results if r.binding_conditions]
    if not attachable:
        return ResourceClaimStatus(allocation=stamp_only)
    left_out = frozenset(r.driver for r in attachable if r.driver not in configured)
    if not any(r.driver in configured for r in allocation.devices.results):
        return ResourceClaimStatus(allocation=stamp_only, drivers_left_out=left_out)
    kept = [e for e in status.devices if e.driver in configured]
    for result in attachable:
        if result.driver not in configured:
            kept.extend(_failure_shown(claim, result))
    return status.model_copy(update={"devices": tuple(kept), "drivers_left_out": left_out})


def _failure_shown(
    claim: ResourceClaim, result: DeviceRequestAllocationResult
) -> list[AllocatedDeviceStatus]:
    """Another driver's entry reduced to the flag §9 reads: one True failure condition of the
    result, without message or data; nothing when it shows none."""
    shown = find_entry(claim, DeviceKey.of(result))
    if shown is None:
        return []
    for condition in shown.conditions:
        if condition.status == TRUE and condition.type in result.binding_failure_conditions:
            flag = condition.model_copy(update={"message": ""})
            return [shown.model_copy(update={"conditions": (flag,), "data": None})]
    return []


def has_binding_conditions(claim: ResourceClaim) -> bool:
    allocation = claim.status.allocation
    return allocation is not None and any(r.binding_conditions for r in allocation.devices.results)


DELETED_CLAIM_MEMORY = 10_000
"""How many deleted claims' UIDs the cache refuses to take back (about 1 MiB)."""


class ClaimCache:
    def __init__(self) -> None:
        self._by_uid: dict[str, ResourceClaim] = {}
        self._by_name: dict[tuple[str, str], str] = {}
        self._deleted = RecentKeys(DELETED_CLAIM_MEMORY)

    def __len__(self) -> int:
        return len(self._by_uid)

    def get(self, uid: str) -> ResourceClaim | None:
        return self._by_uid.get(uid)

    def named(self, namespace: str, name: str) -> ResourceClaim | None:
        uid = self._by_name.get((namespace, name))
        return self._by_uid.get(uid) if uid is not None else None

    def put(self, claim: ResourceClaim) -> bool:
        """Store ``claim`` unless a newer version of it is cached or it was deleted; returns whether
        it was stored."""
        uid = claim.metadata.uid
        if uid in self._deleted:
            return False
        current = self._by_uid.get(uid)
        if current is not None and not newer(
            claim.metadata.resource_version, current.metadata.resource_version
        ):
            return False
        self._by_uid[uid] = claim
        self._by_name[(claim.metadata.namespace, claim.metadata.name)] = uid
        return True

    def remove(self, uid: str) -> ResourceClaim | None:
        """Forget a deleted claim for good. A copy read before the deletion (a GET or an apply's
        answer that raced the watch's DELETED event) would otherwise bring it back for ever, and
        its records would be driven against a claim that no longer exists; a UID is never reused."""
        self._deleted.add(uid)
        claim = self._by_uid.pop(uid, None)
        if claim is not None:
            name = (claim.metadata.namespace, claim.metadata.name)
            if self._by_name.get(name) == uid:
                del self._by_name[name]
        return claim

    def __iter__(self) -> Iterator[ResourceClaim]:
        return iter(list(self._by_uid.values()))


def put_record(index: LedgerIndex, record: DeviceAttachment) -> bool:
    """Store a ledger record unless the index holds a newer version of it."""
    current = index.get(record.metadata.name)
    if current is not None and not newer(record.metadata.resource_version, current.metadata.resource_version):
        return False
    index.put(record)
    return True


class ClusterCache:
    """What the attacher watches: claims, ledger records and policies."""

    def __init__(self) -> None:
        self.claims = ClaimCache()
        self.records = LedgerIndex()
        self.policies = PolicyBook()

    def configured_drivers(self, claim_uid: str) -> frozenset[str]:
        """The drivers whose entries a claim's projection keeps: those a policy names, whatever
        its state, and those of the claim's records, which are driven on whatever their policy."""
        records = self.records.for_claim(claim_uid)
        return frozenset(self.policies.drivers()).union(r.spec.driver for r in records)

    def project(self, body: Mapping[str, Any], keep_test_annotations: bool) -> ResourceClaim:
        uid = str(body_metadata(body).get("uid") or "")
        return project_claim(body, keep_test_annotations, self.configured_drivers(uid))

    def projected_without_a_driver(self, claim: ResourceClaim) -> bool:
        """Whether the claim was projected before one of its drivers was configured: it lacks what
        that driver shows (readiness another instance wrote, a failure), so no decision may be
        taken on it before it is read again."""
        left_out = claim.status.drivers_left_out
        return bool(left_out) and not left_out.isdisjoint(self.configured_drivers(claim.metadata.uid))

    def driver_keys(self, driver: str) -> Iterator[Key]:
        """The claims a change of the driver's policy concerns: those with a device of the driver
        allocated (or left out of their projection), and those with a record of it (a claim may be
        queued twice; the queue holds it once)."""
        for claim in self.claims:
            allocation = claim.status.allocation
            if driver in claim.status.drivers_left_out or (
                allocation is not None and any(r.driver == driver for r in allocation.devices.results)
            ):
                yield claim_key(claim)
        for record in self.records.all():
            if record.spec.driver == driver:
                yield record_claim_key(record)
