"""kopf registrations of the resourceclaim operator (spec section 13).

Pods, ResourceClaims and ResourceClaimTemplates are watched with ``runtime.watch`` only
(``@kopf.on.event`` only), which stores nothing on the objects: no
``kopf.zalando.org/*`` annotation and no kopf finalizer ever lands on an object we do not
own. Each callback hands the body to the controller, which updates its cache and enqueues.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from operators.core import runtime

from .controller import ResourceClaimController

DELETED = "DELETED"

registry = kopf.OperatorRegistry()
runtime.install_login(registry)


def _upsert_pod(controller: ResourceClaimController, body: Mapping[str, Any]) -> None:
    controller.observe_pod(None, body)


def _delete_pod(controller: ResourceClaimController, body: Mapping[str, Any]) -> None:
    controller.observe_pod(DELETED, body)


def _upsert_claim(controller: ResourceClaimController, body: Mapping[str, Any]) -> None:
    controller.observe_claim(None, body)


def _delete_claim(controller: ResourceClaimController, body: Mapping[str, Any]) -> None:
    controller.observe_claim(DELETED, body)


def _upsert_template(controller: ResourceClaimController, body: Mapping[str, Any]) -> None:
    controller.observe_template(None, body)


def _delete_template(controller: ResourceClaimController, body: Mapping[str, Any]) -> None:
    controller.observe_template(DELETED, body)


runtime.watch(registry, "", "v1", "pods", upsert=_upsert_pod, delete=_delete_pod)
runtime.watch(registry, "resource.k8s.io", "v1", "resourceclaims", upsert=_upsert_claim, delete=_delete_claim)
runtime.watch(
    registry,
    "resource.k8s.io",
    "v1",
    "resourceclaimtemplates",
    upsert=_upsert_template,
    delete=_delete_template,
)
