"""The ``claim`` sync (spec section 8) as a planner.

It releases a claim from consumers that are gone, replaced or done, deallocates it when
its last consumer goes, removes the ``delete-protection`` finalizer once nothing is
allocated, and deletes a generated claim whose pod will not run again, or that duplicates the
claim its running pod's status names for the same entry.

Safety rules that shape the code:

- A pod entry is dropped only on proof: the deleted-consumer LRU, the pod cache (another
  UID, or done), or a live GET (404 or another UID). A pod missing from the cache may just be
  newer than the cache while kube-scheduler binds it; dropping its entry would let its
  devices be handed out twice.
- A PodGroup entry (where PodGroup claims are on) is dropped on the same kind of proof: the
  group was deleted or replaced. Its members finishing is no proof: the group stays a
  consumer while it exists, terminating included, as upstream.
- Entries of any other kind (and PodGroup entries where PodGroup claims are off) belong to
  someone else and are kept as they are.
- Writes are full-object PUTs with the ``resourceVersion`` they were based on, so they
  fail with 409 rather than overwrite a concurrent change; the retry recomputes from the
  cache.
- Deallocation only follows the transition "had consumers" -> "has none", because a
  driver may allocate without reserving; an allocated claim that was never used stays
  allocated.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any

from operators.core.reconcile import Done, Retry
from operators.dra.claims import ConsumerReference
from operators.dra.podgroups import is_pod_group_consumer

from .bodies import (
    has_delete_protection,
    is_allocated,
    with_reserved_for,
    without_allocation,
    without_delete_protection,
)
from .cache import ClusterCache
from .constants import POD_CLAIM_NAME_ANNOTATION
from .models import Pod, ResourceClaim
from .plan import (
    Action,
    DeleteClaim,
    Failed,
    GetPod,
    GetPodGroup,
    Log,
    Plan,
    PutClaim,
    PutClaimStatus,
    Reply,
)
from .resolution import is_pod_consumer, is_pod_done, owning_pod


def sync_claim(cache: ClusterCache, namespace: str, name: str) -> Plan:
    """Section 8, steps 1-6."""
    claim = cache.claim(namespace, name)
    if claim is None:
        return Done("claim is gone")

    # The raw entries are written back, so that fields we do not model survive the PUT.
    raw_reserved: list[Any] = list((claim.body.get("status") or {}).get("reservedFor") or [])

    remaining: list[Any] = []
    for raw, consumer in zip(raw_reserved, claim.status.reserved_for, strict=True):
        keep = yield from _keep_consumer(cache, claim, consumer)
        if isinstance(keep, Retry):
            return keep
        if keep:
            remaining.append(raw)

    protected = has_delete_protection(claim.body)
    if len(remaining) < len(raw_reserved):
        deallocate = not remaining and protected
        reply = yield PutClaimStatus(
            namespace, name, with_reserved_for(claim.body, remaining, deallocate=deallocate)
        )
        if isinstance(reply, Failed):
            return _retry("update status of", claim, reply)
        updated = reply.body or {}
        if has_delete_protection(updated) and not is_allocated(updated):
            reply = yield PutClaim(namespace, name, without_delete_protection(updated))
            if isinstance(reply, Failed):
                return _retry("remove finalizer from", claim, reply)
    elif protected and claim.metadata.deletion_timestamp is not None and not remaining:
        # A claim deleted while allocated but unused: release it so the deletion can finish.
        base: dict[str, Any] = claim.body
        if claim.is_allocated:
            reply = yield PutClaimStatus(namespace, name, without_allocation(claim.body))
            if isinstance(reply, Failed):
                return _retry("deallocate", claim, reply)
            base = reply.body or {}
        reply = yield PutClaim(namespace, name, without_delete_protection(base))
        if isinstance(reply, Failed):
            return _retry("remove finalizer from", claim, reply)

    if remaining:
        return Done("claim is still in use")
    return (yield from _delete_if_pod_will_not_run(cache, claim))


def _keep_consumer(
    cache: ClusterCache, claim: ResourceClaim, consumer: ConsumerReference
) -> Generator[Action, Reply, bool | Retry]:
    """Whether a ``reservedFor`` entry stays (section 8, step 2)."""
    if is_pod_consumer(consumer):
        if cache.is_deleted_consumer(consumer.uid):
            return False
        pod = cache.pod(claim.namespace, consumer.name)
        if pod is not None:
            return pod.uid == consumer.uid and not is_pod_done(pod)
        return (yield from _exists_live(GetPod(claim.namespace, consumer.name), "pod", consumer))
    if is_pod_group_consumer(consumer) and cache.workload_claims:
        if cache.is_deleted_consumer(consumer.uid):
            return False
        group = cache.pod_group(claim.namespace, consumer.name)
        if group is not None:
            return group.uid == consumer.uid
        return (yield from _exists_live(GetPodGroup(claim.namespace, consumer.name), "PodGroup", consumer))
    return True


def _exists_live(
    get: GetPod | GetPodGroup, kind: str, consumer: ConsumerReference
) -> Generator[Action, Reply, bool | Retry]:
    """A consumer missing from the cache may be newer than it: only the live object decides."""
    reply = yield get
    if isinstance(reply, Failed):
        if reply.not_found:
            return False
        return Retry(f"get {kind} {get.namespace}/{get.name}: {reply.message}", reply.retry_after)
    live_uid = ((reply.body or {}).get("metadata") or {}).get("uid")
    return bool(live_uid == consumer.uid)


def _delete_if_pod_will_not_run(cache: ClusterCache, claim: ResourceClaim) -> Plan:
    """Section 8, step 5, for a claim without consumers."""
    owner = owning_pod(claim)
    if owner is None:
        return Done("claim is not controlled by a pod")
    pod = cache.pod(claim.namespace, owner.name)
    if pod is None:
        # The pod may just be unknown yet; if it is really gone, the garbage collector acts.
        return Done("owning pod is not in the cache")
    if pod.uid == owner.uid and not is_pod_done(pod):
        return (yield from _delete_if_duplicate(cache, claim, pod))
    if claim.metadata.deletion_timestamp is not None:
        return Done("claim is already being deleted")
    reply = yield DeleteClaim(claim.namespace, claim.name, claim.uid)
    if isinstance(reply, Failed):
        return _retry("delete unused generated claim", claim, reply)
    yield Log("Deleted unused generated claim", {"claim": f"{claim.namespace}/{claim.name}"})
    return Done("deleted unused generated claim")


def _delete_if_duplicate(cache: ClusterCache, claim: ResourceClaim, pod: Pod) -> Plan:
    """A claim generated for a running pod's entry while the pod's status names another claim
    for that entry. Only two controllers racing make one (a hand-over whose old leader's create
    landed after the new leader had created and recorded its own); the pod never uses it, since
    kube-scheduler and the kubelet read the claim names from the status, which do not change once
    set. Deleted while nothing is allocated or reserved, as the pod's deletion would (beyond
    upstream, which leaves it until then)."""
    entry = claim.metadata.annotations.get(POD_CLAIM_NAME_ANNOTATION)
    recorded = {s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses}.get(entry or "")
    if entry is None or recorded is None or recorded == claim.name:
        return Done("owning pod may still run")
    # Only beside a claim generated for the same pod and entry: a status that names a claim which
    # lost its owner is about to be pointed at this one (scenario 12).
    other = cache.claim(claim.namespace, recorded)
    if other is None or other.metadata.annotations.get(POD_CLAIM_NAME_ANNOTATION) != entry:
        return Done("owning pod may still run")
    if (owner := owning_pod(other)) is None or owner.uid != pod.uid:
        return Done("owning pod may still run")
    if claim.is_allocated or claim.status.reserved_for or claim.metadata.deletion_timestamp is not None:
        return Done("duplicate claim is allocated, reserved or being deleted")
    reply = yield DeleteClaim(claim.namespace, claim.name, claim.uid)
    if isinstance(reply, Failed):
        return _retry("delete duplicate generated claim", claim, reply)
    yield Log(
        "Deleted a duplicate generated claim",
        {
            "claim": f"{claim.namespace}/{claim.name}",
            "pod": f"{pod.namespace}/{pod.name}",
            "kept": str(recorded),
        },
        level=logging.WARNING,
    )
    return Done("deleted duplicate generated claim")


def _retry(what: str, claim: ResourceClaim, reply: Failed) -> Done | Retry:
    """A failed write; 404 means the claim is gone already, which needs nothing more (a
    sync based on a cache that has not seen the deletion yet)."""
    if reply.not_found:
        return Done("claim is gone")
    return Retry(f"{what} claim {claim.namespace}/{claim.name}: {reply.message}", reply.retry_after)
