"""Entry point of ``dra-operators run devicetaint``: the definition the runtime starts, and the API calls.

``API_CALLS`` lists every (API group, resource, verb) the process uses, kopf's watches and the leader
election included; ``manifests/devicetaint/rbac.yaml`` grants exactly these. Unlike the spec's table, pods
need no ``get``: the eviction works from the watch cache (see :mod:`.podeviction`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.core.coexistence import KUBE_CONTROLLER_MANAGER, InTreeController, Signature
from operators.core.runtime import RUNTIME_API_CALLS, Discovered, OperatorDefinition, Watch
from operators.dra import taintrules
from operators.dra.api import GROUP, VERSION
from operators.dra.podgroups import POD_GROUP_VERSIONS, POD_GROUPS, SCHEDULING_GROUP

from .controller import DEFAULT_WORKERS, DeviceTaintController
from .podeviction import DISRUPTION_REASON
from .settings import Settings


def _disrupted_by_device_taint(pod: Mapping[str, Any]) -> bool:
    """kube-controller-manager's controllers write DisruptionTarget under one field manager;
    the reason tells the device-taint one from the node-taint and pod-GC ones."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "DisruptionTarget" and c.get("reason") == DISRUPTION_REASON
        for c in conditions
        if isinstance(c, Mapping)
    )


IN_TREE = InTreeController(
    "device-taint-eviction-controller",
    (
        # It applies each rule's EvictionInProgress condition under its controller name.
        Signature(
            api_group=GROUP,
            plural=taintrules.PLURAL,
            manager="device-taint-eviction-controller",
            operation="Apply",
            subresource="status",
            owns=("f:status", "f:conditions"),
            wrote="applied the EvictionInProgress condition of",
        ),
        # It marks a pod before deleting it, with a strategic-merge patch and no field manager.
        Signature(
            api_group="",
            plural="pods",
            manager=KUBE_CONTROLLER_MANAGER,
            operation="Update",
            subresource="status",
            owns=("f:status", "f:conditions", 'k:{"type":"DisruptionTarget"}'),
            wrote="marked for eviction",
            also=_disrupted_by_device_taint,
            # A tenant can send this entry with a pod of their own; with no probe to ask, only the
            # rules' status (a kind tenants do not write) trips the guard.
            forgeable=True,
        ),
    ),
)

DEFINITION = OperatorDefinition(
    name="devicetaint",
    settings_class=Settings,
    default_workers=DEFAULT_WORKERS,
    make_controller=DeviceTaintController,
    # Nothing is written onto these objects by watching them: no kopf annotation or finalizer (spec §15).
    watches=(
        Watch("", "pods", DeviceTaintController.upsert_pod, DeviceTaintController.delete_pod),
        # Spec §3: not ready until resource.k8s.io/v1 serves both.
        Watch(
            GROUP,
            "resourceclaims",
            DeviceTaintController.upsert_claim,
            DeviceTaintController.delete_claim,
            VERSION,
            required=True,
        ),
        Watch(
            GROUP,
            "resourceslices",
            DeviceTaintController.upsert_slice,
            DeviceTaintController.delete_slice,
            VERSION,
            required=True,
        ),
        # Optional: without a served version, ResourceSlice taints still evict.
        Watch(
            GROUP,
            taintrules.PLURAL,
            DeviceTaintController.upsert_rule,
            DeviceTaintController.delete_rule,
            versions=taintrules.VERSIONS,
        ),
    ),
    # Whether PodGroups are served decides --workload-claims=auto (their members are evicted for the
    # claims reserved for their group); they are not watched. As resourceclaim's PodGroup watch, a
    # change of what is served restarts the process, unless --workload-claims=off.
    discovered=(
        Discovered(
            SCHEDULING_GROUP,
            POD_GROUPS.plural,
            POD_GROUP_VERSIONS,
            when=lambda controller: controller.workload_claims_mode != "off",
        ),
    ),
    in_tree=IN_TREE,
)

API_CALLS: list[tuple[str, str, str]] = [
    *DEFINITION.watch_calls,
    ("", "pods", "delete"),
    ("", "pods/status", "patch"),
    # --eviction-mode=evict: the Eviction API, which honours PodDisruptionBudgets.
    ("", "pods/eviction", "create"),
    (GROUP, f"{taintrules.PLURAL}/status", "patch"),
    *RUNTIME_API_CALLS,
]
