"""The ``podgroup`` sync: the claims of a PodGroup's template entries (KEP-5729).

For each entry of the group, in order, the sync reuses the claim already generated for it
(found by the group's UID and the entry's name, as for pods) or creates one from its template,
owned by the group; then it applies the new names to the group's status in one server-side
apply. Members record that claim in their own status through their ``pod`` sync, which the
group's status update routes to them.

As upstream:

- a group being deleted gets no new claim;
- the first entry that fails gives a Warning Event on the PodGroup and ends the sync without
  a status write, the entries that succeeded included (they are found again on the retry);
- entries that name a claim are the user's to create: nothing is written for them;
- nothing is reserved from here: kube-scheduler reserves for the group, or a member that
  bypassed it does.

Unlike upstream 1.37.2, the status apply sends the recorded entries with the new ones, sorted,
and carries the group's UID: upstream sends only the new entries, which under server-side apply
drops the others and makes a group with two template entries flap once one of its claims is
re-created (the pod bug of kubernetes/kubernetes#138407, fixed there for pods only).
"""

from __future__ import annotations

from collections.abc import Generator

from operators.core.reconcile import Done
from operators.dra.podgroups import PodGroup, PodGroupResourceClaim, pod_group_owner

from .bodies import pod_group_status_apply
from .cache import ClusterCache
from .constants import FAILED_CREATION_REASON
from .plan import Action, ApplyPodGroupStatus, EmitEvent, Failed, Log, Plan, Reply
from .pod_sync import EntryFailure, create_claim, status_apply_failed
from .resolution import Resolved, group_unsupported_message, is_controlled_by_group, resolve_group_entry


def event_message(entry: PodGroupResourceClaim, failure: EntryFailure) -> str:
    return f"PodGroupResourceClaim {entry.name}: {failure.text}"


def sync_pod_group(cache: ClusterCache, namespace: str, name: str) -> Plan:
    group = cache.pod_group(namespace, name)
    if group is None:
        return Done("PodGroup is gone")
    if group.metadata.deletion_timestamp is not None:
        return Done("PodGroup is being deleted")

    new_mappings: dict[str, str] = {}
    for entry in group.spec.resource_claims:
        failure = yield from _handle_entry(cache, group, entry, new_mappings)
        if failure is None:
            continue
        yield EmitEvent(
            namespace=group.namespace,
            name=group.name,
            uid=group.uid,
            type="Warning",
            reason=FAILED_CREATION_REASON,
            message=event_message(entry, failure),
            api_version=cache.pod_group_api_version,
            kind="PodGroup",
        )
        return failure.result(
            f"PodGroup {group.namespace}/{group.name}, PodGroupResourceClaim {entry.name}: {failure.text}"
        )

    if new_mappings:
        reply = yield ApplyPodGroupStatus(
            group.namespace,
            group.name,
            pod_group_status_apply(group, new_mappings, cache.pod_group_api_version),
        )
        if isinstance(reply, Failed):
            return status_apply_failed(reply, "PodGroup", f"{group.namespace}/{group.name}")
    return Done()


def _handle_entry(
    cache: ClusterCache, group: PodGroup, entry: PodGroupResourceClaim, new_mappings: dict[str, str]
) -> Generator[Action, Reply, EntryFailure | None]:
    resolution = resolve_group_entry(group, entry)
    if resolution.outcome is Resolved.SKIPPED:
        return None
    if resolution.outcome is Resolved.UNSUPPORTED:
        text = f"checking for claim before creating it: {group_unsupported_message(group, entry)}"
        return EntryFailure(text, retryable=False)
    if resolution.outcome is Resolved.NAMED:
        claim = cache.claim(group.namespace, resolution.claim_name)
        if claim is not None:
            if not resolution.check_owner or is_controlled_by_group(claim, group):
                return None
            yield Log(
                "Claim that was created for the PodGroup is no longer owned by the PodGroup, "
                "creating a new one",
                {
                    "podGroup": f"{group.namespace}/{group.name}",
                    "podGroupClaim": entry.name,
                    "resourceClaim": claim.name,
                },
            )

    template_name = entry.resource_claim_template_name
    if template_name is None:
        return None

    claim = cache.find_generated_claim(group.namespace, group.uid, entry.name)
    if claim is None:
        created = yield from create_claim(
            cache,
            pod_group_owner(group, cache.pod_group_api_version),
            group.namespace,
            entry.name,
            template_name,
            {"podGroup": f"{group.namespace}/{group.name}"},
        )
        if isinstance(created, EntryFailure):
            return created
        claim = created
    new_mappings[entry.name] = claim.name
    return None
