"""Entry point of ``dra-operators run bindingattacher``: the definition and its API surface.

:data:`API_CALLS` lists every ``(api group, resource, verb)`` the process uses, kopf's
watches and leader election included; ``manifests/bindingattacher/rbac.yaml`` grants exactly
these, and a test keeps the two equal. Deliberately absent (spec §20): ``resourceclaims/binding``
(the attacher never changes ``allocation`` or ``reservedFor``), any write on ``resourceclaims``
itself (no finalizers or annotations on claims), list/watch on pods (point reads only), and
the ``update`` verbs on claim status (every status write is a server-side apply, i.e. PATCH),
and ``get`` on namespaces: the runtime's check that the operator namespace exists takes a 403 as
"it exists", which in a Pod it does (see :mod:`operators.core.namespace`).
"""

from __future__ import annotations

from typing import Final

from operators.core import PROJECT_GROUP
from operators.core.runtime import RUNTIME_API_CALLS, Discovered, OperatorDefinition, Watch
from operators.dra import taintrules
from operators.dra.api import GROUP
from operators.dra.attachments import VERSION

from .controller import BindingAttacherController
from .settings import Settings

DEFAULT_WORKERS: Final = 20
"""Spec §15.1 (``--workers``); the queue is keyed by claim, so one worker per claim at a time."""


DEFINITION = OperatorDefinition(
    name="bindingattacher",
    settings_class=Settings,
    default_workers=DEFAULT_WORKERS,
    make_controller=BindingAttacherController,
    # Nothing is written onto claims by watching them (no kopf annotation or finalizer), and our
    # own kinds carry only the finalizers the attacher sets on purpose. Pods and Nodes are not
    # watched: point reads (see kube.Lookups). Policies and records are listed first (spec §16.2):
    # the listed claims are then projected knowing every configured driver, and none of them has
    # to be read again because it was projected without its driver's entries.
    watches=(
        Watch(
            PROJECT_GROUP,
            "deviceattachpolicies",
            BindingAttacherController.upsert_policy,
            BindingAttacherController.delete_policy,
            VERSION,
            required=True,
        ),
        Watch(
            PROJECT_GROUP,
            "deviceattachments",
            BindingAttacherController.upsert_record,
            BindingAttacherController.delete_record,
            VERSION,
            required=True,
        ),
        Watch(
            GROUP,
            "resourceclaims",
            BindingAttacherController.upsert_claim,
            BindingAttacherController.delete_claim,
            required=True,
        ),
    ),
    # Failure taints are written as whichever DeviceTaintRule version the cluster serves; a change
    # of it restarts the process, which then writes (and lets its policies say) what is served now.
    discovered=(Discovered(GROUP, taintrules.PLURAL, taintrules.VERSIONS),),
    namespace_use="the DeviceAttachment ledger",
)

API_CALLS: Final[list[tuple[str, str, str]]] = [
    # The watches of claims, policies and the ledger. kopf watches cluster-wide, so the ledger's
    # list/watch are cluster-wide too (records outside the operator namespace are ignored).
    *DEFINITION.watch_calls,
    # Live GET to confirm that a claim a record refers to is gone (13.1).
    (GROUP, "resourceclaims", "get"),
    # Server-side apply of our drivers' status.devices entries (11.1)...
    (GROUP, "resourceclaims/status", "patch"),
    # ...which DRAResourceClaimGranularStatusAuthorization also checks per driver name, with the
    # request's verb; limited by resourceNames to the configured drivers (20).
    (GROUP, "resourceclaims/driver", "arbitrary-node:patch"),
    # Device attributes for actions: a list with fieldSelector spec.driver=<driver> (6).
    (GROUP, "resourceslices", "list"),
    # Optional failure taints (14): create, and the sweep's list and delete of expired rules.
    (GROUP, taintrules.PLURAL, "create"),
    (GROUP, taintrules.PLURAL, "delete"),
    (GROUP, taintrules.PLURAL, "list"),
    # Point reads: consumer pods (node fallback, "bound" check) and Nodes for action requests.
    ("", "pods", "get"),
    ("", "nodes", "get"),
    # Policies: finalizer (merge patch), status (server-side apply).
    (PROJECT_GROUP, "deviceattachpolicies", "patch"),
    (PROJECT_GROUP, "deviceattachpolicies/status", "patch"),
    # Authorized condition: may this process write the driver's entries (21.4)?
    ("authorization.k8s.io", "selfsubjectaccessreviews", "create"),
    # The ledger: every write stays in the operator namespace (Role).
    (PROJECT_GROUP, "deviceattachments", "get"),
    (PROJECT_GROUP, "deviceattachments", "create"),
    (PROJECT_GROUP, "deviceattachments", "update"),
    (PROJECT_GROUP, "deviceattachments", "delete"),
    # Webhook CA, client certificate and bearer token, in the operator namespace (10.4).
    ("", "secrets", "get"),
    # Test action inventory mirror (server-side apply creates it), with --enable-test-actions.
    ("", "configmaps", "get"),
    ("", "configmaps", "create"),
    ("", "configmaps", "patch"),
    *RUNTIME_API_CALLS,
]
