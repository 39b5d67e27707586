"""kopf registrations of the binding attacher: thin, cache-and-route only (spec §4).

ResourceClaims, DeviceAttachPolicies and DeviceAttachments are watched with
``runtime.watch`` (``@kopf.on.event`` only), which stores nothing on the
watched objects: no kopf annotation or finalizer ever lands on a claim, and even our own CRDs
carry only the finalizers the attacher sets on purpose. Pods and Nodes are not watched (point
reads, see :mod:`.lookups`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from operators.core import runtime

from .controller import BindingAttacherController
from .models import GROUP, VERSION

registry = kopf.OperatorRegistry()
runtime.install_login(registry)


def _upsert_claim(controller: BindingAttacherController, body: Mapping[str, Any]) -> None:
    controller.observe_claim(body)


def _delete_claim(controller: BindingAttacherController, body: Mapping[str, Any]) -> None:
    controller.forget_claim(body)


def _upsert_policy(controller: BindingAttacherController, body: Mapping[str, Any]) -> None:
    controller.observe_policy(body)


def _delete_policy(controller: BindingAttacherController, body: Mapping[str, Any]) -> None:
    controller.forget_policy(body)


def _upsert_record(controller: BindingAttacherController, body: Mapping[str, Any]) -> None:
    controller.observe_record(body)


def _delete_record(controller: BindingAttacherController, body: Mapping[str, Any]) -> None:
    controller.forget_record(body)


runtime.watch(registry, "resource.k8s.io", "v1", "resourceclaims", upsert=_upsert_claim, delete=_delete_claim)
runtime.watch(registry, GROUP, VERSION, "deviceattachpolicies", upsert=_upsert_policy, delete=_delete_policy)
runtime.watch(registry, GROUP, VERSION, "deviceattachments", upsert=_upsert_record, delete=_delete_record)
