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
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from operators.core.keys import CLAIM, Key
from operators.core.recent import RecentKeys

from .actions.testaction import TEST_ANNOTATION_PREFIX
from .ledger import LedgerIndex
from .models import AllocationResult, DeviceAttachment, ResourceClaim, ResourceClaimStatus
from .policy import PolicyBook

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


def project_claim(body: Mapping[str, Any], keep_test_annotations: bool) -> ResourceClaim:
    """Parse a claim and drop what the attacher never reads (raises pydantic's ValidationError).

    An allocation without binding conditions can never be attached: of such a claim only the
    metadata and the allocation's timestamp are kept, which still tells the records of an
    earlier allocation whether the claim was deallocated or allocated again.
    """
    claim = ResourceClaim.model_validate(body)
    meta = claim.metadata
    annotations = (
        {k: v for k, v in meta.annotations.items() if k.startswith(TEST_ANNOTATION_PREFIX)}
        if keep_test_annotations
        else {}
    )
    slim = meta.model_copy(update={"labels": {}, "annotations": annotations, "owner_references": ()})
    status = claim.status
    if status.allocation is not None and not has_binding_conditions(claim):
        stamp = status.allocation.allocation_timestamp
        status = ResourceClaimStatus(allocation=AllocationResult(allocation_timestamp=stamp))
    return claim.model_copy(update={"metadata": slim, "status": status})


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

    def driver_keys(self, driver: str) -> Iterator[Key]:
        """The claims a change of the driver's policy concerns: those with a device of the driver
        allocated, and those with a record of it (a claim may be queued twice; the queue holds it once)."""
        for claim in self.claims:
            allocation = claim.status.allocation
            if allocation is not None and any(r.driver == driver for r in allocation.devices.results):
                yield claim_key(claim)
        for record in self.records.all():
            if record.spec.driver == driver:
                yield record_claim_key(record)
