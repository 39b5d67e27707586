"""The ``DeviceAttachment`` ledger (spec §8): records, manifests and the in-memory index.

The API server erases ``status.devices`` on deallocation and nothing of a deleted claim
remains, so what was attached must be remembered somewhere that outlives both: one namespaced
record per attachment identity, named by its ``attachmentKey`` and protected by the finalizer
``dra-operators.io/detach``. The record is created (with its first phase) before the attach
call it describes, so it doubles as an intent log.

:class:`LedgerIndex` is the in-memory view the reconciler consults: records by name, by claim
UID (to find what a claim had after it is gone) and by device key (to serialize attaches of one
physical device across claims, §13.3). It is plain data; the runtime feeds it from the watch.

The record writes are :class:`~operators.core.plan.Plan` steps built here and carried out by
the API layer (:class:`~.kube.LedgerWriter`), always against the record's freshest version:

* create (:func:`create_plan`): one POST carrying the first phase (the CRD has no status
  subresource, so the intent is durable in one write);
* update (:func:`update_plan`): a PUT of the whole object with its ``resourceVersion``, so a
  decision taken on a stale record turns into a conflict;
* finish: one PUT that removes the finalizer (:func:`release_plan`, which also stores the final
  status), then a DELETE with a UID precondition (:func:`delete_plan`).

A write built on a stale record (a conflict, an unexpected "already exists", an update of a
record that is gone) ends its plan with a :class:`~operators.core.reconcile.Requeue`: the
record is re-read and the claim reconciled again from it, instead of retrying a write built on
stale data.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar

from operators.core.client import ApiError
from operators.core.models import ObjectMeta
from operators.core.plan import Create, Delete, Plan, Replace
from operators.core.reconcile import Requeue
from operators.dra.attachments import LABEL_POLICY, RECORD_FINALIZER, RECORDS

from .identity import AllocationIdentity, DeviceKey, attachment_key, record_key
from .models import (
    API_VERSION,
    ClaimReference,
    DeviceAttachment,
    DeviceAttachmentSpec,
    DeviceAttachmentStatus,
    DeviceRequestAllocationResult,
    Phase,
    PolicyReference,
    ResourceClaim,
)
from .selection import NodeResolution
from .statemachine import IdentityState

KIND = "DeviceAttachment"
FORGET_ANNOTATION = "dra-operators.io/forget"
LABEL_CLAIM_UID = "dra-operators.io/claim-uid"
LABEL_DRIVER = "dra-operators.io/driver"

_K = TypeVar("_K")

HOLDING_PHASES = frozenset({Phase.ATTACHING, Phase.ATTACHED, Phase.FAILED, Phase.DETACHING})
"""Phases in which a record may hold its device in the backend (from first attach to detach)."""


def new_record(
    *,
    claim: ResourceClaim,
    result: DeviceRequestAllocationResult,
    allocation_timestamp: datetime,
    policy_name: str,
    policy_uid: str,
    policy_generation: int,
    deadline: datetime,
    namespace: str,
    status: DeviceAttachmentStatus,
    node: NodeResolution | None = None,
) -> DeviceAttachment:
    identity = AllocationIdentity.of(claim.metadata.uid, allocation_timestamp)
    key = attachment_key(identity, DeviceKey.of(result))
    spec = DeviceAttachmentSpec(
        claim=ClaimReference(
            namespace=claim.metadata.namespace, name=claim.metadata.name, uid=claim.metadata.uid
        ),
        allocation_timestamp=allocation_timestamp,
        driver=result.driver,
        pool=result.pool,
        device=result.device,
        share_id=result.share_id,
        request=result.request,
        admin_access=bool(result.admin_access),
        binding_conditions=result.binding_conditions,
        binding_failure_conditions=result.binding_failure_conditions,
        node=node.node if node is not None else None,
        node_source=node.source if node is not None else None,
        policy=PolicyReference(name=policy_name, uid=policy_uid, generation=policy_generation),
        deadline=deadline,
    )
    meta = ObjectMeta(
        name=key,
        namespace=namespace,
        finalizers=(RECORD_FINALIZER,),
        labels={LABEL_CLAIM_UID: claim.metadata.uid, LABEL_DRIVER: result.driver, LABEL_POLICY: policy_name},
    )
    return DeviceAttachment(metadata=meta, spec=spec, status=status)


def with_node(record: DeviceAttachment, node: NodeResolution) -> DeviceAttachment:
    """Record a resolved node; it is set once and never changes (the CRD enforces it too)."""
    if record.spec.node_source is not None:
        return record
    spec = record.spec.model_copy(update={"node": node.node, "node_source": node.source})
    return record.model_copy(update={"spec": spec})


def manifest(record: DeviceAttachment) -> dict[str, Any]:
    """The create body: the status is stored in the same call (the CRD has no status subresource)."""
    meta = record.metadata
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": meta.name,
            "namespace": meta.namespace,
            "finalizers": list(meta.finalizers),
            "labels": dict(meta.labels),
        },
        "spec": record.spec.model_dump(mode="json", by_alias=True, exclude_none=True),
        "status": status_body(record.status),
    }


def stored_body(record: DeviceAttachment, finalizers: Iterable[str]) -> dict[str, Any]:
    """The whole record for a PUT: its ``uid`` and ``resourceVersion`` are the preconditions."""
    body = manifest(record)
    meta = record.metadata
    body["metadata"].update(
        {
            "resourceVersion": meta.resource_version,
            "uid": meta.uid,
            "finalizers": list(finalizers),
            "annotations": dict(meta.annotations),
        }
    )
    return body


def record_path(namespace: str, name: str) -> str:
    return f"{RECORDS.path(namespace=namespace)}/{name}"


def _stale(name: str, why: str, *statuses: int) -> Callable[[ApiError], Requeue | None]:
    """Answers that mean the write was built on a stale record: the sync starts again from it."""

    def ends(err: ApiError) -> Requeue | None:
        return Requeue(0.0, f"record {name}: {why} ({err.reason})") if err.status in statuses else None

    return ends


def create_plan(record: DeviceAttachment, namespace: str) -> Plan:
    """POST the record with its first phase; a namesake means the index is behind (409)."""
    name = record.metadata.name
    create = Create(
        RECORDS.path(namespace=namespace),
        manifest(record),
        field_manager=True,
        ends=_stale(name, "exists already", 409),
    )
    return Plan((create,))


def update_plan(record: DeviceAttachment, namespace: str) -> Plan:
    """PUT the record over the version it was decided on; changed (409) or gone (404) meanwhile
    is stale."""
    name = record.metadata.name
    body = stored_body(record, record.metadata.finalizers)
    return Plan(
        (Replace(record_path(namespace, name), body, ends=_stale(name, "changed meanwhile", 404, 409)),)
    )


def release_plan(record: DeviceAttachment, namespace: str) -> Plan | None:
    """Store the final status without our finalizer; None when there is no finalizer of ours to
    remove (or no stored version to remove it from). Gone already (404) is done."""
    meta = record.metadata
    if RECORD_FINALIZER not in meta.finalizers or not meta.resource_version:
        return None
    remaining = tuple(f for f in meta.finalizers if f != RECORD_FINALIZER)
    release = Replace(
        record_path(namespace, meta.name),
        stored_body(record, remaining),
        ends=_stale(meta.name, "changed meanwhile", 409),
    )
    return Plan((release,))


def delete_plan(record: DeviceAttachment, namespace: str) -> Plan:
    """DELETE the record if it is still this one; gone (404) or another one (409) is done."""
    return Plan((Delete(record_path(namespace, record.metadata.name), record.metadata.uid),))


def status_body(status: DeviceAttachmentStatus) -> dict[str, Any]:
    body = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    if not body.get("waitingFor"):
        body.pop("waitingFor", None)
    return body


def identity_state(record: DeviceAttachment, claim: ResourceClaim | None) -> IdentityState:
    """Whether the claim still holds the record's allocation identity and device (spec §13.1).

    ``claim`` None means the claim is confirmed gone (a live GET returned 404); a claim with
    another UID is a new claim of the same name.
    """
    if claim is None or claim.metadata.uid != record.spec.claim.uid:
        return IdentityState.CLAIM_DELETED
    allocation = claim.status.allocation
    if allocation is None or allocation.allocation_timestamp is None:
        return IdentityState.DEALLOCATED
    if AllocationIdentity.of(
        claim.metadata.uid, allocation.allocation_timestamp
    ) != AllocationIdentity.of_record(record):
        return IdentityState.REALLOCATED
    key = DeviceKey.of_record(record)
    if not any(DeviceKey.of(r) == key for r in allocation.devices.results):
        return IdentityState.DEALLOCATED
    return IdentityState.LIVE


def forgotten(record: DeviceAttachment) -> bool:
    return record.metadata.annotations.get(FORGET_ANNOTATION) == "true"


def _discard(index: dict[_K, set[str]], key: _K, name: str) -> None:
    names = index.get(key)
    if names is not None:
        names.discard(name)
        if not names:
            del index[key]


def _order(record: DeviceAttachment) -> tuple[datetime, str]:
    return (record.spec.allocation_timestamp, record.metadata.name)


class LedgerIndex:
    """Records by name, claim UID and device key. Not thread-safe: one event loop owns it."""

    def __init__(self, records: Iterable[DeviceAttachment] = ()) -> None:
        self._by_name: dict[str, DeviceAttachment] = {}
        self._by_claim: defaultdict[str, set[str]] = defaultdict(set)
        self._by_device: defaultdict[DeviceKey, set[str]] = defaultdict(set)
        for record in records:
            self.put(record)

    def __len__(self) -> int:
        return len(self._by_name)

    def get(self, name: str) -> DeviceAttachment | None:
        return self._by_name.get(name)

    def put(self, record: DeviceAttachment) -> None:
        name = record.metadata.name or record_key(record)
        self.remove(name)
        self._by_name[name] = record
        self._by_claim[record.spec.claim.uid].add(name)
        self._by_device[DeviceKey.of_record(record)].add(name)

    def remove(self, name: str) -> None:
        old = self._by_name.pop(name, None)
        if old is None:
            return
        _discard(self._by_claim, old.spec.claim.uid, name)
        _discard(self._by_device, DeviceKey.of_record(old), name)

    def all(self) -> list[DeviceAttachment]:
        return list(self._by_name.values())

    def for_claim(self, claim_uid: str) -> list[DeviceAttachment]:
        return sorted((self._by_name[n] for n in self._by_claim.get(claim_uid, ())), key=_order)

    def for_device(self, key: DeviceKey) -> list[DeviceAttachment]:
        return sorted((self._by_name[n] for n in self._by_device.get(key, ())), key=_order)

    def blocking(self, record: DeviceAttachment) -> DeviceAttachment | None:
        """The record that must finish before ``record`` may attach its device (spec §13.3).

        A record holding the device blocks; so does an older record still waiting, so that two
        waiters never start together. Admin-access records neither block nor wait.
        """
        if record.spec.admin_access:
            return None
        for other in self.for_device(DeviceKey.of_record(record)):
            if other.metadata.name == record.metadata.name or other.spec.admin_access:
                continue
            if other.status.phase in HOLDING_PHASES:
                return other
            if other.status.phase is Phase.PENDING and _order(other) < _order(record):
                return other
        return None


def record_counts(records: Iterable[DeviceAttachment], policy_name: str) -> dict[str, int]:
    """``status.records`` of a policy: counts per phase, Detached excluded."""
    counts = {"pending": 0, "attaching": 0, "attached": 0, "failed": 0, "detaching": 0}
    for record in records:
        if record.spec.policy.name != policy_name:
            continue
        phase = record.status.phase.value.lower()
        if phase in counts:
            counts[phase] += 1
    return counts
