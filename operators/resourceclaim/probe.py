"""Asking, before the first write, whether kube-controller-manager's resourceclaim-controller runs.

The coexistence guard (:mod:`operators.core.coexistence`) learns of the in-tree controller from
what it writes, so without a question of its own it learns only from the first pod both
controllers act on: that pod gets two claims, each of which can hold a device (issue #38). So
the operator asks first, with a pod only the in-tree controller would answer: while it has not
written anything yet, it creates one pod in its own namespace that names a claim template of
its own and no scheduler that exists, and waits a few seconds. The in-tree controller answers
every such pod at once: it creates the claim and applies the pod's ``resourceClaimStatuses``
under its field manager ``ResourceClaimController``, which is the guard's own evidence. Nobody
else writes that pod: it is in the operator's namespace, which tenants cannot write to, and this
process does not act before the answer. The pod never runs (no scheduler takes it), so its
claim never holds a device; both go when the pod is deleted (the claim through the garbage
collector).

A probe that cannot be made (no permission, no namespace) is logged and skipped: the guard then
still learns from the first write, as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from operators.core.client import ApiError
from operators.core.coexistence import Evidence, InTreeController, find_evidence
from operators.core.conditions import parse_time_or_none
from operators.core.resources import PODS
from operators.dra.api import GROUP, RESOURCE_CLAIM_TEMPLATES, VERSION

if TYPE_CHECKING:
    from operators.core.runtime import Runtime

log = logging.getLogger(__name__)

NAME = "dra-operators-coexistence-probe"
LABEL = "dra-operators.io/coexistence-probe"
# Nothing schedules a pod that names this scheduler, so the probe never runs anywhere.
SCHEDULER = NAME
# A DeviceClass name nobody uses: the claim of a probe that ran by mistake could not be allocated.
DEVICE_CLASS = "coexistence-probe.dra-operators.io"
ANSWER_SECONDS = 5.0
"""How long the in-tree controller gets to answer; it answers within a second when it runs."""
POLL_SECONDS = 0.25
STALE_SECONDS = 4 * ANSWER_SECONDS


def template_body(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": NAME, "namespace": namespace, "labels": {LABEL: "true"}},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "probe", "exactly": {"deviceClassName": DEVICE_CLASS}}]}
            }
        },
    }


def pod_body(namespace: str) -> dict[str, Any]:
    """A pod the restricted Pod Security profile admits, that no scheduler takes."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": f"{NAME}-", "namespace": namespace, "labels": {LABEL: "true"}},
        "spec": {
            "schedulerName": SCHEDULER,
            "automountServiceAccountToken": False,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65532,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "probe",
                    # Never pulled: the pod is never bound to a node.
                    "image": "dra-operators-coexistence-probe",
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                    "resources": {"claims": [{"name": "probe"}]},
                }
            ],
            "resourceClaims": [{"name": "probe", "resourceClaimTemplateName": NAME}],
        },
    }


async def ask(runtime: Runtime, controller: InTreeController) -> Evidence | None:
    """The in-tree controller's answer to a probe pod, or None (no answer, or no probe made)."""
    client = runtime.client
    namespace = runtime.settings.namespace
    # To the second, as managedFields times are: the answer may come within the same second.
    since = datetime.now(UTC).replace(microsecond=0)
    try:
        await _remove_earlier_probes(runtime, namespace)
        await _ensure_template(runtime, namespace)
        pod = await client.create(
            PODS.path(namespace=namespace), pod_body(namespace), fieldManager=runtime.field_manager
        )
    except ApiError as err:
        log.warning(
            "cannot ask whether kube-controller-manager's %s runs (%s); the coexistence guard learns it from "
            "the first write instead",
            controller.name,
            err,
        )
        return None
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    try:
        return await _answer(runtime, controller, namespace, name, since)
    finally:
        try:
            await client.delete(PODS.path(name, namespace=namespace), uid=uid)
        except ApiError as err:
            if not err.not_found:
                log.warning("cannot delete the coexistence probe pod %s/%s: %s", namespace, name, err)


async def _answer(
    runtime: Runtime, controller: InTreeController, namespace: str, name: str, since: datetime
) -> Evidence | None:
    deadline = time.monotonic() + ANSWER_SECONDS
    while True:
        try:
            body: Mapping[str, Any] = await runtime.client.get(PODS.path(name, namespace=namespace))
        except ApiError as err:
            log.warning("cannot read the coexistence probe pod %s/%s: %s", namespace, name, err)
            return None
        evidence = find_evidence(controller, "pods", body, since)
        if evidence is not None or time.monotonic() >= deadline:
            if evidence is None:
                log.info(
                    "no answer from kube-controller-manager's %s in %.0f s: it does not run",
                    controller.name,
                    ANSWER_SECONDS,
                )
            return evidence
        await asyncio.sleep(POLL_SECONDS)


async def _remove_earlier_probes(runtime: Runtime, namespace: str) -> None:
    """Probe pods a crash left behind: once this operator acts, it would give them claims. Not
    the probe another replica is asking with right now (younger than STALE_SECONDS)."""
    listed = await runtime.client.get(PODS.path(namespace=namespace), labelSelector=f"{LABEL}=true")
    now = datetime.now(UTC)
    for item in listed.get("items") or []:
        meta = item.get("metadata") or {}
        created = parse_time_or_none(meta.get("creationTimestamp"))
        if created is not None and (now - created).total_seconds() < STALE_SECONDS:
            continue
        try:
            await runtime.client.delete(
                PODS.path(meta.get("name", ""), namespace=namespace), uid=meta.get("uid")
            )
        except ApiError as err:
            if not err.not_found:
                raise


async def _ensure_template(runtime: Runtime, namespace: str) -> None:
    path = RESOURCE_CLAIM_TEMPLATES.path(NAME, namespace=namespace)
    try:
        await runtime.client.get(path)
        return
    except ApiError as err:
        if not err.not_found:
            raise
    try:
        await runtime.client.create(
            RESOURCE_CLAIM_TEMPLATES.path(namespace=namespace),
            template_body(namespace),
            fieldManager=runtime.field_manager,
        )
    except ApiError as err:
        if not err.conflict:
            raise
