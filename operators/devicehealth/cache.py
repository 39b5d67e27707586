"""The device-health operator's view of the cluster, and which policies an event concerns.

Pure: the controller feeds it watch events (raw bodies) and enqueues the policy names each method
returns. An update whose body does not parse changes nothing here: the controller logs it and
makes it the object's deletion (:meth:`operators.dra.scopes.ScopeController.upsert`).

What is kept, and why no more:

* policies, ResourceSlices and DeviceClasses: whole (the scope and the slice signal read them);
* pods: only those that report ``allocatedResourcesStatus`` for a claim (the kubelet signal);
  the controller drops pods without claims before parsing them (:mod:`operators.dra.pods`);
* ResourceClaims: only allocated ones (a report names a claim; the dry run counts their pods);
* DeviceTaintRules: only those a DeviceHealthPolicy controls, and every name with its controller (a
  rule of someone else's that holds the name a policy's rule would take blocks that rule) and UID.

A deletion removes what is kept under the object's name, unless it is the tombstone of another
object of that name (:func:`operators.core.models.stale`).

Every change of a slice, pod, claim or class concerns every policy: a policy's scope and signals
may name any device. A rule concerns its controlling policy; one no policy controls concerns
every policy when it appears or goes, since any may want its name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.core import PROJECT_GROUP
from operators.core.models import (
    body_controller,
    body_key,
    body_metadata,
    body_name,
    forget,
    parse,
    stale,
    store,
    store_if,
    superseded,
)
from operators.dra.claims import is_allocated
from operators.dra.scopes import ScopeCache

from .models import (
    KIND,
    AllocatedClaim,
    DeviceClass,
    DeviceTaintRule,
    HealthPolicy,
    Pod,
)

__all__ = ["ClusterCache"]


def _owning_policy(body: Mapping[str, Any]) -> str | None:
    """The UID of the DeviceHealthPolicy that controls a rule, read before parsing it; in any
    version of the group, as :func:`operators.dra.health.health_policy_of` names it."""
    controller = body_controller(body)
    return controller.uid if controller is not None and controller.is_a(PROJECT_GROUP, KIND) else None


class ClusterCache(ScopeCache[HealthPolicy]):
    def __init__(self) -> None:
        self.policies: dict[str, HealthPolicy] = {}
        super().__init__(self.policies, HealthPolicy)
        self.pods: dict[tuple[str, str], Pod] = {}
        self.claims: dict[tuple[str, str], AllocatedClaim] = {}
        self.rule_controllers: dict[str, str | None] = {}
        """Every DeviceTaintRule's name -> the UID of the policy controlling it (None: no policy)."""
        self.rules: dict[str, DeviceTaintRule] = {}
        self._rule_uids: dict[str, str] = {}
        """Every DeviceTaintRule's name -> its own UID: a rule of someone else's is not kept, and
        its tombstone must still tell it from a successor of the same name."""

    # --- Events; each returns the names of the policies to reconcile (policies and slices: the base's) -

    def upsert_class(self, body: Mapping[str, Any]) -> list[str]:
        store(self.classes, body_name(body), DeviceClass, body)
        return self.every_owner()

    def delete_class(self, body: Mapping[str, Any]) -> list[str]:
        name = body_name(body)
        if stale(body, self.classes.get(name)):
            return []
        self.classes.pop(name, None)
        return self.every_owner()

    def cached_pod(self, namespace: str, name: str) -> Pod | None:
        return self.pods.get((namespace, name))

    def upsert_pod(self, body: Mapping[str, Any]) -> list[str]:
        reporting = store_if(self.pods, body_key(body), Pod, body, lambda pod: any(pod.containers_reporting))
        return self.every_owner() if reporting else []

    def delete_pod(self, body: Mapping[str, Any]) -> list[str]:
        return self.every_owner() if forget(self.pods, body_key(body), body) is not None else []

    def upsert_claim(self, body: Mapping[str, Any]) -> list[str]:
        allocated = store_if(self.claims, body_key(body), AllocatedClaim, body, is_allocated)
        return self.every_owner() if allocated else []

    def delete_claim(self, body: Mapping[str, Any]) -> list[str]:
        return self.every_owner() if forget(self.claims, body_key(body), body) is not None else []

    def upsert_rule(self, body: Mapping[str, Any]) -> list[str]:
        name = body_name(body)
        owner = _owning_policy(body)
        # Read before anything is forgotten: the deletion a rule that cannot be read becomes reads
        # what was kept to find the policy it concerns.
        rule = parse(DeviceTaintRule, body) if owner is not None else None
        previous = self.rules.pop(name, None)
        was_foreign = self.rule_controllers.get(name, "") is None
        self.rule_controllers[name] = owner
        self._rule_uids[name] = str(body_metadata(body).get("uid") or "")
        if rule is not None:
            self.rules[name] = rule
        if (owner is None) != was_foreign:
            return self.every_owner()
        return self._owned_by({owner} | _owners(previous))

    def delete_rule(self, body: Mapping[str, Any]) -> list[str]:
        name = body_name(body)
        # A rule of someone else's is kept as no model, so its UID is kept apart.
        if superseded(body, self._rule_uids.get(name)):
            return []
        self._rule_uids.pop(name, None)
        if name in self.rule_controllers and self.rule_controllers.pop(name) is None:
            return self.every_owner()
        return self._owned_by(_owners(self.rules.pop(name, None)))

    # --- Queries ---------------------------------------------------------------------------------------

    def rules_of(self, uid: str) -> list[DeviceTaintRule]:
        return [rule for rule in self.rules.values() if rule.metadata.controlled_by(uid)]

    def _owned_by(self, uids: set[str | None]) -> list[str]:
        return sorted(name for name, policy in self.policies.items() if policy.metadata.uid in uids)


def _owners(rule: DeviceTaintRule | None) -> set[str | None]:
    controller = rule.metadata.controller if rule is not None else None
    return set() if controller is None else {controller.uid}
