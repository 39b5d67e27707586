"""Entry point of the pool-status operator: ``dra-operators run poolstatus``."""

from __future__ import annotations

from operators.core import PROJECT_GROUP
from operators.core.coexistence import KUBE_CONTROLLER_MANAGER, InTreeController, Signature
from operators.core.runtime import RUNTIME_API_CALLS, OperatorDefinition, Watch
from operators.dra import taintrules
from operators.dra.api import GROUP

from .controller import PoolStatusController
from .settings import Settings
from .surfaces import BUILTIN, PLURAL, PROJECT, Surface

IN_TREE = InTreeController(
    "resourcepoolstatusrequest-controller",
    (
        # It writes a request's whole status once, with an update and no field manager; no
        # other controller of kube-controller-manager writes these.
        Signature(
            api_group=BUILTIN.group,
            plural=PLURAL,
            manager=KUBE_CONTROLLER_MANAGER,
            operation="Update",
            subresource="status",
            owns=("f:status", "f:conditions"),
            wrote="calculated the status of",
        ),
    ),
    alternative="or leave the built-in API to it: --builtin-api=off (the project CRD stays served)",
)


def _requests(surface: Surface) -> Watch[PoolStatusController]:
    """The requests of one surface, watched only when the operator serves it (an unserved
    built-in API is left to kube-controller-manager, and not watched)."""
    return Watch(
        surface.group,
        PLURAL,
        lambda controller, body: controller.upsert_request(surface, body),
        lambda controller, body: controller.delete_request(surface, body),
        surface.version,
        when=lambda controller: surface in controller.served,
    )


DEFINITION = OperatorDefinition(
    name="poolstatus",
    settings_class=Settings,
    # One worker, as upstream: an evaluation is CPU-bound and runs on the event loop anyway.
    default_workers=1,
    make_controller=PoolStatusController,
    # Nothing is written onto these objects by watching them: requests never get kopf
    # annotations, finalizers or progress records (spec section 4.4).
    watches=(
        Watch(
            GROUP,
            "resourceslices",
            PoolStatusController.upsert_slice,
            PoolStatusController.delete_slice,
        ),
        Watch(
            GROUP,
            "resourceclaims",
            PoolStatusController.upsert_claim,
            PoolStatusController.delete_claim,
        ),
        # As whichever version the cluster serves; not at all while the rules are not counted.
        Watch(
            GROUP,
            taintrules.PLURAL,
            PoolStatusController.upsert_rule,
            PoolStatusController.delete_rule,
            versions=taintrules.VERSIONS,
            when=lambda controller: controller.rules_in_use,
        ),
        _requests(BUILTIN),
        _requests(PROJECT),
    ),
    in_tree=IN_TREE,
)

API_CALLS: list[tuple[str, str, str]] = [
    # list+watch: the informers and kopf.
    *DEFINITION.watch_calls,
    *(
        (group, resource, verb)
        for group in (GROUP, PROJECT_GROUP)
        for resource, verbs in (
            # get: re-read after a conflict or rejection; delete: TTL.
            ("resourcepoolstatusrequests", ("get", "delete")),
            # patch: the one status write. get and update are granted by spec section 14 (as by
            # upstream's role) though the operator itself only patches.
            ("resourcepoolstatusrequests/status", ("get", "update", "patch")),
        )
        for verb in verbs
    ),
    # get completes the read-only set spec section 14 grants.
    *((GROUP, resource, "get") for resource in ("resourceslices", "resourceclaims", taintrules.PLURAL)),
    *RUNTIME_API_CALLS,
]
"""Every (API group, resource, verb) the operator may use; the RBAC manifests grant exactly these."""
