"""The ``pod`` sync (spec section 7) as a planner, and the just-created confirmation (7.3).

For each claim entry of a pod, in order, the sync resolves the entry, reuses a claim that
was already generated for it, or creates one from its template; it then applies the new
mappings to the pod status in one server-side apply and, for a pod that bypassed the
scheduler, reserves its allocated claims.

A finished pod (D3) gets nothing here: no claim, no status write, no reservation (spec
section 14, row 3). Its cleanup belongs to the ``claim`` sync.

Where PodGroup claims are on, a member pod's entry that its group shares is never made into a
claim of the pod: the member records the claim its group owns (``group_sync``), or waits
silently until there is one, and a member that bypassed the scheduler reserves it for the
group. A member whose group does not exist yet gets none of its claims, as upstream.

Every claim this sync creates is recorded in the cache's just-created record before the
next step runs, so a retry that comes before the claim watch event finds it instead of
creating a second claim.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Mapping
from dataclasses import dataclass

from operators.core.reconcile import Done, GiveUp, Result, Retry
from operators.dra.podgroups import PodGroup
from operators.dra.pods import PodResourceClaim

from .bodies import generated_claim, owner_labels, pod_owner, pod_status_apply, reserved_for
from .cache import ClusterCache
from .constants import FAILED_CREATION_REASON, TERMINAL_POD_PHASES
from .models import Pod, ResourceClaim
from .plan import (
    Action,
    ApplyPodStatus,
    CountClaimCreate,
    CreateClaim,
    EmitEvent,
    Failed,
    GetClaim,
    Log,
    Plan,
    PutClaimStatus,
    Reply,
)
from .resolution import (
    Resolved,
    admin_access_label,
    consumer_for,
    is_for_pod,
    is_reserved_for_pod,
    not_created_message,
    pod_group_controller,
    resolve_entry,
    unsupported_message,
)


@dataclass(frozen=True)
class EntryFailure:
    """Why one claim entry could not be handled; ``text`` is the ``<error>`` of section 9."""

    text: str
    retryable: bool = True
    retry_after: float | None = None

    def result(self, error: str) -> Result:
        """What the failed entry makes of its owner's sync: a retry, or, where only a new watch
        event can change the input, nothing until then."""
        if self.retryable:
            return Retry(error, self.retry_after)
        return GiveUp(error)


def status_apply_failed(reply: Failed, kind: str, namespaced_name: str) -> Result:
    """The result of a failed apply of a pod's or PodGroup's ``status.resourceClaimStatuses``."""
    if reply.not_found:
        return Done(f"{kind} is gone; the garbage collector takes its claims")
    return Retry(f"update {kind} {namespaced_name} ResourceClaimStatuses: {reply.message}", reply.retry_after)


def template_missing_error(template_name: str) -> str:
    return (
        f'resource claim template "{template_name}": '
        f'resourceclaimtemplate.resource.k8s.io "{template_name}" not found'
    )


def create_failed_error(status_message: str) -> str:
    # The space before the colon is upstream's: it formats the still-empty claim name.
    return f"create ResourceClaim : {status_message}"


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


def sync_pod(cache: ClusterCache, namespace: str, name: str) -> Plan:
    """Section 7, steps 1-5."""
    pod = cache.pod(namespace, name)
    if pod is None:
        return Done("pod is gone")
    if pod.metadata.deletion_timestamp is not None:
        return Done("pod is being deleted")
    if pod.status.phase in TERMINAL_POD_PHASES:
        return Done("pod has terminated")
    group = cache.group_of(pod)
    if cache.workload_claims and pod.pod_group_name and group is None:
        return Done(f"PodGroup {pod.pod_group_name} does not exist yet; its creation routes the pod again")

    new_mappings: dict[str, str] = {}
    for entry in pod.spec.resource_claims:
        failure = yield from _handle_entry(cache, pod, group, entry, new_mappings)
        if failure is None:
            continue
        yield EmitEvent(
            namespace=pod.namespace,
            name=pod.name,
            uid=pod.uid,
            type="Warning",
            reason=FAILED_CREATION_REASON,
            message=event_message(entry, failure),
        )
        return failure.result(
            f"pod {pod.namespace}/{pod.name}, PodResourceClaim {entry.name}: {failure.text}"
        )

    if new_mappings:
        reply = yield ApplyPodStatus(pod.namespace, pod.name, pod_status_apply(pod, new_mappings))
        if isinstance(reply, Failed):
            return status_apply_failed(reply, "pod", f"{pod.namespace}/{pod.name}")

    if not pod.spec.node_name:
        return Done("kube-scheduler makes the reservations")
    return (yield from _reserve(cache, pod, group))


def _handle_entry(
    cache: ClusterCache,
    pod: Pod,
    group: PodGroup | None,
    entry: PodResourceClaim,
    new_mappings: dict[str, str],
) -> Generator[Action, Reply, EntryFailure | None]:
    """Section 7.1; a new mapping is added to ``new_mappings``. ``group`` is the pod's PodGroup
    where PodGroup claims are on."""
    resolution = resolve_entry(pod, entry)
    if resolution.outcome is Resolved.SKIPPED:
        return None
    if resolution.outcome is Resolved.UNSUPPORTED:
        return EntryFailure(unsupported_error(pod, entry), retryable=False)

    if resolution.outcome is Resolved.NAMED:
        claim = cache.claim(pod.namespace, resolution.claim_name)
        if claim is not None:
            if not resolution.check_owner or is_for_pod(claim, pod, group):
                return None
            pod_group = pod_group_controller(claim)
            if pod_group is not None and not cache.workload_claims:
                return EntryFailure(pod_group_error(claim, pod_group.name), retryable=False)
            yield Log(
                "Claim that was created for the pod is no longer owned by the pod, creating a new one",
                {"pod": f"{pod.namespace}/{pod.name}", "podClaim": entry.name, "resourceClaim": claim.name},
            )

    template_name = entry.resource_claim_template_name
    if template_name is None:
        return None

    if group is not None and group.shares(entry):
        # The group's sync creates the claim; its status update routes the members again.
        shared = cache.find_generated_claim(group.namespace, group.uid, entry.name)
        if shared is not None:
            new_mappings[entry.name] = shared.name
        return None

    claim = cache.find_generated_claim(pod.namespace, pod.uid, entry.name)
    if claim is None:
        pod_name = f"{pod.namespace}/{pod.name}"
        created = yield from create_claim(
            cache, pod_owner(pod), pod.namespace, entry.name, template_name, {"pod": pod_name}
        )
        if isinstance(created, EntryFailure):
            return created
        claim = created

    new_mappings[entry.name] = claim.name
    return None


def create_claim(
    cache: ClusterCache,
    owner: dict[str, object],
    namespace: str,
    entry_name: str,
    template_name: str,
    log_fields: Mapping[str, str],
) -> Generator[Action, Reply, ResourceClaim | EntryFailure]:
    """Create the claim of a pod's or PodGroup's template entry (7.2), count it, and record it
    so that a retry before its watch event finds it instead of creating another (7.3).
    ``log_fields`` name the owner in the log line."""
    template = cache.template(namespace, template_name)
    if template is None:
        return EntryFailure(template_missing_error(template_name))
    admin_access = admin_access_label(template.spec.claim_spec)
    group, kind = owner_labels(owner)
    reply = yield CreateClaim(namespace, generated_claim(owner, namespace, entry_name, template))
    if isinstance(reply, Failed):
        yield CountClaimCreate("failure", admin_access, group, kind)
        return EntryFailure(create_failed_error(reply.message), retry_after=reply.retry_after)
    claim = ResourceClaim.from_body(reply.body or {})
    cache.record_created(claim)
    yield CountClaimCreate("success", admin_access, group, kind)
    # Debug, as upstream's verbosity 4: one line per generated claim is noise at scale, and
    # formatting it cost 4 % of the operator's CPU in a 1000-pod burst.
    yield Log("Created ResourceClaim", {**log_fields, "claim": claim.name}, level=logging.DEBUG)
    return claim


def _reserve(cache: ClusterCache, pod: Pod, group: PodGroup | None) -> Plan:
    """Section 7.5: reserve the allocated claims of a pod that bypassed the scheduler; a claim
    its group shares is reserved for the group, once."""
    for entry in pod.spec.resource_claims:
        resolution = resolve_entry(pod, entry)
        if resolution.outcome is Resolved.NOT_CREATED:
            # Our own status apply may not have reached the pod cache yet.
            return Retry(not_created_message(pod))
        if resolution.outcome is Resolved.UNSUPPORTED:
            return Retry(unsupported_message(pod, entry))
        if resolution.outcome is Resolved.SKIPPED:
            continue
        claim = cache.claim(pod.namespace, resolution.claim_name)
        if claim is None:
            return Done(f"claim {resolution.claim_name} does not exist yet; kubelet waits for it")
        if resolution.check_owner and not is_for_pod(claim, pod, group):
            return Retry(not_owner_error(claim, pod, group))
        if claim.is_allocated and not is_reserved_for_pod(claim, pod.uid, group):
            consumer = consumer_for(pod, group, entry)
            reply = yield PutClaimStatus(claim.namespace, claim.name, reserved_for(claim.body, consumer))
            if isinstance(reply, Failed):
                error = f"reserve claim {claim.namespace}/{claim.name}: {reply.message}"
                return Retry(error, reply.retry_after)
    return Done()


def confirm_created_claims(cache: ClusterCache) -> Plan:
    """Check the just-created claims the watch has not confirmed within 60 s (7.3).

    A claim that still exists under its UID keeps its record for another 60 s; one that is
    gone or replaced loses it. A failed GET changes nothing, so the next round tries again.
    """
    for claim in cache.unconfirmed_created_claims():
        reply = yield GetClaim(claim.namespace, claim.name)
        if isinstance(reply, Failed):
            if reply.not_found:
                cache.confirm_created(claim.uid, None)
            continue
        metadata = (reply.body or {}).get("metadata") or {}
        cache.confirm_created(claim.uid, metadata.get("uid"))
    return Done()
