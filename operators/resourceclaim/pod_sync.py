"""The ``pod`` sync (spec section 7) as pure decisions for the core's executor, and the
just-created confirmation (7.3).

For each claim entry of a pod, in order, the sync resolves the entry, reuses a claim that
was already generated for it, or creates one from its template (one pass per create, see
:mod:`.creation`); it then applies the new mappings to the pod status in one server-side
apply and, for a pod that bypassed the scheduler, reserves its allocated claims.

A finished pod (D3) gets nothing here: no claim, no status write, no reservation (spec
section 14, row 3). Its cleanup belongs to the ``claim`` sync.

Where PodGroup claims are on, a member pod's entry that its group shares is never made into a
claim of the pod: the member records the claim its group owns (``group_sync``), or waits
silently until there is one, and a member that bypassed the scheduler reserves it for the
group. A member whose group does not exist yet gets none of its claims, as upstream.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from operators.core.client import ApiError, KubeClient
from operators.core.events import WARNING, ObjectRef
from operators.core.plan import Plan, RecordEvent, Replace, Step, Writer
from operators.core.reconcile import Done, Result, Retry
from operators.core.resources import PODS
from operators.dra.api import RESOURCE_CLAIMS
from operators.dra.podgroups import PodGroup
from operators.dra.pods import TERMINAL_PHASES, PodResourceClaim

from .bodies import pod_owner, pod_status_apply, reserved_for
from .cache import ClusterCache
from .claim_sync import resend_as_protobuf
from .constants import FAILED_CREATION_REASON
from .creation import (
    EntryFailure,
    LiveClaims,
    Refused,
    claim_of_entry,
    decide_and_execute,
    recorded_claim,
    status_apply,
    unseen_recorded_claims,
)
from .models import Pod, ResourceClaim
from .resolution import (
    Resolution,
    Resolved,
    consumer_for,
    is_for_pod,
    is_reserved_for_pod,
    not_created_message,
    pod_group_controller,
    resolve_entries,
    unsupported_message,
)

log = logging.getLogger(__name__)


async def sync_pod(
    cache: ClusterCache,
    namespace: str,
    name: str,
    writer: Writer,
    created: Callable[[ResourceClaim], None] = lambda _: None,
) -> Result:
    """Section 7, steps 1-5: :func:`decide_pod`'s passes, executed, after the live reads of
    :func:`claims_to_read`."""
    return await decide_and_execute(
        lambda refused, live: decide_pod(cache, namespace, name, refused, live),
        cache,
        writer,
        created,
        namespace=namespace,
        unseen=claims_to_read(cache, namespace, name),
    )


def claims_to_read(cache: ClusterCache, namespace: str, name: str) -> list[str]:
    """The claims the pod's status records that the cache does not hold, for a pod that may get
    claims (:func:`~.creation.unseen_recorded_claims`)."""
    pod = cache.pod(namespace, name)
    if pod is None or pod.metadata.deletion_timestamp is not None or pod.status.phase in TERMINAL_PHASES:
        return []
    return unseen_recorded_claims(cache, namespace, (resolution for _, resolution in resolve_entries(pod)))


def unsupported_error(pod: Pod, entry: PodResourceClaim) -> str:
    return f"checking for claim before creating it: {unsupported_message(pod, entry)}"


def pod_group_error(claim: ResourceClaim, pod_group_name: str) -> str:
    return (
        f"ResourceClaim {claim.namespace}/{claim.name} is controlled by PodGroup {pod_group_name}, "
        "PodGroup ResourceClaims are not supported"
    )


def not_owner_error(claim: ResourceClaim, pod: Pod, group: PodGroup | None = None) -> str:
    who = f"neither Pod nor PodGroup {group.name} is the owner" if group is not None else "Pod is not owner"
    return (
        f"ResourceClaim {claim.namespace}/{claim.name} was not created for Pod "
        f"{pod.namespace}/{pod.name} ({who})"
    )


def event_message(entry: PodResourceClaim, failure: EntryFailure) -> str:
    return f"PodResourceClaim {entry.name}: {failure.text}"


def decide_pod(
    cache: ClusterCache, namespace: str, name: str, refused: Refused, live: LiveClaims | None = None
) -> Plan:
    """One pass of section 7, steps 1-5: the create of the first entry's claim still missing, or
    the failed entry's Event, or the status apply and the reservations. ``refused``: the creates
    this sync's earlier passes had refused; ``live``: what :func:`claims_to_read` found."""
    pod = cache.pod(namespace, name)
    if pod is None:
        return Plan(result=Done("pod is gone"))
    if pod.metadata.deletion_timestamp is not None:
        return Plan(result=Done("pod is being deleted"))
    if pod.status.phase in TERMINAL_PHASES:
        return Plan(result=Done("pod has terminated"))
    group = cache.group_of(pod)
    if cache.workload_claims and pod.pod_group_name and group is None:
        return Plan(
            result=Done(
                f"PodGroup {pod.pod_group_name} does not exist yet; its creation routes the pod again"
            )
        )

    new_mappings: dict[str, str] = {}
    for entry, resolution in resolve_entries(pod):
        handled = _handle_entry(cache, pod, group, entry, resolution, new_mappings, refused, live or {})
        if handled is None:
            continue
        if isinstance(handled, Plan):
            return handled
        ref = ObjectRef("v1", "Pod", pod.name, pod.namespace, pod.uid)
        event = RecordEvent(ref, WARNING, FAILED_CREATION_REASON, event_message(entry, handled))
        error = f"pod {pod.namespace}/{pod.name}, PodResourceClaim {entry.name}: {handled.text}"
        return Plan((event,), handled.result(error))

    steps: list[Step] = []
    if new_mappings:
        path = PODS.path(pod.name, namespace=pod.namespace, subresource="status")
        steps.append(
            status_apply(path, pod_status_apply(pod, new_mappings), "pod", f"{pod.namespace}/{pod.name}")
        )
    if not pod.spec.node_name:
        return Plan(tuple(steps), Done("kube-scheduler makes the reservations"))
    reservations, result = reserve(cache, pod, group)
    return Plan((*steps, *reservations), result)


def _handle_entry(
    cache: ClusterCache,
    pod: Pod,
    group: PodGroup | None,
    entry: PodResourceClaim,
    resolution: Resolution,
    new_mappings: dict[str, str],
    refused: Refused,
    live: LiveClaims,
) -> EntryFailure | Plan | None:
    """Section 7.1: None when the entry needs nothing more (a new mapping is added to
    ``new_mappings``), the pass that creates its claim, or why it fails. ``group`` is the pod's
    PodGroup where PodGroup claims are on; ``resolution`` is the entry's (:func:`resolve_entries`)."""
    if resolution.outcome is Resolved.SKIPPED:
        return None
    if resolution.outcome is Resolved.UNSUPPORTED:
        return EntryFailure(unsupported_error(pod, entry), retryable=False)

    not_owned: ResourceClaim | None = None
    if resolution.outcome is Resolved.NAMED:
        claim = recorded_claim(cache, pod.namespace, resolution, live)
        if isinstance(claim, EntryFailure):
            return claim
        if claim is not None:
            if not resolution.check_owner or is_for_pod(claim, pod, group):
                return None
            pod_group = pod_group_controller(claim)
            if pod_group is not None and not cache.workload_claims:
                return EntryFailure(pod_group_error(claim, pod_group.name), retryable=False)
            not_owned = claim

    template_name = entry.resource_claim_template_name
    if template_name is None:
        return None

    if group is not None and group.shares(entry):
        # The group's sync creates the claim; its status update routes the members again.
        shared = cache.find_generated_claim(group.namespace, group.uid, entry.name)
        if shared is not None:
            new_mappings[entry.name] = shared.name
        return None

    replaced = None
    if not_owned is not None:
        replaced = (
            "Claim that was created for the pod is no longer owned by the pod, creating a new one "
            f"pod={pod.namespace}/{pod.name} podClaim={entry.name} resourceClaim={not_owned.name}"
        )
    owner = pod_owner(pod)
    return claim_of_entry(
        cache, owner, pod.namespace, entry.name, template_name, new_mappings, refused, replaced
    )


def reserve(cache: ClusterCache, pod: Pod, group: PodGroup | None) -> tuple[tuple[Replace, ...], Result]:
    """Section 7.5: the status PUTs that reserve the allocated claims of a pod that bypassed the
    scheduler (a claim its group shares is reserved for the group, once), and the sync's result
    once they are done."""
    puts: list[Replace] = []
    for entry, resolution in resolve_entries(pod):
        if resolution.outcome is Resolved.NOT_CREATED:
            # Our own status apply may not have reached the pod cache yet.
            return tuple(puts), Retry(not_created_message(pod))
        if resolution.outcome is Resolved.UNSUPPORTED:
            return tuple(puts), Retry(unsupported_message(pod, entry))
        if resolution.outcome is Resolved.SKIPPED:
            continue
        claim = cache.claim(pod.namespace, resolution.claim_name)
        if claim is None:
            return tuple(puts), Done(
                f"claim {resolution.claim_name} does not exist yet; kubelet waits for it"
            )
        if resolution.check_owner and not is_for_pod(claim, pod, group):
            return tuple(puts), Retry(not_owner_error(claim, pod, group))
        if claim.is_allocated and not is_reserved_for_pod(claim, pod.uid, group):
            consumer = consumer_for(pod, group, entry)
            puts.append(_reservation(claim, reserved_for(claim.body, consumer)))
    return tuple(puts), Done()


def _reservation(claim: ResourceClaim, body: dict[str, object]) -> Replace:
    def failed(err: ApiError) -> Result:
        return Retry(f"reserve claim {claim.namespace}/{claim.name}: {err.message}", err.retry_after)

    path = RESOURCE_CLAIMS.path(claim.name, namespace=claim.namespace, subresource="status")
    return Replace(path, body, tolerate=frozenset(), ends=failed, resend=resend_as_protobuf)


async def confirm_created_claims(cache: ClusterCache, client: KubeClient) -> Result:
    """Check the just-created claims the watch has not confirmed within 60 s (7.3).

    A claim that still exists under its UID keeps its record for another 60 s; one that is
    gone or replaced loses it. A failed GET changes nothing, so the next round tries again.
    """
    for claim in cache.unconfirmed_created_claims():
        try:
            live = await client.get(RESOURCE_CLAIMS.path(claim.name, namespace=claim.namespace))
        except ApiError as err:
            if err.status == 404:
                cache.confirm_created(claim.uid, None)
            continue
        metadata = (live or {}).get("metadata") or {}
        cache.confirm_created(claim.uid, metadata.get("uid"))
    return Done()
