"""Entry point of the pool-status operator: ``dra-operators run poolstatus``."""

from __future__ import annotations

from operators.core.runtime import OperatorDefinition

from .controller import PoolStatusController
from .handlers import registry
from .settings import Settings

DEFINITION = OperatorDefinition(
    name="poolstatus",
    registry=registry,
    settings_class=Settings,
    # One worker, as upstream: an evaluation is CPU-bound and runs on the event loop anyway.
    default_workers=1,
    make_controller=PoolStatusController,
)

_REQUESTS = [
    (group, resource, verb)
    for group in ("resource.k8s.io", "dra-operators.io")
    for resource, verbs in (
        # list+watch: kopf's informer; get: re-read after a conflict or rejection; delete: TTL.
        ("resourcepoolstatusrequests", ("get", "list", "watch", "delete")),
        # patch: the one status write. get and update are granted by spec section 14 (as by
        # upstream's role) though the operator itself only patches.
        ("resourcepoolstatusrequests/status", ("get", "update", "patch")),
    )
    for verb in verbs
]

API_CALLS: list[tuple[str, str, str]] = [
    *_REQUESTS,
    # list+watch feed the caches; get completes the read-only set spec section 14 grants.
    *(
        ("resource.k8s.io", resource, verb)
        for resource in ("resourceslices", "resourceclaims", "devicetaintrules")
        for verb in ("get", "list", "watch")
    ),
    # Leader election (namespaced Role in the operator namespace).
    ("coordination.k8s.io", "leases", "get"),
    ("coordination.k8s.io", "leases", "create"),
    ("coordination.k8s.io", "leases", "update"),
]
"""Every (API group, resource, verb) the operator may use; the RBAC manifests grant exactly these."""
