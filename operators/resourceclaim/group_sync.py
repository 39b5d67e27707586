"""The ``podgroup`` sync: the claims of a PodGroup's template entries (KEP-5729), as pure
decisions for the core's executor (one pass per create, see :mod:`.creation`).

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

import logging
from collections.abc import Callable

from operators.core.events import WARNING, ObjectRef
from operators.core.plan import Plan, RecordEvent, Writer
from operators.core.reconcile import Done, Result
from operators.core.resources import ApiResource
from operators.dra.podgroups import PodGroup, PodGroupResourceClaim, pod_group_owner

from .bodies import pod_group_status_apply
from .cache import ClusterCache
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
from .models import ResourceClaim
from .resolution import (
    Resolution,
    Resolved,
    group_unsupported_message,
    is_controlled_by_group,
    resolve_group_entries,
)

log = logging.getLogger(__name__)


async def sync_pod_group(
    cache: ClusterCache,
    namespace: str,
    name: str,
    writer: Writer,
    pod_groups: ApiResource,
    created: Callable[[ResourceClaim], None] = lambda _: None,
) -> Result:
    """:func:`decide_pod_group`'s passes, executed after the live reads of the claims its status
    records that the cache does not hold; ``pod_groups`` is the served resource."""
    group = cache.pod_group(namespace, name)
    unseen: list[str] = []
    if group is not None and group.metadata.deletion_timestamp is None:
        unseen = unseen_recorded_claims(cache, namespace, (r for _, r in resolve_group_entries(group)))
    return await decide_and_execute(
        lambda refused, live: decide_pod_group(cache, namespace, name, pod_groups, refused, live),
        cache,
        writer,
        created,
        namespace=namespace,
        unseen=unseen,
    )


def event_message(entry: PodGroupResourceClaim, failure: EntryFailure) -> str:
    return f"PodGroupResourceClaim {entry.name}: {failure.text}"


def decide_pod_group(
    cache: ClusterCache,
    namespace: str,
    name: str,
    pod_groups: ApiResource,
    refused: Refused,
    live: LiveClaims | None = None,
) -> Plan:
    """One pass: the create of the first entry's claim still missing, or the failed entry's Event,
    or the status apply. ``refused``: the creates this sync's earlier passes had refused; ``live``:
    the recorded claims read from the API server because the cache lacks them."""
    group = cache.pod_group(namespace, name)
    if group is None:
        return Plan(result=Done("PodGroup is gone"))
    if group.metadata.deletion_timestamp is not None:
        return Plan(result=Done("PodGroup is being deleted"))

    new_mappings: dict[str, str] = {}
    for entry, resolution in resolve_group_entries(group):
        handled = _handle_entry(cache, group, entry, resolution, new_mappings, refused, live or {})
        if handled is None:
            continue
        if isinstance(handled, Plan):
            return handled
        ref = ObjectRef(cache.pod_group_api_version, "PodGroup", group.name, group.namespace, group.uid)
        event = RecordEvent(ref, WARNING, FAILED_CREATION_REASON, event_message(entry, handled))
        error = f"PodGroup {group.namespace}/{group.name}, PodGroupResourceClaim {entry.name}: {handled.text}"
        return Plan((event,), handled.result(error))

    if not new_mappings:
        return Plan()
    path = pod_groups.path(group.name, namespace=group.namespace, subresource="status")
    body = pod_group_status_apply(group, new_mappings, cache.pod_group_api_version)
    return Plan((status_apply(path, body, "PodGroup", f"{group.namespace}/{group.name}"),))


def _handle_entry(
    cache: ClusterCache,
    group: PodGroup,
    entry: PodGroupResourceClaim,
    resolution: Resolution,
    new_mappings: dict[str, str],
    refused: Refused,
    live: LiveClaims,
) -> EntryFailure | Plan | None:
    if resolution.outcome is Resolved.SKIPPED:
        return None
    if resolution.outcome is Resolved.UNSUPPORTED:
        text = f"checking for claim before creating it: {group_unsupported_message(group, entry)}"
        return EntryFailure(text, retryable=False)
    not_owned: ResourceClaim | None = None
    if resolution.outcome is Resolved.NAMED:
        claim = recorded_claim(cache, group.namespace, resolution, live)
        if isinstance(claim, EntryFailure):
            return claim
        if claim is not None:
            if not resolution.check_owner or is_controlled_by_group(claim, group):
                return None
            not_owned = claim

    template_name = entry.resource_claim_template_name
    if template_name is None:
        return None

    replaced = None
    if not_owned is not None:
        replaced = (
            "Claim that was created for the PodGroup is no longer owned by the PodGroup, creating a new one "
            f"podGroup={group.namespace}/{group.name} podGroupClaim={entry.name} "
            f"resourceClaim={not_owned.name}"
        )
    owner = pod_group_owner(group, cache.pod_group_api_version)
    return claim_of_entry(
        cache, owner, group.namespace, entry.name, template_name, new_mappings, refused, replaced
    )
