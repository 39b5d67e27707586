"""Entry point of ``dra-operators run devicetaint``: the definition the runtime starts, and the API calls.

``API_CALLS`` lists every (API group, resource, verb) the process uses, kopf's watches and the leader
election included; ``manifests/devicetaint/rbac.yaml`` grants exactly these. Unlike the spec's table, pods
need no ``get``: the eviction works from the watch cache (see :mod:`.podeviction`).
"""

from __future__ import annotations

from operators.core.runtime import OperatorDefinition, Runtime
from operators.core.settings import OperatorSettings

from . import handlers
from .controller import DEFAULT_WORKERS, DeviceTaintController

API_CALLS: list[tuple[str, str, str]] = [
    ("", "pods", "list"),
    ("", "pods", "watch"),
    ("", "pods", "delete"),
    ("", "pods/status", "patch"),
    ("resource.k8s.io", "resourceclaims", "list"),
    ("resource.k8s.io", "resourceclaims", "watch"),
    ("resource.k8s.io", "resourceslices", "list"),
    ("resource.k8s.io", "resourceslices", "watch"),
    ("resource.k8s.io", "devicetaintrules", "list"),
    ("resource.k8s.io", "devicetaintrules", "watch"),
    ("resource.k8s.io", "devicetaintrules/status", "patch"),
    ("", "events", "create"),
    ("", "events", "patch"),
    # Leader election, in the operator's own namespace (a Role, not the ClusterRole).
    ("coordination.k8s.io", "leases", "get"),
    ("coordination.k8s.io", "leases", "create"),
    ("coordination.k8s.io", "leases", "update"),
]


def _make_controller(runtime: Runtime) -> DeviceTaintController:
    return DeviceTaintController(runtime, handlers.watch_rules)


DEFINITION = OperatorDefinition(
    "devicetaint", handlers.registry, OperatorSettings, DEFAULT_WORKERS, _make_controller
)
