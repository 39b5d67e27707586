"""kopf wiring of the devicetaint operator: the watched kinds, and nothing else.

Every kind is watched through :func:`operators.core.runtime.watch` (``@kopf.on.event`` only),
which stores nothing on the objects: Pods, ResourceClaims, ResourceSlices and
DeviceTaintRules never carry a kopf annotation or finalizer (spec §15).
"""

from __future__ import annotations

import kopf

from operators.core import runtime
from operators.dra import taintrules

from .apis import CORE_VERSION, GROUP
from .controller import DeviceTaintController

registry = kopf.OperatorRegistry()
runtime.install_login(registry)

runtime.watch(
    registry,
    "",
    CORE_VERSION,
    "pods",
    upsert=DeviceTaintController.upsert_pod,
    delete=DeviceTaintController.delete_pod,
)
runtime.watch(
    registry,
    GROUP,
    CORE_VERSION,
    "resourceclaims",
    upsert=DeviceTaintController.upsert_claim,
    delete=DeviceTaintController.delete_claim,
)
runtime.watch(
    registry,
    GROUP,
    CORE_VERSION,
    "resourceslices",
    upsert=DeviceTaintController.upsert_slice,
    delete=DeviceTaintController.delete_slice,
)


def watch_rules(version: str) -> None:
    """Add the DeviceTaintRule watch for the discovered version; called before kopf starts."""
    runtime.watch(
        registry,
        GROUP,
        version,
        taintrules.PLURAL,
        upsert=DeviceTaintController.upsert_rule,
        delete=DeviceTaintController.delete_rule,
    )
