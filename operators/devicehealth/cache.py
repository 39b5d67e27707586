"""The device-health operator's view of the cluster, and which policies an event concerns.

Pure: the controller feeds it watch events (raw bodies) and enqueues the policy names each method
returns. A body that does not parse is dropped from the cache (and logged by the caller).

What is kept, and why no more:

* policies, ResourceSlices and DeviceClasses: whole (the scope and the slice signal read them);
* pods: only those that report ``allocatedResourcesStatus`` for a claim (the kubelet signal);
  the controller drops pods without claims before parsing them (:mod:`operators.dra.pods`);
* ResourceClaims: only allocated ones (a report names a claim; the dry run counts their pods);
* DeviceTaintRules: only those a DeviceHealthPolicy controls.

Every change of a slice, pod, claim or class concerns every policy: a policy's scope and signals
may name any device. A rule concerns its controlling policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.core.models import UnparsableObject, parse

from .models import (
    API_VERSION,
    KIND,
    AllocatedClaim,
    DeviceClass,
    DeviceTaintRule,
    HealthPolicy,
    Pod,
    ResourceSlice,
)

__all__ = ["ClusterCache"]


def _meta(body: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = body.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _name(body: Mapping[str, Any]) -> str:
    return str(_meta(body).get("name") or "")


def _key(body: Mapping[str, Any]) -> tuple[str, str]:
    return (str(_meta(body).get("namespace") or ""), _name(body))


def _owning_policy(body: Mapping[str, Any]) -> str | None:
    """The UID of the DeviceHealthPolicy that controls a rule, read before parsing it."""
    for ref in _meta(body).get("ownerReferences") or ():
        if (
            isinstance(ref, Mapping)
            and ref.get("controller")
            and ref.get("kind") == KIND
            and ref.get("apiVersion") == API_VERSION
        ):
            return str(ref.get("uid") or "")
    return None


class ClusterCache:
    def __init__(self) -> None:
        self.policies: dict[str, HealthPolicy] = {}
        self.slices: dict[str, ResourceSlice] = {}
        self.classes: dict[str, DeviceClass] = {}
        self.pods: dict[tuple[str, str], Pod] = {}
        self.claims: dict[tuple[str, str], AllocatedClaim] = {}
        self.rules: dict[str, DeviceTaintRule] = {}

    # --- Events; each returns the names of the policies to reconcile ---------------------------------

    def upsert_policy(self, body: Mapping[str, Any]) -> list[str]:
        name = _name(body)
        try:
            self.policies[name] = parse(HealthPolicy, body)
        except UnparsableObject:
            self.policies.pop(name, None)
            raise
        return [name]

    def delete_policy(self, body: Mapping[str, Any]) -> list[str]:
        # Its rules go with the garbage collector; nothing is left to reconcile for it.
        self.policies.pop(_name(body), None)
        return []

    def upsert_slice(self, body: Mapping[str, Any]) -> list[str]:
        name = _name(body)
        try:
            self.slices[name] = parse(ResourceSlice, body)
        except UnparsableObject:
            self.slices.pop(name, None)
            raise
        return self.every_policy()

    def delete_slice(self, body: Mapping[str, Any]) -> list[str]:
        return self.every_policy() if self.slices.pop(_name(body), None) is not None else []

    def upsert_class(self, body: Mapping[str, Any]) -> list[str]:
        name = _name(body)
        try:
            self.classes[name] = parse(DeviceClass, body)
        except UnparsableObject:
            self.classes.pop(name, None)
            raise
        return self.every_policy()

    def delete_class(self, body: Mapping[str, Any]) -> list[str]:
        self.classes.pop(_name(body), None)
        return self.every_policy()

    def cached_pod(self, namespace: str, name: str) -> Pod | None:
        return self.pods.get((namespace, name))

    def upsert_pod(self, body: Mapping[str, Any]) -> list[str]:
        key = _key(body)
        had = self.pods.pop(key, None) is not None
        pod = parse(Pod, body)
        if any(pod.containers_reporting):
            self.pods[key] = pod
        elif not had:
            return []
        return self.every_policy()

    def delete_pod(self, body: Mapping[str, Any]) -> list[str]:
        return self.every_policy() if self.pods.pop(_key(body), None) is not None else []

    def upsert_claim(self, body: Mapping[str, Any]) -> list[str]:
        key = _key(body)
        had = self.claims.pop(key, None) is not None
        claim = parse(AllocatedClaim, body)
        if claim.status.allocation is not None:
            self.claims[key] = claim
        elif not had:
            return []
        return self.every_policy()

    def delete_claim(self, body: Mapping[str, Any]) -> list[str]:
        return self.every_policy() if self.claims.pop(_key(body), None) is not None else []

    def upsert_rule(self, body: Mapping[str, Any]) -> list[str]:
        name = _name(body)
        previous = self.rules.pop(name, None)
        owner = _owning_policy(body)
        if owner is not None:
            self.rules[name] = parse(DeviceTaintRule, body)
        return self._owned_by({owner} | _owners(previous))

    def delete_rule(self, body: Mapping[str, Any]) -> list[str]:
        return self._owned_by(_owners(self.rules.pop(_name(body), None)))

    # --- Queries ---------------------------------------------------------------------------------------

    def every_policy(self) -> list[str]:
        return sorted(self.policies)

    def rules_of(self, uid: str) -> list[DeviceTaintRule]:
        return [rule for rule in self.rules.values() if rule.metadata.controlled_by(uid)]

    def _owned_by(self, uids: set[str | None]) -> list[str]:
        return sorted(name for name, policy in self.policies.items() if policy.metadata.uid in uids)


def _owners(rule: DeviceTaintRule | None) -> set[str | None]:
    if rule is None:
        return set()
    return {ref.uid for ref in rule.metadata.owner_references if ref.controller}
