"""The built-in DeviceTaintRule as every operator reads it: API coordinates, one typed projection, and
how the project applies a rule's selection.

The fields read are named alike in ``v1``, ``v1beta2`` and ``v1alpha3``, so one projection serves all
three. Operators layer their own needs on it by subclassing: a cache of every rule may drop conditions
it never looks at, a writer of rules may add the labels it manages.

Every consumer that decides which devices a rule taints goes through :func:`rule_matches`, so none of
them ever selects more devices than the rule does (:func:`narrows_beyond_names`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Annotated, Any

from operators.core.conditions import ObservedCondition
from operators.core.models import KubeModel, LeanMeta, NoneAsEmpty

from .pools import DeviceId
from .taints import DeviceTaint, DeviceTaintSelector, selector_matches

KIND = "DeviceTaintRule"
PLURAL = "devicetaintrules"
VERSIONS = ("v1", "v1beta2", "v1alpha3")
"""Newest first: an operator watches (or writes through) the first one the cluster serves. 1.37 serves
``v1``, 1.36 ``v1beta2`` (off by default) and 1.35 ``v1alpha3`` (off by default)."""

EVICTION_IN_PROGRESS = "EvictionInProgress"

EVICTIONS_PER_MINUTE = "dra-operators.io/evictions-per-minute"
"""The project's annotation that paces the evictions a rule's ``NoExecute`` taint causes: devicetaint
reads it, and whoever writes rules (a person, a policy of the project) may set it."""


class RuleDeviceSelector(DeviceTaintSelector):
    """``spec.deviceSelector``; the two fields below existed only in 1.34's ``v1alpha3``.

    Kubernetes 1.35 tombstoned them in every version, but a server older than that, or a future
    version that brings them back, may still send them. They are read so that a consumer can tell a
    rule narrows its devices by class or CEL, which driver, pool and device alone do not express.
    """

    device_class_name: str | None = None
    selectors: tuple[object, ...] | None = None


def narrows_beyond_names(selector: RuleDeviceSelector | None) -> tuple[str, ...]:
    """The fields (API names) by which ``selector`` narrows its devices beyond driver, pool and device.

    A consumer that matched only those three names on such a rule would select every device of the
    driver where the rule meant one class or one CEL expression, and for ``NoExecute`` evict pods it
    never meant. Kubernetes 1.35 and later match only the three names, so no consumer applies such a
    rule at all (empty: the selection is the names' own). A class name, even an empty one, narrows;
    an empty list of CEL selectors does not.
    """
    if selector is None:
        return ()
    fields: list[str] = []
    if selector.device_class_name is not None:
        fields.append("deviceClassName")
    if selector.selectors:
        fields.append("selectors")
    return tuple(fields)


def rule_matches(selector: RuleDeviceSelector | None, driver: str, pool: str, device: str) -> bool:
    """Whether a rule with ``selector`` taints the device: never for a selector that narrows beyond
    the names; a missing selector matches no device, an empty one every device."""
    return not narrows_beyond_names(selector) and selector_matches(selector, driver, pool, device)


class RuleSpec(KubeModel):
    device_selector: RuleDeviceSelector | None = None
    taint: DeviceTaint


class RuleStatus(KubeModel):
    conditions: Annotated[tuple[ObservedCondition, ...], NoneAsEmpty] = ()


class DeviceTaintRule(KubeModel):
    metadata: LeanMeta
    spec: RuleSpec
    status: RuleStatus = RuleStatus()

    @property
    def narrowing_fields(self) -> tuple[str, ...]:
        """The selector fields that keep every consumer from applying this rule (see
        :func:`narrows_beyond_names`)."""
        return narrows_beyond_names(self.spec.device_selector)

    @property
    def eviction_condition(self) -> ObservedCondition | None:
        return next((c for c in self.status.conditions if c.type == EVICTION_IN_PROGRESS), None)


# --- A rule owned by a project object ----------------------------------------------------------------

_MAX_NAME = 253
_DIGEST_LENGTH = 12


def owned_rule_name(owner_name: str, device: DeviceId) -> str:
    """``<owner name>-<12 hex digits of sha256([driver, pool, device])>``: a valid DNS subdomain,
    stable over restarts (a device keeps its rule) and distinct per owner name and device."""
    digest = hashlib.sha256(json.dumps(list(device)).encode()).hexdigest()[:_DIGEST_LENGTH]
    prefix = owner_name[: _MAX_NAME - _DIGEST_LENGTH - 1].rstrip("-.")
    return f"{prefix}-{digest}"


def owned_rule_prefix(owner_name: str) -> str:
    """What every :func:`owned_rule_name` of ``owner_name`` starts with (long names are truncated)."""
    sample = owned_rule_name(owner_name, DeviceId("", "", ""))
    return sample[: sample.rindex("-") + 1]


def taint_body(key: str, value: str, effect: str) -> dict[str, Any]:
    """A rule's ``spec.taint``; ``timeAdded`` is left to kube-apiserver, which sets it on create and
    restarts it when the effect changes."""
    body: dict[str, Any] = {"key": key, "effect": effect}
    if value:
        body["value"] = value
    return body


def owned_rule(
    *,
    name: str,
    api_version: str,
    owner: Mapping[str, str],
    device: DeviceId,
    taint: Mapping[str, Any],
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> dict[str, Any]:
    """The whole DeviceTaintRule that taints one device for a project object.

    ``owner`` names the object (``apiVersion``, ``kind``, ``name``, ``uid``); it becomes the
    controller owner reference, so deleting the object lets the garbage collector delete its rules.
    No ``blockOwnerDeletion``: the owner's writer would need ``update`` on its finalizers."""
    reference = {**owner, "controller": True}
    return {
        "apiVersion": api_version,
        "kind": KIND,
        "metadata": {
            "name": name,
            "labels": dict(labels),
            "annotations": dict(annotations),
            "ownerReferences": [reference],
        },
        "spec": {
            "deviceSelector": {"driver": device.driver, "pool": device.pool, "device": device.device},
            "taint": dict(taint),
        },
    }
