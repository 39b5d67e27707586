"""kopf registrations of the pool-status operator: caches fed by list+watch, nothing more.

Every kind is watched with :func:`operators.core.runtime.watch` (an index handler and an
event handler), which stores nothing on the watched objects: requests never get kopf
annotations, finalizers or progress records (spec section 4.4). Both request surfaces are
registered; kopf watches only those the API server serves, and the controller ignores a
surface it decided not to serve.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from operators.core import runtime

from . import surfaces
from .controller import PoolStatusController
from .surfaces import Surface

registry = kopf.OperatorRegistry()
runtime.install_login(registry)

runtime.watch(
    registry,
    "resource.k8s.io",
    "v1",
    "resourceslices",
    upsert=PoolStatusController.upsert_slice,
    delete=PoolStatusController.delete_slice,
)
runtime.watch(
    registry,
    "resource.k8s.io",
    "v1",
    "resourceclaims",
    upsert=PoolStatusController.upsert_claim,
    delete=PoolStatusController.delete_claim,
)
runtime.watch(
    registry,
    "resource.k8s.io",
    "v1",
    "devicetaintrules",
    upsert=PoolStatusController.upsert_rule,
    delete=PoolStatusController.delete_rule,
)


def watch_requests(surface: Surface) -> None:
    """Watch the requests of a surface the operator serves; called from ``prepare()``, so that
    an unserved surface (the built-in API left to kube-controller-manager) is not watched."""

    def upsert(controller: PoolStatusController, body: Mapping[str, Any]) -> None:
        controller.upsert_request(surface, body)

    def delete(controller: PoolStatusController, body: Mapping[str, Any]) -> None:
        controller.delete_request(surface, body)

    runtime.watch(registry, surface.group, surface.version, surfaces.PLURAL, upsert=upsert, delete=delete)
