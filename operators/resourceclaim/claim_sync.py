"""The ``claim`` sync (spec section 8): pure decisions, each a plan for the core's executor.

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
- The live reads come first, then the writes, each decided from the answer before it: the
  status PUT, the finalizer PUT built from the claim the status PUT returned, and the delete.
- Deallocation only follows the transition "had consumers" -> "has none", because a
  driver may allocate without reserving; an allocated claim that was never used stays
  allocated.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from operators.core import protowire
from operators.core.client import ApiError, KubeClient
from operators.core.names import is_dns_subdomain
from operators.core.plan import Delete, Plan, Replace, Write, Writer, execute
from operators.core.reconcile import Done, Result, Retry
from operators.core.resources import PODS, ApiResource
from operators.dra import claimwire
from operators.dra.api import RESOURCE_CLAIMS
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
from .resolution import is_pod_consumer, is_pod_done, owning_pod

log = logging.getLogger(__name__)

Live = Mapping[str, str | None]
"""What live GETs found for consumers missing from the cache: consumer UID -> the UID their name
has now (None: nothing by that name)."""

LogLine = tuple[int, str]
"""A log line (level, text) for once a plan is done."""


async def sync_claim(
    cache: ClusterCache, namespace: str, name: str, writer: Writer, pod_groups: ApiResource
) -> Result:
    """Section 8, steps 1-6: read what the cache cannot tell, then decide and execute each write
    from the answer to the one before. ``pod_groups`` is the served PodGroup resource."""
    claim = cache.claim(namespace, name)
    if claim is None:
        return Done("claim is gone")
    live: dict[str, str | None] = {}
    for consumer in unknown_consumers(cache, claim):
        kind, resource = ("pod", PODS) if is_pod_consumer(consumer) else ("PodGroup", pod_groups)
        if not is_dns_subdomain(consumer.name):
            # Whoever may write reservedFor may write any name there: one no pod or PodGroup can
            # have is not looked up (it could be a path to something else), it is simply gone.
            live[consumer.uid] = None
            continue
        try:
            found = await writer.client.get(resource.path(consumer.name, namespace=namespace))
        except ApiError as err:
            if err.status != 404:
                return Retry(f"get {kind} {namespace}/{consumer.name}: {err.message}", err.retry_after)
            found = None
        live[consumer.uid] = ((found or {}).get("metadata") or {}).get("uid") if found else None

    remaining = remaining_consumers(cache, claim, live)
    returned: list[Mapping[str, Any]] = []

    def keep(write: Write, reply: Any) -> None:
        # Only the status PUT's answer is built on; a finalizer PUT ends the release.
        if isinstance(write, Replace) and write.path.endswith("/status"):
            returned.append(reply if isinstance(reply, Mapping) else {})

    plan = release(claim, remaining)
    result = await execute(plan, writer, replied=keep)
    if result is not plan.result:
        return result
    plan = unprotect(claim, remaining, returned[0] if returned else None)
    result = await execute(plan, writer)
    if result is not plan.result:
        return result
    if remaining:
        return Done("claim is still in use")
    plan, done = delete_unused(cache, claim)
    result = await execute(plan, writer)
    if result is plan.result and done is not None:
        log.log(*done)
    return result


def unknown_consumers(cache: ClusterCache, claim: ResourceClaim) -> list[ConsumerReference]:
    """The consumers only a live GET can judge, in order: a pod or PodGroup missing from the cache
    may be newer than it (section 8, step 2)."""
    return [
        consumer
        for consumer in claim.status.reserved_for
        if _judged(cache, claim, consumer)
        and not cache.is_deleted_consumer(consumer.uid)
        and _cached_uid(cache, claim, consumer) is None
    ]


def remaining_consumers(cache: ClusterCache, claim: ResourceClaim, live: Live) -> list[Any]:
    """The raw ``reservedFor`` entries that stay (section 8, step 2); written back as they are, so
    that fields we do not model survive the PUT. ``live`` answers for :func:`unknown_consumers`."""
    raw_reserved: list[Any] = list((claim.body.get("status") or {}).get("reservedFor") or [])
    return [
        raw
        for raw, consumer in zip(raw_reserved, claim.status.reserved_for, strict=True)
        if _keeps(cache, claim, consumer, live)
    ]


def _judged(cache: ClusterCache, claim: ResourceClaim, consumer: ConsumerReference) -> bool:
    """Whether the entry is ours to drop: a pod's, or a PodGroup's where PodGroup claims are on."""
    return is_pod_consumer(consumer) or (is_pod_group_consumer(consumer) and cache.workload_claims)


def _cached_uid(cache: ClusterCache, claim: ResourceClaim, consumer: ConsumerReference) -> str | None:
    if is_pod_consumer(consumer):
        pod = cache.pod(claim.namespace, consumer.name)
        return None if pod is None else pod.uid
    group = cache.pod_group(claim.namespace, consumer.name)
    return None if group is None else group.uid


def _keeps(cache: ClusterCache, claim: ResourceClaim, consumer: ConsumerReference, live: Live) -> bool:
    if not _judged(cache, claim, consumer):
        return True
    if cache.is_deleted_consumer(consumer.uid):
        return False
    if is_pod_consumer(consumer):
        pod = cache.pod(claim.namespace, consumer.name)
        if pod is not None:
            return pod.uid == consumer.uid and not is_pod_done(pod)
    else:
        group = cache.pod_group(claim.namespace, consumer.name)
        if group is not None:
            return group.uid == consumer.uid
    return live.get(consumer.uid) == consumer.uid


def release(claim: ResourceClaim, remaining: Sequence[Any]) -> Plan:
    """Section 8, step 3: the first write that releases the claim, if any: the status PUT without
    the consumers that went (and without the allocation when the last one went), or, for a claim
    deleted while allocated but unused, the PUT that deallocates it or, unallocated, the one that
    removes the finalizer so that the deletion can finish."""
    if _dropped(claim, remaining):
        deallocate = not remaining and has_delete_protection(claim.body)
        body = with_reserved_for(claim.body, remaining, deallocate=deallocate)
        return Plan((_put(claim, body, "status", "update status of"),))
    if _unused_and_deleted(claim, remaining):
        if claim.is_allocated:
            return Plan((_put(claim, without_allocation(claim.body), "status", "deallocate"),))
        return Plan((_put(claim, without_delete_protection(claim.body), "", "remove finalizer from"),))
    return Plan()


def unprotect(claim: ResourceClaim, remaining: Sequence[Any], returned: Mapping[str, Any] | None) -> Plan:
    """Section 8, step 4, after :func:`release`'s status PUT answered with ``returned``: the PUT that
    removes the finalizer from the claim as the server returned it, once nothing is allocated."""
    if returned is None:
        return Plan()
    if _dropped(claim, remaining):
        if not has_delete_protection(returned) or is_allocated(returned):
            return Plan()
    elif not (_unused_and_deleted(claim, remaining) and claim.is_allocated):
        return Plan()
    return Plan((_put(claim, without_delete_protection(returned), "", "remove finalizer from"),))


def _dropped(claim: ResourceClaim, remaining: Sequence[Any]) -> bool:
    return len(remaining) < len(claim.status.reserved_for)


def _unused_and_deleted(claim: ResourceClaim, remaining: Sequence[Any]) -> bool:
    return (
        has_delete_protection(claim.body) and claim.metadata.deletion_timestamp is not None and not remaining
    )


def _put(claim: ResourceClaim, body: Mapping[str, Any], subresource: str, what: str) -> Replace:
    """A full-object PUT of the claim (or its status), as protobuf where JSON cannot say it."""
    path = RESOURCE_CLAIMS.path(claim.name, namespace=claim.namespace, subresource=subresource)
    return Replace(path, body, tolerate=frozenset(), ends=_failed(what, claim), resend=resend_as_protobuf)


def delete_unused(cache: ClusterCache, claim: ResourceClaim) -> tuple[Plan, LogLine | None]:
    """Section 8, step 5, for a claim without consumers: the delete of a generated claim whose pod
    will not run again or that duplicates its pod's, and the line to log once it is done."""
    owner = owning_pod(claim)
    if owner is None:
        return Plan(result=Done("claim is not controlled by a pod")), None
    pod = cache.pod(claim.namespace, owner.name)
    if pod is None:
        # The pod may just be unknown yet; if it is really gone, the garbage collector acts.
        return Plan(result=Done("owning pod is not in the cache")), None
    if pod.uid == owner.uid and not is_pod_done(pod):
        return _delete_if_duplicate(cache, claim, pod)
    if claim.metadata.deletion_timestamp is not None:
        return Plan(result=Done("claim is already being deleted")), None
    plan = Plan((_delete(claim, "delete unused generated claim"),), Done("deleted unused generated claim"))
    return plan, (logging.INFO, f"Deleted unused generated claim claim={claim.namespace}/{claim.name}")


def _delete_if_duplicate(cache: ClusterCache, claim: ResourceClaim, pod: Pod) -> tuple[Plan, LogLine | None]:
    """A claim generated for a running pod's entry while the pod's status names another claim
    for that entry. Only two controllers racing make one (a hand-over whose old leader's create
    landed after the new leader had created and recorded its own); the pod never uses it, since
    kube-scheduler and the kubelet read the claim names from the status, which do not change once
    set. Deleted while nothing is allocated or reserved, as the pod's deletion would (beyond
    upstream, which leaves it until then)."""
    may_run = Plan(result=Done("owning pod may still run")), None
    entry = claim.metadata.annotations.get(POD_CLAIM_NAME_ANNOTATION)
    recorded = {s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses}.get(entry or "")
    if entry is None or recorded is None or recorded == claim.name:
        return may_run
    # Only beside a claim generated for the same pod and entry: a status that names a claim which
    # lost its owner is about to be pointed at this one (scenario 12).
    other = cache.claim(claim.namespace, recorded)
    if other is None or other.metadata.annotations.get(POD_CLAIM_NAME_ANNOTATION) != entry:
        return may_run
    if (owner := owning_pod(other)) is None or owner.uid != pod.uid:
        return may_run
    if claim.is_allocated or claim.status.reserved_for or claim.metadata.deletion_timestamp is not None:
        return Plan(result=Done("duplicate claim is allocated, reserved or being deleted")), None
    plan = Plan(
        (_delete(claim, "delete duplicate generated claim"),), Done("deleted duplicate generated claim")
    )
    text = (
        f"Deleted a duplicate generated claim claim={claim.namespace}/{claim.name} "
        f"pod={pod.namespace}/{pod.name} kept={recorded}"
    )
    return plan, (logging.WARNING, text)


def _delete(claim: ResourceClaim, what: str) -> Delete:
    path = RESOURCE_CLAIMS.path(claim.name, namespace=claim.namespace)
    return Delete(path, claim.uid, tolerate=frozenset(), ends=_failed(what, claim))


def _failed(what: str, claim: ResourceClaim) -> Callable[[ApiError], Result]:
    """Every failed write ends the sync; 404 means the claim is gone already, which needs nothing
    more (a sync based on a cache that has not seen the deletion yet)."""

    def result(err: ApiError) -> Result:
        if err.status == 404:
            return Done("claim is gone")
        return Retry(f"{what} claim {claim.namespace}/{claim.name}: {err.message}", err.retry_after)

    return result


async def resend_as_protobuf(
    client: KubeClient, field_manager: str, path: str, body: Mapping[str, Any], refused: ApiError
) -> Any:
    """The claim PUT sent again as protobuf, when kube-apiserver refused its JSON for changing what
    JSON cannot say: raw parameters stored in a form no JSON client writes back
    (:mod:`operators.dra.claimwire`); any other refusal is raised."""
    if not claimwire.refused_as_changed(refused.body):
        raise refused
    metadata = body.get("metadata") or {}
    named = f"{metadata.get('namespace')}/{metadata.get('name')}"
    envelope = await client.get_protobuf(path.removesuffix("/status"))
    _, _, stored = protowire.unwrap(envelope)
    try:
        message = claimwire.written_as(stored, body)
    except claimwire.StaleClaim as stale:
        raise ApiError(409, "Conflict", f"claim {named} changed meanwhile: {stale}") from stale
    log.info("Writing claim %s as protobuf: its raw parameters do not survive JSON", named)
    envelope = protowire.wrap(claimwire.API_VERSION, claimwire.KIND, message)
    return await client.replace_protobuf(path, envelope, fieldManager=field_manager)
