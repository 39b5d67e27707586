"""The taint-selector operator's view of the cluster, and which selectors an event concerns.

Pure: the controller feeds it watch events (raw bodies) and enqueues the selector names each method
returns. Everything is keyed by name. An update whose body does not parse changes nothing here: the
controller logs it and makes it the object's deletion
(:meth:`operators.dra.scopes.ScopeController.upsert`), so a malformed object never stops the others
from being handled, nor leaves a selector on a version the cache no longer holds. A deletion
removes what is kept under its name, unless it is the tombstone of another object of that name
(:func:`operators.core.models.stale`).

Which selectors an event concerns:

* a selector: itself;
* a ResourceSlice: every selector, because a class or a CEL expression may select any device;
* a DeviceClass: the selectors naming it;
* a DeviceTaintRule: its controlling selector (its rules feed ``EvictionInProgress``), and the
  selectors whose rule names it could carry (``<selector>-<digest>``): one of them may be waiting for
  a conflicting rule of the same name to go away;
* a ResourceClaim: the selectors with ``effect: None``, whose dry run counts the claims on their
  devices (:mod:`.dryrun`). Only allocated claims are kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from operators.core.models import body_key, body_name, forget, stale, store, store_if
from operators.dra import taintrules
from operators.dra.claims import is_allocated
from operators.dra.scopes import ScopeCache
from operators.dra.taints import EFFECT_NONE

from .dryrun import AllocatedClaim
from .models import DeviceClass, DeviceTaintRule, TaintSelector


def _namespaced_name(body: Mapping[str, Any]) -> str:
    namespace, name = body_key(body)
    return f"{namespace}/{name}"


class ClusterCache(ScopeCache[TaintSelector]):
    def __init__(self) -> None:
        self.selectors: dict[str, TaintSelector] = {}
        super().__init__(self.selectors, TaintSelector)
        self.rules: dict[str, DeviceTaintRule] = {}
        self.claims: dict[str, AllocatedClaim] = {}

    # --- Events; each returns the names of the selectors to reconcile (selectors and slices: the base's)

    def upsert_class(self, body: Mapping[str, Any]) -> list[str]:
        name = body_name(body)
        store(self.classes, name, DeviceClass, body)
        return self._naming_class(name)

    def delete_class(self, body: Mapping[str, Any]) -> list[str]:
        name = body_name(body)
        if stale(body, self.classes.get(name)):
            return []
        self.classes.pop(name, None)
        return self._naming_class(name)

    def upsert_rule(self, body: Mapping[str, Any]) -> list[str]:
        name = body_name(body)
        previous = self.rules.get(name)
        return self._concerned_by_rule(name, [previous, store(self.rules, name, DeviceTaintRule, body)])

    def delete_rule(self, body: Mapping[str, Any]) -> list[str]:
        name = body_name(body)
        if stale(body, self.rules.get(name)):
            return []
        return self._concerned_by_rule(name, [self.rules.pop(name, None)])

    def upsert_claim(self, body: Mapping[str, Any]) -> list[str]:
        allocated = store_if(self.claims, _namespaced_name(body), AllocatedClaim, body, is_allocated)
        return self._dry_runs() if allocated else []

    def delete_claim(self, body: Mapping[str, Any]) -> list[str]:
        return self._dry_runs() if forget(self.claims, _namespaced_name(body), body) is not None else []

    # --- Queries ---------------------------------------------------------------------------------------

    def rules_of(self, uid: str, names: Iterable[str] = ()) -> list[DeviceTaintRule]:
        """The rules ``uid`` controls, plus any rule bearing one of ``names`` (possible conflicts)."""
        wanted = set(names)
        return [
            rule
            for rule in self.rules.values()
            if rule.metadata.controlled_by(uid) or rule.metadata.name in wanted
        ]

    def _dry_runs(self) -> list[str]:
        return sorted(
            name for name, selector in self.selectors.items() if selector.spec.taint.effect == EFFECT_NONE
        )

    def _naming_class(self, class_name: str) -> list[str]:
        return sorted(
            name
            for name, selector in self.selectors.items()
            if selector.spec.device_selector.device_class_name == class_name
        )

    def _concerned_by_rule(self, rule_name: str, versions: Iterable[DeviceTaintRule | None]) -> list[str]:
        controllers = (rule.metadata.controller for rule in versions if rule is not None)
        owners = {controller.uid for controller in controllers if controller is not None}
        return sorted(
            name
            for name, selector in self.selectors.items()
            if selector.metadata.uid in owners or rule_name.startswith(_rule_prefix(name))
        )


def _rule_prefix(selector_name: str) -> str:
    """What every rule name of ``selector_name`` starts with (long names are truncated)."""
    return taintrules.owned_rule_prefix(selector_name)
