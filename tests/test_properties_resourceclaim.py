"""Properties of the resourceclaim operator on generated clusters (spec resourceclaim.md).

A generated cluster is one namespace's pods, PodGroups, claims and templates, with names drawn
from small pools so that statuses name existing claims, claims are owned by the pods and groups
at hand, and members share their group's entries. The syncs run against a fake API that
answers every call as kube-apiserver would, or fails the first status write when asked.

Examples per property (the ``unit`` profile; ``thorough`` runs ten times as many):

- ``test_routing_and_parsing_never_fail``: 150
- ``test_pod_sync_maps_each_entry_to_one_claim``: 200
- ``test_pod_group_sync_applies_sorted_unique_statuses``: 150
- ``test_claim_sync_keeps_unknown_consumers``: 150
- ``test_generate_name_stays_within_the_limit``: 300
- ``test_the_cache_after_events_equals_a_fresh_listing``: 100
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from resourceclaim_builders import (
    Action,
    ApplyPodGroupStatus,
    ApplyPodStatus,
    CreateClaim,
    Failed,
    FakeApi,
    Ok,
    PutClaim,
    PutClaimStatus,
    Reply,
    cache_with,
)
from strategies import (
    CLAIM_NAMES,
    TEMPLATE_NAMES,
    Body,
    claim_bodies,
    dns_labels,
    dns_subdomains,
    examples,
    pod_bodies,
    pod_consumer,
    pod_group_bodies,
    pod_group_consumer,
    pod_group_owner,
    pod_owner,
    template_bodies,
    uids,
)

from operators.core.keys import CLAIM, POD, Key
from operators.core.reconcile import Done, GiveUp, Requeue, Retry
from operators.dra.podgroups import POD_GROUPS, PodGroup
from operators.resourceclaim.cache import ClusterCache
from operators.resourceclaim.claim_sync import sync_claim
from operators.resourceclaim.constants import MAX_GENERATE_NAME_BASE, POD_CLAIM_NAME_ANNOTATION
from operators.resourceclaim.group_sync import sync_pod_group
from operators.resourceclaim.models import Pod, ResourceClaim, ResourceClaimTemplate
from operators.resourceclaim.naming import claim_generate_name
from operators.resourceclaim.pod_sync import sync_pod
from operators.resourceclaim.resolution import POD_GROUP, is_for_pod

NS = "demo"
RESULTS = (Done, Requeue, Retry, GiveUp)
# kube-apiserver's alphabet for the random suffix of a generated name.
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _suffix(index: int) -> str:
    letters = []
    for _ in range(5):
        index, digit = divmod(index, len(_SUFFIX_ALPHABET))
        letters.append(_SUFFIX_ALPHABET[digit])
    return "".join(letters)


class Apiserver(FakeApi):
    """The fake API with a distinct random suffix per created claim, as the real one guarantees."""

    def __init__(self) -> None:
        super().__init__()
        self.replies: list[tuple[Action, Reply]] = []

    def __call__(self, action: Action) -> Reply:
        reply = super().__call__(action)
        if isinstance(action, CreateClaim) and isinstance(reply, Ok) and reply.body is not None:
            metadata = reply.body["metadata"]
            metadata["name"] = metadata["generateName"] + _suffix(len(self.created) - 1)
        self.replies.append((action, reply))
        return reply


@dataclass
class World:
    pods: list[Body]
    groups: list[Body]
    claims: list[Body]
    templates: list[Body]
    workload_claims: bool

    def cache(self) -> ClusterCache:
        return cache_with(
            pods=[Pod.model_validate(body) for body in self.pods],
            claims=[ResourceClaim.from_body(body) for body in self.claims],
            templates=[ResourceClaimTemplate.model_validate(body) for body in self.templates],
            pod_groups=[PodGroup.model_validate(body) for body in self.groups],
            workload_claims=self.workload_claims,
        )


def _named(bodies: list[Body], section: str, entries: str, field: str) -> set[str]:
    """The names the bodies' ``<section>.<entries>[].<field>`` hold, where set."""
    return {entry[field] for body in bodies for entry in body[section].get(entries) or [] if field in entry}


@st.composite
def worlds(draw: st.DrawFn) -> World:
    group_names = draw(st.lists(dns_labels("pg", "pg-2"), max_size=2, unique=True))
    groups = [draw(pod_group_bodies(NS, name, claim_names=CLAIM_NAMES)) for name in group_names]
    pod_names = draw(
        st.lists(dns_subdomains("my-pod", "worker-0", "worker-1"), min_size=1, max_size=3, unique=True)
    )
    pods = []
    for name in pod_names:
        member_of = draw(st.one_of(st.none(), st.sampled_from([*group_names, "missing-group"])))
        body = draw(pod_bodies(NS, name, claim_names=CLAIM_NAMES, pod_group=member_of))
        group = next((g for g in groups if g["metadata"]["name"] == member_of), None)
        shared = (group or {}).get("spec", {}).get("resourceClaims") or []
        if shared and draw(st.booleans()):
            # A member repeats its group's entries, which is how it shares their claims.
            own = [
                e
                for e in body["spec"].get("resourceClaims") or []
                if e["name"] not in {s["name"] for s in shared}
            ]
            body["spec"]["resourceClaims"] = [*own, *copy.deepcopy(shared)]
            body["status"].pop("resourceClaimStatuses", None)
        pods.append(body)

    owners = [pod_owner(p["metadata"]["name"], p["metadata"]["uid"]) for p in pods]
    owners += [pod_group_owner(g["metadata"]["name"], g["metadata"]["uid"]) for g in groups]
    owners.append(pod_owner("gone", draw(uids())))
    consumers = [pod_consumer(p["metadata"]["name"], p["metadata"]["uid"]) for p in pods]
    consumers += [pod_group_consumer(g["metadata"]["name"], g["metadata"]["uid"]) for g in groups]
    consumers.append(pod_consumer("gone", draw(uids())))

    recorded = _named(pods + groups, "status", "resourceClaimStatuses", "resourceClaimName")
    claim_names = draw(st.lists(st.sampled_from(sorted({*CLAIM_NAMES, *recorded})), unique=True))
    claims = [draw(claim_bodies(NS, name, owners=owners, consumers=consumers)) for name in claim_names]
    referenced = _named(pods + groups, "spec", "resourceClaims", "resourceClaimTemplateName")
    template_names = draw(st.lists(st.sampled_from(sorted({*TEMPLATE_NAMES, *referenced})), unique=True))
    templates = [draw(template_bodies(NS, name)) for name in template_names]
    return World(pods, groups, claims, templates, draw(st.booleans()))


def _applied_statuses(body: Body) -> list[dict[str, str]]:
    entries: list[dict[str, str]] = body["status"]["resourceClaimStatuses"]
    return entries


def _check_applied(entries: list[dict[str, str]]) -> None:
    names = [entry["name"] for entry in entries]
    assert names == sorted(names), names
    assert len(set(names)) == len(names), names
    assert all(entry.get("resourceClaimName") for entry in entries), entries


def _server_side_apply(stored: Body, applied: list[dict[str, str]]) -> Body:
    """The object after our apply: our entries, and the entries other managers own (those our
    apply leaves out: the ones without a claim name)."""
    body = copy.deepcopy(stored)
    names = {entry["name"] for entry in applied}
    kept = [e for e in body["status"].get("resourceClaimStatuses") or [] if e["name"] not in names]
    body["status"]["resourceClaimStatuses"] = [*applied, *kept]
    return body


def _creates_per_entry(api: FakeApi) -> Counter[tuple[str, str]]:
    return Counter(
        (
            body["metadata"]["ownerReferences"][0]["uid"],
            body["metadata"]["annotations"][POD_CLAIM_NAME_ANNOTATION],
        )
        for body in (action.body for action in api.of_type(CreateClaim))
    )


@examples(150)
@given(worlds())
def test_routing_and_parsing_never_fail(world: World) -> None:
    """Section 5: every event of a valid object is parsed and routed, to well-formed work keys
    only, and a deletion is routed as well as an addition."""
    cache = ClusterCache()
    cache.workload_claims = world.workload_claims
    Feed = tuple[Callable[[str, Any], list[Key]], Callable[[Body], Any], list[Body]]
    groups: Feed = (cache.apply_pod_group_event, PodGroup.model_validate, world.groups)
    templates: Feed = (cache.apply_template_event, ResourceClaimTemplate.model_validate, world.templates)
    claims: Feed = (cache.apply_claim_event, ResourceClaim.from_body, world.claims)
    pods: Feed = (cache.apply_pod_event, Pod.model_validate, world.pods)
    keys: list[Key] = []
    for event, feeds in (("ADDED", (groups, templates, claims, pods)), ("DELETED", (pods, claims, groups))):
        for apply, project, bodies in feeds:
            for body in bodies:
                keys += apply(event, project(body))
    for key in keys:
        assert key.namespace == NS
        assert key.kind in (POD, CLAIM, POD_GROUP)


@examples(200)
@given(worlds(), st.booleans(), st.booleans())
def test_pod_sync_maps_each_entry_to_one_claim(world: World, apply_fails: bool, watch_lags: bool) -> None:
    """Sections 7.1, 7.3 and 7.4: every applied ``resourceClaimStatuses`` list is sorted by name with
    unique names; no (pod, entry) ever gets a second generated claim, even when the status write
    failed and the retry runs before the watch delivers the first claim; and once a sync ends in
    Done, every template entry the pod does not share with its group maps to exactly one claim that
    exists and is the pod's, or is recorded as not needed."""
    cache = world.cache()
    api = Apiserver()
    if apply_fails:
        api.fail(ApplyPodStatus, Failed(409, "the object has been modified"))
    pods = {body["metadata"]["name"]: body for body in world.pods}
    outcomes: dict[str, Any] = {}
    for round_ in range(3):
        for name in sorted(pods):
            before = len(api.replies)
            outcomes[name] = api.run(sync_pod(cache, NS, name, api))
            assert isinstance(outcomes[name], RESULTS)
            for action, reply in api.replies[before:]:
                if isinstance(action, ApplyPodStatus):
                    entries = _applied_statuses(action.body)
                    _check_applied(entries)
                    if isinstance(reply, Ok):
                        pods[name] = _server_side_apply(pods[name], entries)
                        cache.apply_pod_event("MODIFIED", Pod.model_validate(pods[name]))
        if not watch_lags or round_ > 0:
            for body in api.created:
                cache.apply_claim_event("ADDED", ResourceClaim.from_body(body))

    duplicates = {key: count for key, count in _creates_per_entry(api).items() if count > 1}
    assert not duplicates, duplicates

    for name, body in pods.items():
        pod = Pod.model_validate(body)
        if not isinstance(outcomes[name], Done) or pod.metadata.deletion_timestamp is not None:
            continue
        if pod.status.phase in ("Succeeded", "Failed"):
            continue
        group = cache.group_of(pod)
        if cache.workload_claims and pod.pod_group_name and group is None:
            continue
        recorded: dict[str, str | None] = {}
        for status in pod.status.resource_claim_statuses:
            assert status.name not in recorded, pod.status.resource_claim_statuses
            recorded[status.name] = status.resource_claim_name
        for entry in pod.spec.resource_claims:
            if entry.resource_claim_template_name is None or (group is not None and group.shares(entry)):
                continue
            assert entry.name in recorded, (entry, recorded)
            claim_name = recorded[entry.name]
            if claim_name is None:
                continue
            claim = cache.claim(NS, claim_name)
            assert claim is not None, (entry, claim_name)
            assert is_for_pod(claim, pod, group), (entry, claim_name)


@examples(150)
@given(worlds(), st.booleans())
def test_pod_group_sync_applies_sorted_unique_statuses(world: World, apply_fails: bool) -> None:
    """The ``podgroup:`` sync (group_sync, KEP-5729, as 7.4 for pods): the applied list is merged,
    sorted by name and unique, and no (PodGroup, entry) gets a second generated claim."""
    world.workload_claims = True
    cache = world.cache()
    api = Apiserver()
    if apply_fails:
        api.fail(ApplyPodGroupStatus, Failed(409, "the object has been modified"))
    for _ in range(2):
        for body in world.groups:
            outcome = api.run(sync_pod_group(cache, NS, body["metadata"]["name"], api, POD_GROUPS))
            assert isinstance(outcome, RESULTS)
    for action in api.of_type(ApplyPodGroupStatus):
        _check_applied(_applied_statuses(action.body))
        group = next(g for g in world.groups if g["metadata"]["name"] == action.name)
        # Merged: every recorded name survives the apply.
        before = {
            s["name"] for s in group["status"].get("resourceClaimStatuses") or [] if "resourceClaimName" in s
        }
        assert before <= {entry["name"] for entry in _applied_statuses(action.body)}
    duplicates = {key: count for key, count in _creates_per_entry(api).items() if count > 1}
    assert not duplicates, duplicates


@examples(150)
@given(worlds(), st.data())
def test_claim_sync_keeps_unknown_consumers(world: World, data: st.DataObject) -> None:
    """Section 8 and D5: the written ``reservedFor`` is the old one with some pod (or, where
    PodGroup claims are on, PodGroup) entries removed, in order, and entries of any other kind kept;
    the allocation is cleared only when the last consumer goes and the finalizer is there."""
    cache = world.cache()
    api = Apiserver()
    for pod in world.pods:
        if data.draw(st.booleans(), label=f"{pod['metadata']['name']} is live"):
            api.live_pods[pod["metadata"]["name"]] = pod["metadata"]["uid"]
    for group in world.groups:
        api.live_pod_groups[group["metadata"]["name"]] = group["metadata"]["uid"]
    for body in world.claims:
        before = len(api.actions)
        outcome = api.run(sync_claim(cache, NS, body["metadata"]["name"], api, POD_GROUPS))
        assert isinstance(outcome, RESULTS)
        original = list(body["status"].get("reservedFor") or [])
        for action in api.actions[before:]:
            if not isinstance(action, PutClaimStatus):
                continue
            remaining = action.body["status"].get("reservedFor") or []
            iterator = iter(original)
            assert all(any(entry == old for old in iterator) for entry in remaining), (original, remaining)
            for old in original:
                pod_entry = old.get("resource") == "pods" and not old.get("apiGroup")
                group_entry = old.get("apiGroup") == "scheduling.k8s.io" and world.workload_claims
                if not pod_entry and not group_entry:
                    assert old in remaining, (old, remaining)
            if "allocation" not in action.body["status"] and "allocation" in body["status"]:
                assert not remaining
                assert "resource.kubernetes.io/delete-protection" in body["metadata"].get("finalizers", [])
        for action in api.actions[before:]:
            if isinstance(action, PutClaim):
                assert "resource.kubernetes.io/delete-protection" not in action.body["metadata"].get(
                    "finalizers", []
                )


# Pod names of many short labels: a cut lands right after a dot as often as it can.
_DOTTED_NAMES = (
    st.lists(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True), min_size=2, max_size=24)
    .map(".".join)
    .filter(lambda name: len(name) <= 253)
)


@examples(300)
@given(st.one_of(dns_subdomains("my-pod", "a"), _DOTTED_NAMES), dns_labels("gpu"))
def test_generate_name_stays_within_the_limit(pod_name: str, entry_name: str) -> None:
    """Section 7.2: ``generateName`` is ``<pod>-<entry>-`` when that fits 57 characters, else both
    parts shortened in proportion; never longer than 57, and with kube-apiserver's five random
    characters always a valid claim name. Where upstream's shortened form would be refused
    (docs/spec-notes.md), only a dot ending the pod part or a leading hyphen is dropped."""
    name = claim_generate_name(pod_name, entry_name)
    assert len(name) <= MAX_GENERATE_NAME_BASE
    assert _SUBDOMAIN.fullmatch(name + _suffix(0)), name
    base = f"{pod_name}-{entry_name}-"
    if len(base) <= MAX_GENERATE_NAME_BASE:
        assert name == base
        return
    pod_part = pod_name[: len(pod_name) * MAX_GENERATE_NAME_BASE // len(base)]
    entry_part = entry_name[: len(entry_name) * MAX_GENERATE_NAME_BASE // len(base)]
    upstream = f"{pod_part}-{entry_part}"
    if _SUBDOMAIN.fullmatch(upstream + _suffix(0)):
        assert name == upstream
    else:
        assert name == f"{pod_part.removesuffix('.')}-{entry_part}".lstrip("-")


def _feed(cache: ClusterCache, kind: str, event: str | None, body: Body) -> None:
    if kind == "podgroup":
        cache.apply_pod_group_event(event, PodGroup.model_validate(body))
    elif kind == "template":
        cache.apply_template_event(event, ResourceClaimTemplate.model_validate(body))
    elif kind == "claim":
        cache.apply_claim_event(event, ResourceClaim.from_body(body))
    else:
        cache.apply_pod_event(event, Pod.model_validate(body))


_KINDS = ("podgroup", "template", "claim", "pod")


@examples(100)
@given(worlds(), worlds(), st.data())
def test_the_cache_after_events_equals_a_fresh_listing(
    first: World, later: World, data: st.DataObject
) -> None:
    """Sections 3, 5 and 7.3 (cache.py): after objects are replaced by others of the same name (new
    UIDs) and some are deleted, the claims, the pods by claim and by template, and the generated
    claim found for any owner and entry are those of a cache that listed only what is left."""
    cache = ClusterCache()
    cache.workload_claims = first.workload_claims
    left: dict[tuple[str, str], Body] = {}
    for world in (first, later):
        for kind, bodies in zip(
            _KINDS, (world.groups, world.templates, world.claims, world.pods), strict=True
        ):
            for body in bodies:
                _feed(cache, kind, "MODIFIED", body)
                left[(kind, body["metadata"]["name"])] = body
    for key in sorted(left):
        if data.draw(st.booleans(), label=f"delete {key}"):
            _feed(cache, key[0], "DELETED", left.pop(key))
    fresh = ClusterCache()
    fresh.workload_claims = first.workload_claims
    for (kind, _), body in sorted(left.items(), key=lambda item: _KINDS.index(item[0][0])):
        _feed(fresh, kind, None, body)

    pods = [*first.pods, *later.pods]
    names = {body["metadata"]["name"] for body in [*first.claims, *later.claims]}
    names |= {
        entry.get("resourceClaimName") or entry["resourceClaimTemplateName"]
        for body in pods
        for entry in body["spec"].get("resourceClaims") or []
    }
    for name in sorted(names):
        assert cache.claim(NS, name) == fresh.claim(NS, name)
        assert cache.pods_using_claim(NS, name) == fresh.pods_using_claim(NS, name)
        assert cache.pods_using_template(NS, name) == fresh.pods_using_template(NS, name)
    owners = {body["metadata"]["uid"] for body in [*pods, *first.groups, *later.groups]}
    entries = {entry["name"] for body in pods for entry in body["spec"].get("resourceClaims") or []}
    for owner in sorted(owners):
        for entry_name in sorted(entries):
            found = cache.find_generated_claim(NS, owner, entry_name)
            assert found == fresh.find_generated_claim(NS, owner, entry_name)
