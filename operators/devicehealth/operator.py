"""Entry point of ``dra-operators run devicehealth``: the definition the runtime starts, and the API calls.

``API_CALLS`` lists every (API group, resource, verb) the process uses, kopf's watches and the leader
election included; ``manifests/devicehealth/rbac.yaml`` grants exactly these. Rules are created,
patched and deleted, never read one by one (the watch cache serves); policies need no
``finalizers`` or ``update``: the owner references of the rules set no ``blockOwnerDeletion``.
Pods are only read: the kubelet's health reports are on them, and devicetaint does the evicting.
"""

from __future__ import annotations

from operators.core import PROJECT_GROUP
from operators.core.runtime import RUNTIME_API_CALLS, OperatorDefinition, Watch
from operators.dra import api, taintrules
from operators.dra.api import GROUP

from .controller import DEFAULT_WORKERS, DeviceHealthController
from .models import PLURAL, VERSION
from .settings import Settings

DEFINITION = OperatorDefinition(
    name="devicehealth",
    settings_class=Settings,
    default_workers=DEFAULT_WORKERS,
    make_controller=DeviceHealthController,
    # Our own policies by kopf, the rest by the runtime's informer; none of them gets a kopf
    # annotation or finalizer (the policies' status is written by the controller).
    watches=(
        Watch(
            PROJECT_GROUP,
            PLURAL,
            DeviceHealthController.upsert_policy,
            DeviceHealthController.delete_policy,
            VERSION,
            required=True,
        ),
        Watch(
            GROUP,
            "resourceslices",
            DeviceHealthController.upsert_slice,
            DeviceHealthController.delete_slice,
            api.VERSION,
            required=True,
        ),
        Watch(
            GROUP,
            "deviceclasses",
            DeviceHealthController.upsert_class,
            DeviceHealthController.delete_class,
            api.VERSION,
            required=True,
        ),
        Watch(
            GROUP,
            "resourceclaims",
            DeviceHealthController.upsert_claim,
            DeviceHealthController.delete_claim,
            api.VERSION,
            required=True,
        ),
        Watch("", "pods", DeviceHealthController.upsert_pod, DeviceHealthController.delete_pod),
        Watch(
            GROUP,
            taintrules.PLURAL,
            DeviceHealthController.upsert_rule,
            DeviceHealthController.delete_rule,
            versions=taintrules.VERSIONS,
        ),
    ),
)

API_CALLS: list[tuple[str, str, str]] = [
    *DEFINITION.watch_calls,
    (PROJECT_GROUP, f"{PLURAL}/status", "patch"),
    (GROUP, taintrules.PLURAL, "create"),
    (GROUP, taintrules.PLURAL, "patch"),
    (GROUP, taintrules.PLURAL, "delete"),
    *RUNTIME_API_CALLS,
]
