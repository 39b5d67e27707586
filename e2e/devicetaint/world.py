"""Building blocks of the devicetaint e2e tests: fixture F of spec §17 on a real control plane.

Pods are bound by setting ``spec.nodeName`` (there is no kubelet, so they stay Pending), and claims are
allocated and reserved by writing their status as admin, which lets one test set up dozens of pods with
exactly the allocation results and tolerations a scenario needs. Evicted pods linger with a
``deletionTimestamp``: nobody finishes their graceful deletion, so their conditions stay readable.

Everything here works against any cluster, so the differential tests build the same world on the
upstream cluster and compare.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from devcluster.constants import PLACEHOLDER_IMAGE
from devcluster.kube import Kube, wait_for
from e2e.support import ALLOW_CLUSTER_WIDE_EVICTION, Tracker, controller_reference

PENDING_MESSAGE = re.compile(
    r"(?P<pods>\d+) pods? needs? to be evicted in 1 namespace\."
    r"( (?P<evicted>\d+) pods? evicted since starting the controller\.)?"
)
"""Upstream's EvictionInProgress text while pods wait, with the evicted suffix once one went
(spec §10.1); the pacing tests read it at every poll."""

KEY = "dra.example.com/unhealthy"
VALUE = "Broken"
COMPONENT = "dra-operators-devicetaint"
RESOURCE = "/apis/resource.k8s.io/v1"
FOREVER = {"key": KEY, "operator": "Exists", "effect": "NoExecute"}
DISRUPTION = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "DeletionByDeviceTaintManager",
    "message": "Device Taint manager: deleting due to NoExecute taint",
}
MARKING = "Marking for deletion"
CANCELLING = "Cancelling deletion"
DRY_TAIL = (
    "if the effect was NoExecute. This information will not be updated again. "
    "Recreate the DeviceTaintRule to trigger an update."
)

T = TypeVar("T")


def taint(effect: str = "NoExecute", time_added: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"key": KEY, "value": VALUE, "effect": effect}
    if time_added is not None:
        body["timeAdded"] = time_added
    return body


def tolerate(seconds: int | None = None, **fields: Any) -> dict[str, Any]:
    """``FOREVER`` with ``tolerationSeconds`` and overrides; a None override drops the field."""
    body: dict[str, Any] = {**FOREVER, **fields}
    if seconds is not None:
        body["tolerationSeconds"] = seconds
    return {k: v for k, v in body.items() if v is not None}


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parallel(calls: Iterable[Callable[[], T]], workers: int = 16) -> list[T]:
    """Run independent API calls concurrently: bulk setups would take minutes one by one."""
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda call: call(), list(calls)))


@dataclass
class World:
    """One cluster's objects for a test: a fake node, namespaces, slices, claims, pods and rules."""

    api: Kube
    objects: Tracker
    node: str
    namespace: str
    extra_namespaces: list[str] = field(default_factory=list)

    # --- Cluster-scoped objects ------------------------------------------------------------------------

    def resource_slice(
        self,
        name: str,
        driver: str,
        pool: str,
        devices: Sequence[str],
        taints: Mapping[str, Sequence[dict[str, Any]]] | None = None,
        generation: int = 1,
    ) -> dict[str, Any]:
        return self.objects.create(
            f"{RESOURCE}/resourceslices",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": name},
                "spec": {
                    "driver": driver,
                    "nodeName": self.node,
                    "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
                    "devices": [_device(d, (taints or {}).get(d)) for d in devices],
                },
            },
        )

    def set_slice_taints(self, name: str, taints: Mapping[str, Sequence[dict[str, Any]]]) -> dict[str, Any]:
        """Replace the taints of the named devices; other devices keep theirs (and their timeAdded)."""
        path = f"{RESOURCE}/resourceslices/{name}"
        current = self.api.get(path)
        for device in current["spec"]["devices"]:
            if device["name"] in taints:
                device.pop("taints", None)
                if taints[device["name"]]:
                    device["taints"] = list(taints[device["name"]])
        result: dict[str, Any] = self.api.replace(path, current)
        return result

    def rule(
        self,
        name: str,
        selector: Mapping[str, Any] | None,
        effect: str = "NoExecute",
        time_added: str | None = None,
        cluster_wide: bool = False,
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """``cluster_wide``: a NoExecute rule whose selector names no driver, pool or device, which
        the session's eviction guard refuses without its annotation."""
        spec: dict[str, Any] = {"taint": taint(effect, time_added)}
        if selector is not None:
            spec["deviceSelector"] = dict(selector)
        metadata: dict[str, Any] = {"name": name}
        if cluster_wide or annotations:
            metadata["annotations"] = dict(annotations or {})
        if cluster_wide:
            metadata["annotations"][ALLOW_CLUSTER_WIDE_EVICTION] = "true"
        return self.objects.create(
            f"{RESOURCE}/devicetaintrules",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceTaintRule",
                "metadata": metadata,
                "spec": spec,
            },
        )

    # --- Namespaced objects ----------------------------------------------------------------------------

    def pod(
        self,
        name: str,
        claims: Sequence[str] = (),
        namespace: str | None = None,
        bound: bool = True,
        template_entry: str | None = None,
        extended_resource: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """A pod bound to the fake node (or never schedulable), referencing ``claims`` by name."""
        entries = [{"name": f"dev-{i}", "resourceClaimName": c} for i, c in enumerate(claims)]
        if template_entry:
            entries.append({"name": "tmpl", "resourceClaimTemplateName": template_entry})
        container: dict[str, Any] = {"name": "main", "image": PLACEHOLDER_IMAGE}
        if entries:
            container["resources"] = {"claims": [{"name": e["name"]} for e in entries]}
        if extended_resource:
            container["resources"] = {
                "requests": {extended_resource: "1"},
                "limits": {extended_resource: "1"},
            }
        spec: dict[str, Any] = {"containers": [container], "resourceClaims": entries}
        if bound:
            spec["nodeName"] = self.node
        else:
            # No scheduler serves this name, so the pod stays unscheduled.
            spec["schedulerName"] = "e2e-nobody"
        ns = namespace or self.namespace
        meta: dict[str, Any] = {"name": name, "labels": dict(labels or {})}
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
        result: dict[str, Any] = self.api.create(f"/api/v1/namespaces/{ns}/pods", body)
        return result

    def claim(
        self,
        name: str,
        driver: str,
        pool: str,
        devices: Sequence[str],
        consumers: Sequence[Mapping[str, Any]] = (),
        tolerations: Sequence[dict[str, Any]] = (),
        namespace: str | None = None,
        owner: Mapping[str, Any] | None = None,
        allocate: bool = True,
        admin_access: bool = False,
    ) -> dict[str, Any]:
        """A claim allocated on ``devices`` (one result each, carrying ``tolerations``) and reserved for
        ``consumers`` (pods, or any {name, uid})."""
        ns = namespace or self.namespace
        meta: dict[str, Any] = {"name": name}
        if owner is not None:
            meta["ownerReferences"] = [controller_reference(owner)]
        path = f"{RESOURCE}/namespaces/{ns}/resourceclaims"
        requests = [
            {"name": f"req-{i}", "exactly": {"deviceClassName": "e2e-unused"}}
            for i in range(max(len(devices), 1))
        ]
        created: dict[str, Any] = self.api.create(
            path,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": meta,
                "spec": {"devices": {"requests": requests}},
            },
        )
        if not allocate:
            return created
        return self.allocate(name, driver, pool, devices, consumers, tolerations, ns, admin_access)

    def allocate(
        self,
        name: str,
        driver: str,
        pool: str,
        devices: Sequence[str],
        consumers: Sequence[Mapping[str, Any]] = (),
        tolerations: Sequence[dict[str, Any]] = (),
        namespace: str | None = None,
        admin_access: bool = False,
    ) -> dict[str, Any]:
        """Write the allocation and the reservation of an existing claim, as kube-scheduler would."""
        results = []
        for i, device in enumerate(devices):
            result: dict[str, Any] = {"request": f"req-{i}", "driver": driver, "pool": pool, "device": device}
            if tolerations:
                result["tolerations"] = list(tolerations)
            if admin_access:
                result["adminAccess"] = True
            results.append(result)
        reserved = [
            {"resource": "pods", "name": c["metadata"]["name"], "uid": c["metadata"]["uid"]}
            if "metadata" in c
            else {"resource": "pods", **c}
            for c in consumers
        ]
        status = {"allocation": {"devices": {"results": results}}, "reservedFor": reserved}
        path = f"{RESOURCE}/namespaces/{namespace or self.namespace}/resourceclaims/{name}/status"
        updated: dict[str, Any] = self.api.patch(path, {"status": status})
        return updated

    def allocated_pod(
        self,
        name: str,
        driver: str,
        pool: str,
        devices: Sequence[str],
        tolerations: Sequence[dict[str, Any]] = (),
        namespace: str | None = None,
        admin_access: bool = False,
        labels: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Fixture F's p1/c1 pair: a bound pod and its claim ``<name>-c``, allocated and reserved for it."""
        pod = self.pod(name, [f"{name}-c"], namespace=namespace, labels=labels)
        self.claim(
            f"{name}-c",
            driver,
            pool,
            devices,
            [pod],
            tolerations,
            namespace=namespace,
            admin_access=admin_access,
        )
        return pod

    # --- Observation -----------------------------------------------------------------------------------

    def pod_now(self, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        result: dict[str, Any] | None = self.api.get_or_none(
            f"/api/v1/namespaces/{namespace or self.namespace}/pods/{name}"
        )
        return result

    def our_events(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """Events of this operator or of upstream's controller (the differential tests compare both)."""
        events = self.api.list(f"/api/v1/namespaces/{namespace or self.namespace}/events")
        return [e for e in events if e.get("reason") == "DeviceTaintManagerEviction"]

    def rule_condition(self, name: str) -> dict[str, Any] | None:
        rule = self.api.get_or_none(f"{RESOURCE}/devicetaintrules/{name}")
        if rule is None:
            return None
        for condition in rule.get("status", {}).get("conditions", []):
            if condition["type"] == "EvictionInProgress":
                result: dict[str, Any] = condition
                return result
        return None

    def wait_rule(self, name: str, status: str, reason: str, message: str, timeout: float) -> dict[str, Any]:
        def matches() -> dict[str, Any] | None:
            condition = self.rule_condition(name)
            if condition and (condition["status"], condition["reason"], condition["message"]) == (
                status,
                reason,
                message,
            ):
                return condition
            return None

        found = wait_for(matches, timeout, f"rule {name} to read {status}/{reason}/{message!r}")
        assert found is not None
        return found

    def wait_terminating(self, name: str, timeout: float, namespace: str | None = None) -> dict[str, Any]:
        def terminating() -> dict[str, Any] | None:
            pod = self.pod_now(name, namespace)
            return pod if pod and pod["metadata"].get("deletionTimestamp") else None

        found = wait_for(terminating, timeout, f"pod {name} to be evicted")
        assert found is not None
        return found

    def force_delete_all_pods(self) -> None:
        """Teardown help: the namespace cleanup deletes pods one by one, slow for hundreds."""
        paths = [
            f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}"
            for ns in (self.namespace, *self.extra_namespaces)
            for pod in self.api.list(f"/api/v1/namespaces/{ns}/pods")
        ]
        parallel([functools.partial(self.api.delete, path, gracePeriodSeconds="0") for path in paths])

    def force_delete_pod(self, name: str, namespace: str | None = None) -> None:
        self.api.delete(
            f"/api/v1/namespaces/{namespace or self.namespace}/pods/{name}", gracePeriodSeconds="0"
        )


def drop_namespace(api: Kube, name: str) -> None:
    """Force-delete the pods and delete the namespace without waiting for it to go: the waiting
    cleanup of the ``namespace`` fixture costs ~5 s per namespace, and these extra namespaces hold
    nothing that could block their deletion (no claim carries a finalizer)."""
    pods = api.list(f"/api/v1/namespaces/{name}/pods")
    paths = [f"/api/v1/namespaces/{name}/pods/{p['metadata']['name']}" for p in pods]
    parallel([functools.partial(api.delete, path, gracePeriodSeconds="0") for path in paths])
    api.delete(f"/api/v1/namespaces/{name}")


@contextmanager
def open_world(
    api: Kube, objects: Tracker, node: str, namespace: str, extra_namespaces: Sequence[str] = ()
) -> Iterator[World]:
    """A world on a new fake node; its pods are force-deleted in parallel at the end."""
    objects.node(node)
    world = World(api, objects, node, namespace, list(extra_namespaces))
    try:
        yield world
    finally:
        world.force_delete_all_pods()


def _device(name: str, taints: Sequence[dict[str, Any]] | None) -> dict[str, Any]:
    device: dict[str, Any] = {"name": name}
    if taints:
        device["taints"] = list(taints)
    return device


def disruption_target(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    for condition in pod.get("status", {}).get("conditions", []):
        if condition["type"] == "DisruptionTarget":
            return {k: condition.get(k) for k in ("type", "status", "reason", "message")}
    return None


def metric(text: str, name: str) -> float:
    """The value of an unlabelled sample in a Prometheus exposition; 0 when absent."""
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def random_uid() -> str:
    return str(uuid.uuid4())


@dataclass(frozen=True)
class PodPlan:
    """One bound pod with its own claim, for bulk setups."""

    name: str
    driver: str
    pool: str
    device: str
    tolerations: tuple[dict[str, Any], ...] = ()


def create_bulk(world: World, plans: Sequence[PodPlan], workers: int = 16) -> dict[str, str]:
    """Create the pods and claims of ``plans`` concurrently; returns pod name -> UID."""

    def one(plan: PodPlan) -> tuple[str, str]:
        pod = world.allocated_pod(plan.name, plan.driver, plan.pool, [plan.device], list(plan.tolerations))
        return plan.name, pod["metadata"]["uid"]

    return dict(parallel([functools.partial(one, plan) for plan in plans], workers))
