"""In-memory state of the resourceclaim operator (spec sections 3, 5 and 7.3).

One :class:`ClusterCache` holds the projections of the watched Pods, ResourceClaims,
ResourceClaimTemplates and (where PodGroup claims are on) PodGroups, the lookup maps kept in
step with them, the record of claims this process created and the LRU of deleted pod and
PodGroup UIDs. Applying a watch event updates all of that and returns the work keys
(``pod:<ns>/<name>``, ``claim:<ns>/<name>``, ``podgroup:<ns>/<name>``) to enqueue; the
caller owns the queue.

Concurrency contract: the cache has no locks. Every method must be called from one thread
(the operator's event loop), and no method awaits, so each call is atomic with respect to
the watch handlers and the workers. A sync that reads the cache, awaits an API call and
reads it again may see a newer state the second time, which is what a level-triggered
controller wants.

Nothing here does I/O. Time enters only through the injected ``clock`` (monotonic
seconds), which the just-created record uses for its 60 s confirmation rule.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from operators.core.keys import CLAIM, Key
from operators.core.recent import RecentKeys
from operators.dra.podgroups import POD_GROUPS, PodGroup

from .constants import DELETED_CONSUMER_MEMORY, JUST_CREATED_CONFIRMATION_SECONDS, POD_CLAIM_NAME_ANNOTATION
from .models import Pod, ResourceClaim, ResourceClaimTemplate
from .resolution import (
    PodGroupLookup,
    generating_owner,
    pod_has_claims,
    resolved_claim_names,
    resolved_group_claim_names,
    route_pod,
    route_pod_group,
)

DELETED = "DELETED"


def object_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def _owner_key(claim: ResourceClaim) -> str | None:
    """claims-by-owner key: the UID of the controlling Pod or PodGroup (UIDs never collide, so
    one map serves both kinds)."""
    owner = generating_owner(claim)
    return object_key(claim.namespace, owner.uid) if owner is not None else None


def _entry_key(owner_key: str, entry_name: str) -> str:
    # A UID has no "/", so the entry name is whatever follows the owner key.
    return f"{owner_key}/{entry_name}"


def _generated_entry_keys(claim: ResourceClaim) -> list[str]:
    """claims-by-entry key: the owner key and the entry the claim was generated for."""
    owner_key = _owner_key(claim)
    entry_name = claim.metadata.annotations.get(POD_CLAIM_NAME_ANNOTATION)
    if owner_key is None or entry_name is None:
        return []
    return [_entry_key(owner_key, entry_name)]


class _MultiMap:
    """key -> set of values; empty sets are dropped so the map never grows with history."""

    def __init__(self) -> None:
        self._entries: dict[str, set[str]] = {}

    def add(self, keys: Iterable[str], value: str) -> None:
        for key in keys:
            self._entries.setdefault(key, set()).add(value)

    def discard(self, keys: Iterable[str], value: str) -> None:
        for key in keys:
            values = self._entries.get(key)
            if values is None:
                continue
            values.discard(value)
            if not values:
                del self._entries[key]

    def get(self, key: str) -> frozenset[str]:
        return frozenset(self._entries.get(key, ()))


@dataclass
class _JustCreated:
    claim: ResourceClaim
    check_at: float


class ClusterCache:
    """The operator's view of the cluster; see the module docstring for the contract."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        # Decided once at start (discovery and --workload-claims), before any event arrives.
        self.workload_claims = False
        # The served version's, written into owner references, status applies and Events.
        self.pod_group_api_version = POD_GROUPS.api_version
        self._pods: dict[str, Pod] = {}
        self._claims: dict[str, ResourceClaim] = {}
        self._templates: dict[str, ResourceClaimTemplate] = {}
        self._pod_groups: dict[str, PodGroup] = {}
        self._pods_by_claim = _MultiMap()
        self._pods_by_template = _MultiMap()
        self._pods_by_pod_group = _MultiMap()
        self._pod_groups_by_claim = _MultiMap()
        self._pod_groups_by_template = _MultiMap()
        self._claims_by_owner = _MultiMap()
        # A sync looks up each entry of a pod, whose number a tenant sets: by owner alone, every
        # lookup would read all of the owner's claims.
        self._claims_by_entry = _MultiMap()
        self._just_created: dict[str, _JustCreated] = {}
        # Entry key -> UIDs of the records, for the same reason.
        self._just_created_by_entry = _MultiMap()
        # Claim key -> UID of the record: routing asks by name on every pod event.
        self._just_created_names: dict[str, str] = {}
        self._deleted_uids = RecentKeys(DELETED_CONSUMER_MEMORY)

    # Reads.

    def pod(self, namespace: str, name: str) -> Pod | None:
        return self._pods.get(object_key(namespace, name))

    def claim(self, namespace: str, name: str) -> ResourceClaim | None:
        return self._claims.get(object_key(namespace, name))

    def template(self, namespace: str, name: str) -> ResourceClaimTemplate | None:
        return self._templates.get(object_key(namespace, name))

    def pod_group(self, namespace: str, name: str) -> PodGroup | None:
        return self._pod_groups.get(object_key(namespace, name))

    def group_of(self, pod: Pod) -> PodGroup | None:
        """The pod's PodGroup where PodGroup claims are on and the group is known."""
        if not self.workload_claims or not pod.pod_group_name:
            return None
        return self.pod_group(pod.namespace, pod.pod_group_name)

    @property
    def group_lookup(self) -> PodGroupLookup | None:
        """How routing reads PodGroups: not at all where PodGroup claims are off."""
        return self.pod_group if self.workload_claims else None

    def claim_or_created(self, namespace: str, name: str) -> ResourceClaim | None:
        """The claim from the watch, else the one of that name this process created and the watch
        has not delivered yet (7.3): a status that names it already records it, and needs no write
        until the watch tells more."""
        key = object_key(namespace, name)
        claim = self._claims.get(key)
        if claim is not None:
            return claim
        record = self._just_created.get(self._just_created_names.get(key, ""))
        return record.claim if record is not None else None

    def claims(self) -> Iterator[ResourceClaim]:
        return iter(list(self._claims.values()))

    def cached_objects(self) -> dict[str, int]:
        counts = {
            "pods": len(self._pods),
            "resourceclaims": len(self._claims),
            "resourceclaimtemplates": len(self._templates),
        }
        if self.workload_claims:
            counts["podgroups"] = len(self._pod_groups)
        return counts

    def known_claim(self, namespace: str, name: str, uid: str, resource_version: str) -> ResourceClaim | None:
        """The claim held for this exact version, if any: the same UID and resourceVersion are the
        same object, so a re-delivery (kopf's listing after ours) or the watch catching up with
        our own create needs no parsing."""
        if not resource_version:
            return None
        record = self._just_created.get(uid)
        for claim in (self._claims.get(object_key(namespace, name)), record.claim if record else None):
            if claim is not None and claim.uid == uid and claim.metadata.resource_version == resource_version:
                return claim
        return None

    def is_deleted_consumer(self, uid: str) -> bool:
        """Whether a pod or PodGroup of this UID was seen deleted."""
        return uid in self._deleted_uids

    def pods_using_claim(self, namespace: str, name: str) -> frozenset[str]:
        """Object keys (``ns/name``) of the pods whose entries resolve to this claim."""
        return self._pods_by_claim.get(object_key(namespace, name))

    def pods_using_template(self, namespace: str, name: str) -> frozenset[str]:
        return self._pods_by_template.get(object_key(namespace, name))

    def find_generated_claim(self, namespace: str, owner_uid: str, entry_name: str) -> ResourceClaim | None:
        """The claim already generated for (pod or PodGroup, entry), from the watch or this
        process (7.3).

        Several matches are only possible after an outside actor or an older controller
        created extras; the oldest wins so that every retry picks the same one.
        """
        entry_key = _entry_key(object_key(namespace, owner_uid), entry_name)
        matches: dict[str, ResourceClaim] = {}
        for key in self._claims_by_entry.get(entry_key):
            claim = self._claims[key]
            matches[claim.uid] = claim
        for uid in self._just_created_by_entry.get(entry_key):
            record = self._just_created[uid]
            matches.setdefault(record.claim.uid, record.claim)
        if not matches:
            return None
        # RFC 3339 timestamps in the API's fixed UTC format sort correctly as strings.
        return min(
            matches.values(), key=lambda claim: (claim.metadata.creation_timestamp or "\uffff", claim.name)
        )

    # Watch events. ``event_type`` is the watch type; anything but DELETED (including the
    # initial listing, which kopf reports without a type) adds or replaces the object.

    def apply_pod_event(self, event_type: str | None, pod: Pod) -> list[Key]:
        key = object_key(pod.namespace, pod.name)
        removed = event_type == DELETED
        stored = self._pods.get(key)
        keys: list[Key] = []
        if stored is not None and (not removed or stored.uid == pod.uid):
            self._unindex_pod(key, stored)
            del self._pods[key]
            if stored.uid != pod.uid:
                # A new pod of that name means the stored one is gone. Its own deletion may never
                # name its claims: after a watch gap it comes after the new pod, as a tombstone.
                keys.extend(self._removed_pod_keys(stored))
        if not pod_has_claims(pod):
            return keys
        if removed:
            return self._removed_pod_keys(pod)
        self._pods[key] = pod
        self._index_pod(key, pod)
        keys.extend(
            route_pod(pod, removed=False, lookup_claim=self.claim_or_created, lookup_group=self.group_lookup)
        )
        keys.extend(self._unrecorded_claim_keys(pod))
        return keys

    def _removed_pod_keys(self, pod: Pod) -> list[Key]:
        """Remembers a removed pod and routes the claims it leaves."""
        self._deleted_uids.add(pod.uid)
        return route_pod(
            pod, removed=True, lookup_claim=self.claim_or_created, lookup_group=self.group_lookup
        )

    def _unrecorded_claim_keys(self, pod: Pod) -> list[Key]:
        """The claims generated for ``pod`` that its status does not name while it names another
        for the same entry: duplicates, which the claim sync deletes. Routed on the pod's events
        because the status may come to name the other claim after the duplicate's own events.
        A duplicate needs two claims of the pod: with one (every pod event but a raced hand-over's)
        nothing is read."""
        owned = self._claims_by_owner.get(object_key(pod.namespace, pod.uid))
        if len(owned) < 2:
            return []
        recorded = {s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses}
        keys = []
        for key in owned:
            claim = self._claims[key]
            entry = claim.metadata.annotations.get(POD_CLAIM_NAME_ANNOTATION)
            if entry is not None and recorded.get(entry) not in (None, claim.name):
                keys.append(Key(CLAIM, claim.namespace, claim.name))
        return keys

    def apply_claim_event(self, event_type: str | None, claim: ResourceClaim) -> list[Key]:
        key = object_key(claim.namespace, claim.name)
        removed = event_type == DELETED
        stored = self._claims.get(key)
        if stored is not None and (not removed or stored.uid == claim.uid):
            self._claims_by_owner.discard(self._owner_keys(stored), key)
            self._claims_by_entry.discard(_generated_entry_keys(stored), key)
            del self._claims[key]
        if not removed:
            self._claims[key] = claim
            self._claims_by_owner.add(self._owner_keys(claim), key)
            self._claims_by_entry.add(_generated_entry_keys(claim), key)
        # The watch has now seen this claim (or its end): the record has done its job.
        self._forget_created(claim.uid)

        keys = [] if removed else [Key(CLAIM, claim.namespace, claim.name)]
        keys.extend(self._route_pods(self._pods_by_claim.get(key)))
        keys.extend(self._route_pod_groups(self._pod_groups_by_claim.get(key)))
        return keys

    def apply_template_event(self, event_type: str | None, template: ResourceClaimTemplate) -> list[Key]:
        key = object_key(template.namespace, template.name)
        if event_type == DELETED:
            stored = self._templates.get(key)
            # After a watch gap the deletion of a replaced template comes after its successor.
            if stored is not None and stored.metadata.uid == template.metadata.uid:
                del self._templates[key]
            return []
        self._templates[key] = template
        keys = self._route_pods(self._pods_by_template.get(key))
        keys.extend(self._route_pod_groups(self._pod_groups_by_template.get(key)))
        return keys

    def apply_pod_group_event(self, event_type: str | None, group: PodGroup) -> list[Key]:
        """A PodGroup event: the group's own keys, then its members'.

        Members are routed on every event of their group, with or without claims: a member
        waits for its group to exist, and a new status entry (a generated claim's name) is what
        lets members record that claim.
        """
        key = object_key(group.namespace, group.name)
        removed = event_type == DELETED
        stored = self._pod_groups.get(key)
        keys: list[Key] = []
        if stored is not None and (not removed or stored.uid == group.uid):
            self._unindex_pod_group(key, stored)
            del self._pod_groups[key]
            if stored.uid != group.uid:
                # As for pods: the replaced group is gone, and its tombstone may come too late.
                keys.extend(self._removed_pod_group_keys(stored))
        if removed:
            keys.extend(self._removed_pod_group_keys(group))
        else:
            self._pod_groups[key] = group
            self._index_pod_group(key, group)
            keys.extend(route_pod_group(group, removed=False, lookup_claim=self.claim_or_created))
        keys.extend(self._route_pods(self._pods_by_pod_group.get(key)))
        return keys

    def _removed_pod_group_keys(self, group: PodGroup) -> list[Key]:
        """Remembers a removed PodGroup and routes the claims it leaves."""
        self._deleted_uids.add(group.uid)
        return route_pod_group(group, removed=True, lookup_claim=self.claim_or_created)

    # The just-created record (7.3).

    def record_created(self, claim: ResourceClaim) -> None:
        """Remember a claim this process created until the watch delivers it."""
        if _owner_key(claim) is None:
            return
        cached = self._claims.get(object_key(claim.namespace, claim.name))
        if cached is not None and cached.uid == claim.uid:
            # The watch was faster than the create response; nothing left to bridge.
            return
        self._forget_created(claim.uid)
        self._just_created[claim.uid] = _JustCreated(claim, self._clock() + JUST_CREATED_CONFIRMATION_SECONDS)
        self._just_created_by_entry.add(_generated_entry_keys(claim), claim.uid)
        self._just_created_names[object_key(claim.namespace, claim.name)] = claim.uid

    def _forget_created(self, claim_uid: str) -> None:
        record = self._just_created.pop(claim_uid, None)
        if record is None:
            return
        self._just_created_by_entry.discard(_generated_entry_keys(record.claim), claim_uid)
        key = object_key(record.claim.namespace, record.claim.name)
        if self._just_created_names.get(key) == claim_uid:
            del self._just_created_names[key]

    def unconfirmed_created_claims(self) -> list[ResourceClaim]:
        """Recorded claims the watch has not confirmed within 60 s: they need a live GET."""
        now = self._clock()
        return [record.claim for record in self._just_created.values() if record.check_at <= now]

    def confirm_created(self, claim_uid: str, live_uid: str | None) -> None:
        """Apply a live GET by name: ``live_uid`` is the UID found, or None on 404."""
        record = self._just_created.get(claim_uid)
        if record is None:
            return
        if live_uid == claim_uid:
            record.check_at = self._clock() + JUST_CREATED_CONFIRMATION_SECONDS
        else:
            self._forget_created(claim_uid)

    def just_created_count(self) -> int:
        return len(self._just_created)

    # Internals.

    def _route_pods(self, keys: Iterable[str]) -> list[Key]:
        routed: list[Key] = []
        for key in sorted(keys):
            pod = self._pods.get(key)
            if pod is not None:
                routed.extend(
                    route_pod(
                        pod, removed=False, lookup_claim=self.claim_or_created, lookup_group=self.group_lookup
                    )
                )
        return routed

    def _route_pod_groups(self, keys: Iterable[str]) -> list[Key]:
        """Groups whose claim or template changed, and their members, as upstream's
        ``enqueuePodGroup``."""
        routed: list[Key] = []
        for key in sorted(keys):
            group = self._pod_groups.get(key)
            if group is not None:
                routed.extend(route_pod_group(group, removed=False, lookup_claim=self.claim_or_created))
                routed.extend(self._route_pods(self._pods_by_pod_group.get(key)))
        return routed

    @staticmethod
    def _owner_keys(claim: ResourceClaim) -> list[str]:
        owner_key = _owner_key(claim)
        return [owner_key] if owner_key is not None else []

    def _index_pod(self, key: str, pod: Pod) -> None:
        self._pods_by_claim.add(self._claim_keys_of(pod), key)
        self._pods_by_template.add(self._template_keys_of(pod), key)
        self._pods_by_pod_group.add(self._pod_group_keys_of(pod), key)

    def _unindex_pod(self, key: str, pod: Pod) -> None:
        self._pods_by_claim.discard(self._claim_keys_of(pod), key)
        self._pods_by_template.discard(self._template_keys_of(pod), key)
        self._pods_by_pod_group.discard(self._pod_group_keys_of(pod), key)

    def _index_pod_group(self, key: str, group: PodGroup) -> None:
        self._pod_groups_by_claim.add(self._group_claim_keys_of(group), key)
        self._pod_groups_by_template.add(self._group_template_keys_of(group), key)

    def _unindex_pod_group(self, key: str, group: PodGroup) -> None:
        self._pod_groups_by_claim.discard(self._group_claim_keys_of(group), key)
        self._pod_groups_by_template.discard(self._group_template_keys_of(group), key)

    @staticmethod
    def _pod_group_keys_of(pod: Pod) -> set[str]:
        return {object_key(pod.namespace, pod.pod_group_name)} if pod.pod_group_name else set()

    @staticmethod
    def _group_claim_keys_of(group: PodGroup) -> set[str]:
        return {object_key(group.namespace, name) for name in resolved_group_claim_names(group)}

    @staticmethod
    def _group_template_keys_of(group: PodGroup) -> set[str]:
        return {
            object_key(group.namespace, entry.resource_claim_template_name)
            for entry in group.spec.resource_claims
            if entry.resource_claim_template_name is not None
        }

    @staticmethod
    def _claim_keys_of(pod: Pod) -> set[str]:
        return {object_key(pod.namespace, name) for name in resolved_claim_names(pod)}

    @staticmethod
    def _template_keys_of(pod: Pod) -> set[str]:
        return {
            object_key(pod.namespace, entry.resource_claim_template_name)
            for entry in pod.spec.resource_claims
            if entry.resource_claim_template_name is not None
        }
