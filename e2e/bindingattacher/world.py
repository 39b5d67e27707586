"""The world of the binding-attacher acceptance scenarios (spec bindingattacher §23.1), on a real
control plane: fake nodes, drivers whose devices declare binding conditions, policies, and
helpers that watch what the scheduler and the attacher do.

- Driver ``fabric``: one node-less slice (``nodeSelector`` on ``fabric.test/member``) with
  devices ``f0``-``f5`` that declare ``bindsToNode``, so the scheduler pins every allocation
  to the node it chose.
- Driver ``nic``: node-local slices, one per node, devices ``n0``-``n1``.
- Driver ``foreign``: node-local, with binding conditions and no policy: the harness plays
  its attacher.

Pods never run (there is no kubelet); bound pods stay Pending and are deleted with grace 0.
Everything works against any 1.37 cluster, so the differential test builds the same world on
the upstream cluster.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from devcluster.constants import DELETE_PROTECTION_FINALIZER, PLACEHOLDER_IMAGE, REPO_ROOT
from devcluster.kube import ApiError, Kube, wait_for
from e2e import harness
from e2e.support import Tracker, slice_body

FABRIC = "fabric.attach-test.dra-operators.io"
NIC = "nic.attach-test.dra-operators.io"
FOREIGN = "foreign.attach-test.dra-operators.io"
ATTACHED = f"{FABRIC}/attached"
ATTACH_FAILED = f"{FABRIC}/attach-failed"
ATTACH_TIMEOUT = f"{FABRIC}/attach-timeout"
LINKED = f"{NIC}/linked"
LINK_FAILED = f"{NIC}/link-failed"
FOREIGN_READY = f"{FOREIGN}/ready"
FOREIGN_FAILED = f"{FOREIGN}/failed"
MEMBER_LABEL = "fabric.test/member"
OPERATOR_NS = harness.OPERATOR_NAMESPACE
RESOURCE = "/apis/resource.k8s.io/v1"
OWN = "/apis/dra-operators.io/v1alpha1"
RECORDS = f"{OWN}/namespaces/{OPERATOR_NS}/deviceattachments"
POLICIES = f"{OWN}/deviceattachpolicies"
MANAGER_PREFIX = "dra-operators.io/binding-attacher/"
FABRIC_INVENTORY = "test-inventory"
NIC_INVENTORY = "test-inventory-nic"
CRD_FILES = ("deviceattachpolicies.dra-operators.io.yaml", "deviceattachments.dra-operators.io.yaml")
DRIVER_ROLE = "e2e-bindingattacher-drivers"
BINDING_TIMEOUT = "30s"
"""kube-scheduler's bindingTimeout in the devcluster; the attacher is told the same."""
ARGS = ("--enable-test-actions", "--binding-timeout", BINDING_TIMEOUT, "--resync-period", "15s")
TAINT_RULES = f"{RESOURCE}/devicetaintrules"
TAINT_DURATION = "15s"


# -- installation --------------------------------------------------------------------------------


def install_crds(cluster: harness.Cluster, api: Kube) -> None:
    for name in CRD_FILES:
        cluster.kubectl(
            "apply", "--server-side", "--field-manager=e2e", "--force-conflicts", "-f",
            str(REPO_ROOT / "crds" / name),
        )  # fmt: skip
    for name in CRD_FILES:
        crd = name.removesuffix(".yaml")
        wait_for(functools.partial(_established, api, crd), 30, f"CRD {crd} to be established")


def _established(api: Kube, crd: str) -> bool:
    body = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
    conditions = (body.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def grant_drivers(api: Kube, drivers: tuple[str, ...] = (FABRIC, NIC)) -> None:
    """What an installer generates from its driver list: resourceclaims/driver for these names."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": DRIVER_ROLE},
        "rules": [
            {
                "apiGroups": ["resource.k8s.io"],
                "resources": ["resourceclaims/driver"],
                "resourceNames": list(drivers),
                "verbs": ["arbitrary-node:patch"],
            }
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": DRIVER_ROLE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": DRIVER_ROLE},
        "subjects": [
            {"kind": "ServiceAccount", "name": "dra-operators-bindingattacher", "namespace": OPERATOR_NS}
        ],
    }
    api.apply(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{DRIVER_ROLE}", role)
    api.apply(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{DRIVER_ROLE}", binding)


def restricted_kubeconfig(cluster: harness.Cluster, api: Kube) -> str:
    objects = harness.rbac_objects(cluster)
    harness.apply_rbac(cluster, objects)
    grant_drivers(api)
    namespace, account = harness.service_account_of(objects, "bindingattacher")
    return harness.token_kubeconfig(cluster, api, namespace, account)


# -- devices -------------------------------------------------------------------------------------


def _device(name: str, ready: list[str], failed: list[str], binds: bool) -> dict[str, Any]:
    device: dict[str, Any] = {
        "name": name,
        "attributes": {"index": {"int": int(name[1:])}},
        "bindingConditions": ready,
        "bindingFailureConditions": failed,
    }
    if binds:
        device["bindsToNode"] = True
    return device


@dataclass
class World:
    nodes: tuple[str, ...]
    fabric_devices: tuple[str, ...]


def build_world(tracker: Tracker, prefix: str, fabric_devices: int = 6) -> World:
    nodes = tuple(f"{prefix}-node-{x}" for x in "abc")
    for node in nodes:
        tracker.node(node, labels={MEMBER_LABEL: "true"})
    names = tuple(f"f{i}" for i in range(fabric_devices))
    fabric = [_device(n, [ATTACHED], [ATTACH_FAILED, ATTACH_TIMEOUT], binds=True) for n in names]
    selector = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": MEMBER_LABEL, "operator": "In", "values": ["true"]}]}
        ]
    }
    slices = f"{RESOURCE}/resourceslices"
    tracker.create(
        slices, slice_body(f"{prefix}-fabric-pool", FABRIC, "fabric-pool", fabric, nodeSelector=selector)
    )
    for node in nodes:
        nics = [_device(f"n{i}", [LINKED], [LINK_FAILED], binds=False) for i in range(2)]
        tracker.create(slices, slice_body(f"{prefix}-nic-{node}", NIC, f"nic-{node}", nics, nodeName=node))
        foreign = [_device(f"x{i}", [FOREIGN_READY], [FOREIGN_FAILED], binds=False) for i in range(2)]
        tracker.create(
            slices, slice_body(f"{prefix}-foreign-{node}", FOREIGN, f"foreign-{node}", foreign, nodeName=node)
        )
    for driver in (FABRIC, NIC, FOREIGN):
        tracker.device_class(class_name(prefix, driver), driver)
    return World(nodes, names)


def class_name(prefix: str, driver: str) -> str:
    return f"{prefix}-{driver.split('.')[0]}"


# -- policies ------------------------------------------------------------------------------------


def policy_body(name: str, driver: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "dra-operators.io/v1alpha1",
        "kind": "DeviceAttachPolicy",
        "metadata": {"name": name},
        "spec": {"driver": driver, **spec},
    }


def testaction_policy(name: str, driver: str, delay: str, inventory: str, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "bindingTimeout": "30s",
        "safetyMargin": "8s",
        "action": {"kind": "Test", "test": {"attachDelay": delay, "inventoryConfigMap": inventory}},
        **extra,
    }
    return policy_body(name, driver, **spec)


def fabric_policy(name: str = "e2e-fabric") -> dict[str, Any]:
    return testaction_policy(
        name,
        FABRIC,
        "2s",
        FABRIC_INVENTORY,
        conditions={"timeoutFailureType": ATTACH_TIMEOUT},
        onFailure={"taintDevice": "OnPermanentError", "taintDuration": TAINT_DURATION},
    )


def nic_policy(name: str = "e2e-nic") -> dict[str, Any]:
    return testaction_policy(name, NIC, "4s", NIC_INVENTORY)


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for cond in (obj or {}).get("status", {}).get("conditions", []) or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def policy_ready(api: Kube, name: str) -> bool:
    policy = api.get_or_none(f"{POLICIES}/{name}")
    ready = condition(policy, "Ready")
    return bool(
        policy
        and ready
        and ready["status"] == "True"
        and policy["status"].get("observedGeneration") == policy["metadata"]["generation"]
    )


def remove_policies(api: Kube, names: list[str]) -> None:
    """Delete policies, releasing the attacher's finalizer when no attacher runs any more."""
    for name in names:
        api.delete(f"{POLICIES}/{name}")
        policy = api.get_or_none(f"{POLICIES}/{name}")
        if policy is not None and policy["metadata"].get("finalizers"):
            api.patch(f"{POLICIES}/{name}", {"metadata": {"finalizers": None}})


# -- claims and pods -----------------------------------------------------------------------------


def claim_body(
    name: str, requests: list[tuple[str, str]], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "devices": {
                "requests": [{"name": req, "exactly": {"deviceClassName": cls}} for req, cls in requests]
            }
        },
    }


def pod_body(name: str, claims: dict[str, dict[str, str]]) -> dict[str, Any]:
    """``claims`` maps the pod-level claim name to ``{"resourceClaimName": ...}`` or a template."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": PLACEHOLDER_IMAGE,
                    "resources": {"claims": [{"name": c} for c in claims]},
                }
            ],
            "resourceClaims": [{"name": c, **source} for c, source in claims.items()],
            "terminationGracePeriodSeconds": 0,
        },
    }


def claim_path(namespace: str, name: str = "") -> str:
    path = f"{RESOURCE}/namespaces/{namespace}/resourceclaims"
    return f"{path}/{name}" if name else path


def pod_path(namespace: str, name: str = "") -> str:
    path = f"/api/v1/namespaces/{namespace}/pods"
    return f"{path}/{name}" if name else path


def entry(claim: dict[str, Any] | None, driver: str) -> dict[str, Any] | None:
    for device in (claim or {}).get("status", {}).get("devices", []) or []:
        if device.get("driver") == driver:
            return dict(device)
    return None


def entry_condition(claim: dict[str, Any] | None, driver: str, type_: str) -> dict[str, Any] | None:
    found = entry(claim, driver)
    for cond in (found or {}).get("conditions", []) or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def allocation_stamp(claim: dict[str, Any] | None) -> str | None:
    allocation = (claim or {}).get("status", {}).get("allocation") or {}
    return allocation.get("allocationTimestamp")


def pinned_node(claim: dict[str, Any] | None) -> str | None:
    allocation = (claim or {}).get("status", {}).get("allocation") or {}
    terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    if len(terms) != 1:
        return None
    fields = terms[0].get("matchFields") or []
    if len(fields) == 1 and fields[0].get("key") == "metadata.name" and len(fields[0].get("values", [])) == 1:
        return str(fields[0]["values"][0])
    return None


def release_claim(api: Kube, namespace: str, name: str) -> None:
    """Delete a claim whose pods are gone, removing the scheduler's finalizer (the in-tree
    resourceclaim controller, which would do that, is off in the default cluster)."""
    api.delete(claim_path(namespace, name))

    def released() -> bool:
        claim = api.get_or_none(claim_path(namespace, name))
        if claim is None:
            return True
        meta = claim["metadata"]
        finalizers = [f for f in meta.get("finalizers", []) if f != DELETE_PROTECTION_FINALIZER]
        body = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
        try:
            api.patch(claim_path(namespace, name), body)
        except ApiError as err:
            if err.conflict:
                return False  # the scheduler or the attacher wrote meanwhile: read again
            if not err.not_found:
                raise
        return True

    wait_for(released, 30, f"claim {namespace}/{name} to be released")


def events_for(api: Kube, namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
    items = api.list(f"/api/v1/namespaces/{namespace}/events")
    return [
        e
        for e in items
        if e.get("involvedObject", {}).get("kind") == kind and e.get("involvedObject", {}).get("name") == name
    ]


def reasons(events: list[dict[str, Any]]) -> set[str]:
    return {str(e.get("reason")) for e in events}


def pod_scheduled_message(pod: dict[str, Any] | None) -> str:
    cond = condition(pod, "PodScheduled")
    return str(cond.get("message", "")) if cond else ""


def managed_field_paths(claim: dict[str, Any], manager_prefix: str = MANAGER_PREFIX) -> dict[str, set[str]]:
    """Top-level status fields each of our field managers owns, per manager."""
    owned: dict[str, set[str]] = {}
    for entry_ in claim["metadata"].get("managedFields", []):
        manager = entry_.get("manager", "")
        if not manager.startswith(manager_prefix):
            continue
        fields = entry_.get("fieldsV1", {})
        tops = {k for k in fields if k != "f:metadata"}
        status = fields.get("f:status", {})
        owned.setdefault(manager, set()).update(tops - {"f:status"} | {f"f:status/{k}" for k in status})
    return owned


# -- the fake backend's inventory ------------------------------------------------------------------


def inventory(api: Kube, name: str = FABRIC_INVENTORY) -> dict[str, dict[str, Any]]:
    cm = api.get_or_none(f"/api/v1/namespaces/{OPERATOR_NS}/configmaps/{name}")
    return {k: json.loads(v) for k, v in ((cm or {}).get("data") or {}).items()}


def records(api: Kube) -> list[dict[str, Any]]:
    return api.list(RECORDS)


def records_of(api: Kube, claim_uid: str) -> list[dict[str, Any]]:
    return api.list(RECORDS, labelSelector=f"dra-operators.io/claim-uid={claim_uid}")


def clear_ledger(api: Kube) -> None:
    """Teardown only: drop records a stopped attacher left, without detaching."""
    for record in records(api):
        name = record["metadata"]["name"]
        api.patch(f"{RECORDS}/{name}", {"metadata": {"finalizers": None}})
        api.delete(f"{RECORDS}/{name}")


def taint_rules(api: Kube) -> list[dict[str, Any]]:
    return api.list(TAINT_RULES, labelSelector="dra-operators.io/policy")


def clear_taint_rules(api: Kube) -> None:
    for rule in taint_rules(api):
        api.delete(f"{TAINT_RULES}/{rule['metadata']['name']}")


def clear_inventories(api: Kube) -> None:
    for name in (FABRIC_INVENTORY, NIC_INVENTORY):
        api.delete(f"/api/v1/namespaces/{OPERATOR_NS}/configmaps/{name}")


def metric(text: str, name: str, /, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        sample, _, rest = head.partition("{")
        if sample != name:
            continue
        pairs = dict(p.split("=", 1) for p in rest.rstrip("}").split(",") if "=" in p)
        if all(pairs.get(k) == f'"{v}"' for k, v in labels.items()):
            total += float(value)
    return total


# -- watching a scenario ---------------------------------------------------------------------------


@dataclass
class Seen:
    """What the observer saw of one claim and its pod over time (monotonic seconds)."""

    stamps: list[str] = field(default_factory=list)
    conditions: list[tuple[float, str, str, str, str]] = field(default_factory=list)
    """``(t, stamp, type, status, reason)``, recorded on change."""
    pod_messages: set[str] = field(default_factory=set)
    bound_at: float | None = None
    bound_node: str | None = None
    first_allocated_at: float | None = None
    records: dict[str, str] = field(default_factory=dict)
    """Ledger record name -> allocationTimestamp, for every record seen for the claim."""
    devices: dict[str, list[str]] = field(default_factory=dict)
    """allocationTimestamp -> the allocated ``driver/pool/device`` of each result."""

    def wait_first(self, type_: str, status: str, reason: str | None = None, timeout: float = 2.0) -> float:
        """When the observer first saw the condition, waiting a little for its next poll."""

        def found() -> Any:
            return self.first(type_, status, reason)

        seen_at: float = wait_for(found, timeout, f"the observer to see {type_}={status}")
        return seen_at

    def first(self, type_: str, status: str, reason: str | None = None) -> float | None:
        for t, _stamp, typ, stat, why in self.conditions:
            if typ == type_ and stat == status and (reason is None or why == reason):
                return t
        return None


class Observer:
    """Polls claims and pods of one namespace in a thread, so transient states (a failure
    condition the scheduler erases seconds later) are not missed between test steps."""

    def __init__(self, api: Kube, namespace: str, pairs: dict[str, str], interval: float = 0.25) -> None:
        self.api = api
        self.namespace = namespace
        self.pairs = pairs  # claim name -> pod name
        self.interval = interval
        self.seen: dict[str, Seen] = {claim: Seen() for claim in pairs}
        self.taints: dict[str, str] = {}
        """DeviceTaintRules seen: name -> tainted ``driver/pool/device``."""
        self._last: dict[tuple[str, str, str], tuple[str, str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ba-observer", daemon=True)
        self.errors: list[str] = []

    def __enter__(self) -> Observer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._poll()
            except Exception as err:  # recorded, never fatal to the observer
                self.errors.append(repr(err))
            self._stop.wait(self.interval)

    def _poll(self) -> None:
        now = time.monotonic()
        claims = {c["metadata"]["name"]: c for c in self.api.list(claim_path(self.namespace))}
        pods = {p["metadata"]["name"]: p for p in self.api.list(pod_path(self.namespace))}
        for rule in taint_rules(self.api):
            selector = rule["spec"]["deviceSelector"]
            device = f"{selector['driver']}/{selector['pool']}/{selector['device']}"
            self.taints.setdefault(rule["metadata"]["name"], device)
        for record in records(self.api):
            ref = record["spec"]["claim"]
            if ref["namespace"] == self.namespace and ref["name"] in self.seen:
                stamp = record["spec"]["allocationTimestamp"]
                self.seen[ref["name"]].records.setdefault(record["metadata"]["name"], stamp)
        for claim_name, pod_name in self.pairs.items():
            seen = self.seen[claim_name]
            claim = claims.get(claim_name)
            stamp = allocation_stamp(claim)
            if stamp and stamp not in seen.stamps:
                seen.stamps.append(stamp)
                results = claim["status"]["allocation"]["devices"]["results"]  # type: ignore[index]
                seen.devices[stamp] = [f"{r['driver']}/{r['pool']}/{r['device']}" for r in results]
                if seen.first_allocated_at is None:
                    seen.first_allocated_at = now
            for device in (claim or {}).get("status", {}).get("devices", []) or []:
                for cond in device.get("conditions", []) or []:
                    key = (claim_name, str(stamp), cond["type"])
                    value = (cond["status"], cond["reason"])
                    if self._last.get(key) != value:
                        self._last[key] = value
                        seen.conditions.append((now, str(stamp), cond["type"], *value))
            pod = pods.get(pod_name)
            if pod is not None:
                message = pod_scheduled_message(pod)
                if message:
                    seen.pod_messages.add(message)
                if pod["spec"].get("nodeName") and seen.bound_at is None:
                    seen.bound_at = now
                    seen.bound_node = pod["spec"]["nodeName"]


def wait_ledger_empty(api: Kube, timeout: float = 30) -> None:
    wait_for(lambda: not records(api), timeout, "the ledger to be empty")


# -- waiting helpers (typed, so tests need no walrus lambdas) ----------------------------------------


def wait_bound(api: Kube, namespace: str, pod: str, timeout: float) -> dict[str, Any]:
    def bound() -> Any:
        body: dict[str, Any] = api.get(pod_path(namespace, pod))
        return body if body["spec"].get("nodeName") else None

    return wait_for(bound, timeout, f"pod {namespace}/{pod} to be bound")


def wait_policy_condition(api: Kube, name: str, type_: str, reason: str, timeout: float) -> dict[str, Any]:
    def found() -> Any:
        cond = condition(api.get(f"{POLICIES}/{name}"), type_)
        return cond if cond is not None and cond["reason"] == reason else None

    return wait_for(found, timeout, f"{type_}={reason} on policy {name}")


def wait_entry_status(
    api: Kube, namespace: str, claim: str, want: dict[tuple[str, str], str], timeout: float
) -> dict[str, Any]:
    """Wait until the claim shows every ``(driver, type) -> status`` of ``want``; returns the claim."""

    def shown() -> Any:
        body: dict[str, Any] = api.get(claim_path(namespace, claim))
        for (driver, type_), status in want.items():
            cond = entry_condition(body, driver, type_)
            if cond is None or cond["status"] != status:
                return None
        return body

    return wait_for(shown, timeout, f"claim {namespace}/{claim} to show {want}")


def policy_condition(api: Kube, name: str, type_: str) -> dict[str, Any]:
    cond = condition(api.get(f"{POLICIES}/{name}"), type_)
    assert cond is not None, f"policy {name} has no {type_} condition"
    return cond


def wait_policy_ready(api: Kube, name: str, timeout: float) -> None:
    wait_for(lambda: policy_ready(api, name), timeout, f"policy {name} to be Ready")


def wait_event(api: Kube, namespace: str, kind: str, name: str, reason: str, timeout: float) -> None:
    wait_for(
        lambda: reason in reasons(events_for(api, namespace, kind, name)),
        timeout,
        f"Event {reason} on {kind} {namespace}/{name}",
    )
