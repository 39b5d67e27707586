"""Entry point of ``dra-operators run resourceclaim``: the definition and its API surface.

:data:`API_CALLS` lists every ``(api group, resource, verb)`` the process uses, kopf's
watches and leader election included; ``manifests/resourceclaim/rbac.yaml`` grants exactly
these (spec section 11), and a test keeps the two equal.
"""

from __future__ import annotations

from typing import Final

from operators.core.coexistence import InTreeController, Signature
from operators.core.runtime import RUNTIME_API_CALLS, OperatorDefinition, Watch
from operators.dra.api import GROUP
from operators.dra.podgroups import POD_GROUP_VERSIONS, SCHEDULING_GROUP

from . import probe
from .constants import OPERATOR_NAME
from .controller import ResourceClaimController
from .settings import Settings

PROBE_CALLS: Final[list[tuple[str, str, str]]] = [
    # The question to kube-controller-manager before the first write (probe.py), in the
    # operator's namespace only: a pod that names a claim template of the operator's own.
    ("", "pods", "create"),
    ("", "pods", "delete"),
    (GROUP, "resourceclaimtemplates", "get"),
    (GROUP, "resourceclaimtemplates", "create"),
]

DEFAULT_WORKERS: Final = 50
"""As kube-controller-manager's ``--concurrent-resourceclaim-syncs``."""


def _applies_claim_statuses(api_group: str, plural: str) -> Signature:
    """kube-controller-manager's claim controller applying ``status.resourceClaimStatuses`` under a
    field manager of its own name."""
    return Signature(
        api_group=api_group,
        plural=plural,
        manager="ResourceClaimController",
        operation="Apply",
        subresource="status",
        owns=("f:status", "f:resourceClaimStatuses"),
        wrote="applied status.resourceClaimStatuses of",
        forgeable=True,
    )


IN_TREE: Final = InTreeController(
    "resourceclaim-controller",
    (
        _applies_claim_statuses("", "pods"),
        # With PodGroup claims, it applies each group's claim statuses the same way. The claims it
        # creates are no evidence: a tenant who may create claims chooses any field manager
        # (kubectl create --field-manager=kube-controller-manager). Nor, alone, are these two
        # writes: a tenant can send their entry with a pod or PodGroup of their own, so they make
        # the operator ask its probe again (forgeable).
        _applies_claim_statuses(SCHEDULING_GROUP, "podgroups"),
    ),
)

DEFINITION = OperatorDefinition(
    name=OPERATOR_NAME,
    settings_class=Settings,
    default_workers=DEFAULT_WORKERS,
    make_controller=ResourceClaimController,
    # Nothing is written onto these objects by watching them: no kopf annotation or finalizer.
    watches=(
        Watch("", "pods", ResourceClaimController.upsert_pod, ResourceClaimController.delete_pod),
        # Section 12, step 1: not ready until resource.k8s.io/v1 serves both.
        Watch(
            GROUP,
            "resourceclaims",
            ResourceClaimController.upsert_claim,
            ResourceClaimController.delete_claim,
            required=True,
        ),
        Watch(
            GROUP,
            "resourceclaimtemplates",
            ResourceClaimController.upsert_template,
            ResourceClaimController.delete_template,
            required=True,
        ),
        # Served only with the GenericWorkload gate and --runtime-config, as v1beta1 (1.37) or
        # v1alpha2 (1.36): discovered, newest first, and a change of what is served restarts
        # the process so that the watch follows it.
        Watch(
            SCHEDULING_GROUP,
            "podgroups",
            ResourceClaimController.upsert_pod_group,
            ResourceClaimController.delete_pod_group,
            versions=POD_GROUP_VERSIONS,
            when=ResourceClaimController.watches_pod_groups,
        ),
    ),
    in_tree=IN_TREE,
    ask_in_tree=probe.ask,
)

API_CALLS: Final[list[tuple[str, str, str]]] = [
    # The watches of pods, claims, templates and PodGroups (harmless where PodGroups are not served).
    *DEFINITION.watch_calls,
    # Live GET of a pod named in reservedFor but missing from the cache (section 8).
    ("", "pods", "get"),
    # Server-side apply of status.resourceClaimStatuses (7.4).
    ("", "pods/status", "patch"),
    # GET of an unconfirmed just-created claim (7.3); create (7.2); finalizer removal (8);
    # deletion of a generated claim whose pod will not run again (8, step 5).
    (GROUP, "resourceclaims", "create"),
    (GROUP, "resourceclaims", "delete"),
    (GROUP, "resourceclaims", "get"),
    (GROUP, "resourceclaims", "update"),
    # reservedFor and allocation writes (7.5, 8)...
    (GROUP, "resourceclaims/status", "update"),
    # ...which DRAResourceClaimGranularStatusAuthorization also checks on this synthetic
    # subresource, cluster-wide, with the request's verb.
    (GROUP, "resourceclaims/binding", "update"),
    # PodGroup claims: live GET of a group named in reservedFor but missing from the cache;
    # server-side apply of status.resourceClaimStatuses.
    (SCHEDULING_GROUP, "podgroups", "get"),
    (SCHEDULING_GROUP, "podgroups/status", "patch"),
    *PROBE_CALLS,
    *RUNTIME_API_CALLS,
]
