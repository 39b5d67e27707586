"""``kubectl dra grant-driver``: the one step that lets the binding attacher write a driver's
``status.devices`` entries.

With DRAResourceClaimGranularStatusAuthorization (beta, on in 1.37) the API server checks every
change of a driver's entries on the synthetic subresource ``resourceclaims/driver`` with
``resourceNames`` = the driver and the verb ``arbitrary-node:patch`` (the attacher writes with
server-side apply, for claims on any node). ``kubectl create clusterrole`` refuses that verb, so
the grant is a ClusterRole and a ClusterRoleBinding of its own per driver, separate from the
installed manifests so that a later ``kubectl apply -k manifests/`` leaves it alone.
"""

from __future__ import annotations

import hashlib
from typing import Any

from operators.core.names import DNS_LABEL_MAX_CHARS, is_dns_subdomain
from operators.dra.api import GROUP

from .errors import UsageError

ATTACHER = "dra-operators-bindingattacher"
PART_OF = {"app.kubernetes.io/part-of": "dra-operators", "app.kubernetes.io/component": "bindingattacher"}
DRIVER_LABEL = "dra-operators.io/driver-grant"
FIELD_MANAGER = "kubectl-dra"


def grant_name(driver: str) -> str:
    """``dra-operators-bindingattacher-driver-<driver>``, cut to 253 characters with a hash."""
    name = f"{ATTACHER}-driver-{driver}"
    if len(name) <= 253:
        return name
    return f"{name[:240]}-{hashlib.sha256(driver.encode()).hexdigest()[:12]}"


def check_driver(driver: str) -> None:
    # A DNS subdomain of at most 63 characters, as ResourceSlice.spec.driver requires.
    if not is_dns_subdomain(driver, DNS_LABEL_MAX_CHARS):
        raise UsageError(
            f"{driver!r} is not a driver name (a lowercase DNS subdomain of at most 63 characters)"
        )


def driver_grant(driver: str, namespace: str) -> list[dict[str, Any]]:
    """The ClusterRole and ClusterRoleBinding for ``driver``, bound to the attacher's
    ServiceAccount in ``namespace``."""
    check_driver(driver)
    name = grant_name(driver)
    labels = {**PART_OF, DRIVER_LABEL: "true"}
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels},
        "rules": [
            {
                "apiGroups": [GROUP],
                "resources": ["resourceclaims/driver"],
                "resourceNames": [driver],
                "verbs": ["arbitrary-node:patch"],
            }
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": labels},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": ATTACHER, "namespace": namespace}],
    }
    return [role, binding]


def object_path(document: dict[str, Any]) -> str:
    plural = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}[document["kind"]]
    return f"/apis/rbac.authorization.k8s.io/v1/{plural}/{document['metadata']['name']}"
