"""Bodies, API helpers and checks shared by the resourceclaim e2e tests.

Pods that must stay unscheduled name a scheduler that does not exist, so kube-scheduler
never touches them or their claims, and the tests can allocate claims by hand (as an
admin, who holds ``resourceclaims/binding``). Pods that bypass the scheduler get
``spec.nodeName`` of a fake node, so the pod garbage collector does not remove them as
orphans. Only the tests about real scheduling use kube-scheduler.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from devcluster.constants import DELETE_PROTECTION_FINALIZER, PLACEHOLDER_IMAGE
from devcluster.kube import ApiError, Kube, WaitTimeout, wait_for
from e2e import harness
from e2e.support import controller_reference

T = TypeVar("T")

RESOURCE_API = "/apis/resource.k8s.io/v1"
PODGROUP_API = "/apis/scheduling.k8s.io/v1beta1"
OUR_MANAGER = "dra-operators-resourceclaim"
UPSTREAM_MANAGER = "ResourceClaimController"
CREATES = "dra_operators_resourceclaim_creates_total"
POD_OWNER = {"owner_api_group": "", "owner_api_kind": "Pod"}
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
EXTENDED_CLAIM = "resource.kubernetes.io/extended-resource-claim"
HOLD_FINALIZER = "e2e.dra-operators.test/hold"
NO_SCHEDULER = "e2e-nobody"
DEVICE_CLASS = "gpu.example.com"
DRIVER = "gpu.example.com"
FAILED_CREATION = "FailedResourceClaimCreation"
GENERATED_SUFFIX = "[bcdfghjklmnpqrstvwxz2456789]{5}"
TEMPLATE_SPEC: dict[str, Any] = {
    "devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": DEVICE_CLASS}}]}
}

__all__ = ["DELETE_PROTECTION_FINALIZER"]


# -- paths ------------------------------------------------------------------------------------


def pods_path(ns: str, name: str = "", sub: str = "") -> str:
    return _path(f"/api/v1/namespaces/{ns}/pods", name, sub)


def claims_path(ns: str, name: str = "", sub: str = "") -> str:
    return _path(f"{RESOURCE_API}/namespaces/{ns}/resourceclaims", name, sub)


def templates_path(ns: str, name: str = "") -> str:
    return _path(f"{RESOURCE_API}/namespaces/{ns}/resourceclaimtemplates", name, "")


def podgroups_path(ns: str, name: str = "", sub: str = "") -> str:
    return _path(f"{PODGROUP_API}/namespaces/{ns}/podgroups", name, sub)


def _path(base: str, name: str, sub: str) -> str:
    path = f"{base}/{name}" if name else base
    return f"{path}/{sub}" if sub else path


# -- bodies -----------------------------------------------------------------------------------


def template_entry(name: str, template: str) -> dict[str, str]:
    return {"name": name, "resourceClaimTemplateName": template}


def named_entry(name: str, claim: str) -> dict[str, str]:
    return {"name": name, "resourceClaimName": claim}


def template_body(
    name: str,
    *,
    device_class: str = DEVICE_CLASS,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    admin_access: bool = False,
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if admin_access:
        exactly["adminAccess"] = True
    spec: dict[str, Any] = {"spec": {"devices": {"requests": [{"name": "req-0", "exactly": exactly}]}}}
    metadata: dict[str, Any] = {}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    if metadata:
        spec["metadata"] = metadata
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": spec,
    }


def claim_body(
    name: str,
    *,
    finalizer: bool = False,
    owner: Mapping[str, Any] | None = None,
    annotations: Mapping[str, str] | None = None,
    request: str = "req-0",
    device_class: str = DEVICE_CLASS,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if finalizer:
        metadata["finalizers"] = [DELETE_PROTECTION_FINALIZER]
    if owner is not None:
        metadata["ownerReferences"] = [controller_reference(owner)]
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": {"devices": {"requests": [{"name": request, "exactly": {"deviceClassName": device_class}}]}},
    }


def pod_body(
    name: str,
    claims: Iterable[Mapping[str, str]],
    *,
    node_name: str | None = None,
    scheduled: bool = False,
    finalizers: Iterable[str] = (),
    extended_resource: str | None = None,
    group: str | None = None,
) -> dict[str, Any]:
    """A pod that never runs. ``scheduled=True`` leaves it to kube-scheduler; otherwise it
    either bypasses the scheduler (``node_name``) or names a scheduler nobody runs. ``group``:
    a member of that PodGroup."""
    entries = [dict(entry) for entry in claims]
    container: dict[str, Any] = {"name": "main", "image": PLACEHOLDER_IMAGE}
    if entries:
        container["resources"] = {"claims": [{"name": entry["name"]} for entry in entries]}
    if extended_resource:
        container.setdefault("resources", {}).update(
            {"requests": {extended_resource: "1"}, "limits": {extended_resource: "1"}}
        )
    spec: dict[str, Any] = {"containers": [container], "terminationGracePeriodSeconds": 0}
    if entries:
        spec["resourceClaims"] = entries
    if node_name:
        spec["nodeName"] = node_name
    elif not scheduled:
        spec["schedulerName"] = NO_SCHEDULER
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    metadata: dict[str, Any] = {"name": name}
    if finalizers:
        metadata["finalizers"] = list(finalizers)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def podgroup_body(name: str, claims: Iterable[Mapping[str, str]], gang: int | None = None) -> dict[str, Any]:
    """A PodGroup sharing ``claims`` with its members; basic scheduling unless ``gang`` (its
    minCount), since a PodGroup must name a policy."""
    policy: dict[str, Any] = {"gang": {"minCount": gang}} if gang else {"basic": {}}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": policy, "resourceClaims": [dict(entry) for entry in claims]},
    }


def allocation(device: str = "dev-0", request: str = "req-0") -> dict[str, Any]:
    return {
        "devices": {"results": [{"request": request, "driver": DRIVER, "pool": "pool-a", "device": device}]}
    }


def pod_consumer(pod: Mapping[str, Any]) -> dict[str, str]:
    return {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}


def group_consumer(group: Mapping[str, Any]) -> dict[str, str]:
    """The reservedFor entry of a PodGroup, which kube-scheduler and the controller write once
    for all members of the group."""
    return {
        "apiGroup": "scheduling.k8s.io",
        "resource": "podgroups",
        "name": group["metadata"]["name"],
        "uid": group["metadata"]["uid"],
    }


# -- actions as a user or an admin ------------------------------------------------------------


def create_pod(api: Kube, ns: str, body: Mapping[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = api.create(pods_path(ns), body)
    return pod


def create_claim(api: Kube, ns: str, body: Mapping[str, Any]) -> dict[str, Any]:
    claim: dict[str, Any] = api.create(claims_path(ns), body)
    return claim


def create_podgroup(api: Kube, ns: str, body: Mapping[str, Any]) -> dict[str, Any]:
    group: dict[str, Any] = api.create(podgroups_path(ns), body)
    return group


def create_template(api: Kube, ns: str, body: Mapping[str, Any]) -> dict[str, Any]:
    template: dict[str, Any] = api.create(templates_path(ns), body)
    return template


def update_claim_status(api: Kube, ns: str, name: str, change: Callable[[dict[str, Any]], None]) -> Any:
    """Read-modify-PUT of a claim's status, as kube-scheduler would write it; retried on 409."""

    def attempt() -> Any:
        claim = api.get(claims_path(ns, name))
        change(claim.setdefault("status", {}))
        try:
            return api.replace(claims_path(ns, name, "status"), claim)
        except ApiError as err:
            if err.conflict:
                return None
            raise

    return wait_for(attempt, 20, f"the status update of claim {ns}/{name}")


def allocate(api: Kube, ns: str, name: str, reserved_for: Iterable[Mapping[str, str]] = ()) -> Any:
    """Allocate a claim the way kube-scheduler does: finalizer first, then the status."""
    claim = api.get(claims_path(ns, name))
    finalizers = claim["metadata"].get("finalizers") or []
    if DELETE_PROTECTION_FINALIZER not in finalizers:
        claim["metadata"]["finalizers"] = [*finalizers, DELETE_PROTECTION_FINALIZER]
        api.replace(claims_path(ns, name), claim)

    def change(status: dict[str, Any]) -> None:
        status["allocation"] = allocation()
        if reserved_for:
            status["reservedFor"] = [dict(entry) for entry in reserved_for]

    return update_claim_status(api, ns, name, change)


def set_phase(api: Kube, ns: str, name: str, phase: str) -> Any:
    return api.patch(pods_path(ns, name, "status"), {"status": {"phase": phase}})


def delete_pod_now(api: Kube, ns: str, name: str) -> None:
    api.delete(pods_path(ns, name), gracePeriodSeconds="0")


def release_pod(api: Kube, ns: str, name: str) -> None:
    """Drop the test's own finalizer from a lingering pod, so the namespace can go."""
    pod = api.get_or_none(pods_path(ns, name))
    if pod is not None and pod["metadata"].get("finalizers"):
        api.patch(pods_path(ns, name), {"metadata": {"finalizers": None}})


# -- reading ----------------------------------------------------------------------------------


def claims(api: Kube, ns: str) -> list[dict[str, Any]]:
    return api.list(claims_path(ns))


def claims_of_pod(
    api: Kube, ns: str, pod: Mapping[str, Any], entry: str | None = None
) -> list[dict[str, Any]]:
    """Claims controlled by this pod instance (or PodGroup instance: any owner), optionally only
    those for one entry."""
    uid = pod["metadata"]["uid"]
    return [
        claim
        for claim in claims(api, ns)
        if any(o.get("controller") and o["uid"] == uid for o in claim["metadata"].get("ownerReferences", []))
        and (entry is None or claim["metadata"].get("annotations", {}).get(POD_CLAIM_NAME) == entry)
    ]


def claim_statuses(api: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    pod = api.get(pods_path(ns, name))
    statuses: list[dict[str, Any]] = pod.get("status", {}).get("resourceClaimStatuses", [])
    return statuses


def group_claim_statuses(api: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    group = api.get(podgroups_path(ns, name))
    statuses: list[dict[str, Any]] = (group.get("status") or {}).get("resourceClaimStatuses") or []
    return statuses


def reserved_for(claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = (claim.get("status") or {}).get("reservedFor") or []
    return entries


def is_allocated(claim: Mapping[str, Any]) -> bool:
    return (claim.get("status") or {}).get("allocation") is not None


def finalizers(obj: Mapping[str, Any]) -> list[str]:
    names: list[str] = obj["metadata"].get("finalizers") or []
    return names


def pod_events(api: Kube, ns: str, pod: str) -> list[dict[str, Any]]:
    return object_events(api, ns, "Pod", pod)


def object_events(api: Kube, ns: str, kind: str, name: str) -> list[dict[str, Any]]:
    return [
        event
        for event in api.list(f"/api/v1/namespaces/{ns}/events")
        if event["involvedObject"].get("kind") == kind and event["involvedObject"].get("name") == name
    ]


def status_managers(pod: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (entry.get("manager", ""), entry.get("operation", ""), entry.get("subresource", ""))
        for entry in pod["metadata"].get("managedFields", [])
    ]


def wait_generated(
    api: Kube, ns: str, pod: Mapping[str, Any], entry: str, timeout: float = 30
) -> dict[str, Any]:
    """The one claim generated for (pod, entry), once the pod status names it."""

    def done() -> dict[str, Any] | None:
        found = claims_of_pod(api, ns, pod, entry)
        statuses = {
            s["name"]: s.get("resourceClaimName") for s in claim_statuses(api, ns, pod["metadata"]["name"])
        }
        if len(found) == 1 and statuses.get(entry) == found[0]["metadata"]["name"]:
            return found[0]
        return None

    return wait_value(done, timeout, f"the claim of {ns}/{pod['metadata']['name']} entry {entry}")


def wait_group_claim(
    api: Kube, ns: str, group: Mapping[str, Any], entry: str, timeout: float = 30
) -> dict[str, Any]:
    """The one claim generated for (PodGroup, entry), once the group's status names it."""
    name = group["metadata"]["name"]

    def done() -> dict[str, Any] | None:
        found = claims_of_pod(api, ns, group, entry)
        statuses = {s["name"]: s.get("resourceClaimName") for s in group_claim_statuses(api, ns, name)}
        if len(found) == 1 and statuses.get(entry) == found[0]["metadata"]["name"]:
            return found[0]
        return None

    return wait_value(done, timeout, f"the claim of PodGroup {ns}/{name} entry {entry}")


def wait_value(condition: Callable[[], T | None], timeout: float, what: str) -> T:
    """:func:`wait_for` for conditions that return the awaited object, or None until then."""
    value = wait_for(condition, timeout, what)
    assert value is not None
    return value


def wait_claim(
    api: Kube, ns: str, name: str, predicate: Callable[[dict[str, Any]], bool], what: str, timeout: float = 30
) -> dict[str, Any]:
    """Wait until the claim exists and ``predicate`` holds for it; return it."""

    def check() -> dict[str, Any] | None:
        claim: dict[str, Any] | None = api.get_or_none(claims_path(ns, name))
        return claim if claim is not None and predicate(claim) else None

    return wait_value(check, timeout, what)


def assert_unchanged(read: Callable[[], T], seconds: float, what: str, interval: float = 1.0) -> T:
    """An observation window: ``read()`` must return the same value for ``seconds``."""
    initial = read()
    try:
        wait_for(lambda: read() != initial, seconds, f"a change of {what}", interval=interval)
    except WaitTimeout:
        return initial
    raise AssertionError(f"{what} changed during the observation window: was {initial!r}, now {read()!r}")


# -- end states, for the differential tests --------------------------------------------------


def compact(value: Any) -> Any:
    """Drop empty fields, which one writer may send as [] and another leave out."""
    if isinstance(value, dict):
        return {k: compact(v) for k, v in value.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [compact(v) for v in value]
    return value


def controller_fields(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the resourceclaim controller owns of an object, whichever controller it is: the two
    field managers differ by design, the operation, subresource and fields must not."""
    return [
        {"operation": mf.get("operation"), "subresource": mf.get("subresource"), "fields": mf.get("fieldsV1")}
        for mf in obj["metadata"].get("managedFields", [])
        if mf.get("manager") in (OUR_MANAGER, UPSTREAM_MANAGER)
    ]


def snapshot(api: Kube, ns: str, podgroups: bool = False) -> dict[str, Any]:
    """Claims and pod statuses, keyed and cross-referenced by stable names: generated name
    suffixes, UIDs, timestamps, resource versions and managed fields normalised away.
    ``podgroups``: also the PodGroups, and the fields the controller manages on them and on pods."""
    pods = api.list(pods_path(ns))
    claims = api.list(claims_path(ns))
    groups = api.list(podgroups_path(ns)) if podgroups else []
    names: dict[str, str] = {}
    for claim in claims:
        meta = claim["metadata"]
        generate = meta.get("generateName")
        names[meta["name"]] = f"{generate}<random>" if generate else meta["name"]
    uids = {p["metadata"]["uid"]: f"<pod {p['metadata']['name']}>" for p in pods}
    uids |= {c["metadata"]["uid"]: f"<claim {names[c['metadata']['name']]}>" for c in claims}
    uids |= {g["metadata"]["uid"]: f"<podgroup {g['metadata']['name']}>" for g in groups}

    def consumer(entry: dict[str, Any]) -> dict[str, Any]:
        return {**entry, "uid": uids.get(entry["uid"], entry["uid"])}

    def claim_name(name: str) -> str:
        # A terminal pod may still name a generated claim that is gone by now.
        return names.get(name) or re.sub(f"-{GENERATED_SUFFIX}$", "-<random>", name)

    def recorded(statuses: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {**s, "resourceClaimName": claim_name(s["resourceClaimName"])}
            if s.get("resourceClaimName")
            else s
            for s in statuses
        ]

    state_claims = {}
    for claim in claims:
        meta = claim["metadata"]
        status = dict(claim.get("status") or {})
        status["reservedFor"] = [consumer(e) for e in status.get("reservedFor") or []]
        state_claims[names[meta["name"]]] = {
            "generateName": meta.get("generateName"),
            "labels": meta.get("labels"),
            "annotations": meta.get("annotations"),
            "finalizers": meta.get("finalizers"),
            "deleting": "deletionTimestamp" in meta,
            "ownerReferences": [consumer(o) for o in meta.get("ownerReferences", [])],
            "spec": claim["spec"],
            "status": status,
        }
    state_pods = {}
    for pod in pods:
        status = pod.get("status", {})
        state_pods[pod["metadata"]["name"]] = {
            "phase": status.get("phase"),
            "resourceClaimStatuses": recorded(status.get("resourceClaimStatuses", [])),
            "extendedResourceClaimStatus": status.get("extendedResourceClaimStatus"),
        }
        if podgroups:
            state_pods[pod["metadata"]["name"]]["controller"] = controller_fields(pod)
    state: dict[str, Any] = {"claims": state_claims, "pods": state_pods}
    if podgroups:
        state["podgroups"] = {}
        for group in groups:
            statuses = (group.get("status") or {}).get("resourceClaimStatuses") or []
            state["podgroups"][group["metadata"]["name"]] = {
                "finalizers": group["metadata"].get("finalizers"),
                "deleting": "deletionTimestamp" in group["metadata"],
                "resourceClaims": group["spec"].get("resourceClaims"),
                "resourceClaimStatuses": recorded(statuses),
                "controller": controller_fields(group),
            }
    compacted: dict[str, Any] = compact(state)
    return compacted


# -- metrics ----------------------------------------------------------------------------------

# -- watching one object ----------------------------------------------------------------------


class ObjectHistory:
    """Every version of one object, as ``kubectl get --watch --output-watch-events`` sees it.

    Used where the order of writes matters; a poll could miss an intermediate version.
    """

    def __init__(self, cluster: harness.Cluster, resource: str, ns: str, name: str) -> None:
        self._proc = subprocess.Popen(
            [
                cluster.kubectl_path,
                f"--kubeconfig={cluster.kubeconfig}",
                "get",
                resource,
                name,
                "-n",
                ns,
                "--watch",
                "--output-watch-events",
                "-o",
                "json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        decoder = json.JSONDecoder()
        buffer = ""
        for line in self._proc.stdout:
            buffer += line
            while buffer.strip():
                try:
                    event, end = decoder.raw_decode(buffer.lstrip())
                except json.JSONDecodeError:
                    break
                buffer = buffer.lstrip()[end:]
                with self._lock:
                    self._events.append(event)

    def events(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._events)

    def stop(self) -> list[dict[str, Any]]:
        self._proc.terminate()
        self._proc.wait(10)
        self._reader.join(5)
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        return self.events()


# -- state nobody but its owner may add -------------------------------------------------------


def assert_no_foreign_state(api: Kube, namespaces: Iterable[str] | None = None) -> None:
    """Spec scenario 33: no kopf annotations or finalizers, no finalizer of ours, no
    ``blockOwnerDeletion`` on generated claims."""
    paths: list[str] = []
    if namespaces is None:
        paths = ["/api/v1/pods", f"{RESOURCE_API}/resourceclaims"]
    else:
        for ns in namespaces:
            paths += [pods_path(ns), claims_path(ns)]
    allowed_finalizers = {DELETE_PROTECTION_FINALIZER, HOLD_FINALIZER}
    for path in paths:
        for obj in api.list(path):
            meta = obj["metadata"]
            ref = f"{obj.get('kind', path)} {meta.get('namespace')}/{meta['name']}"
            assert not [k for k in meta.get("annotations", {}) if k.startswith("kopf.zalando.org/")], ref
            assert set(meta.get("finalizers") or []) <= allowed_finalizers, (ref, meta.get("finalizers"))
            for owner in meta.get("ownerReferences", []):
                assert "blockOwnerDeletion" not in owner, (ref, owner)


# -- bursts of template pods (leader hand-over, upgrade, outage) ----------------------------


def absent_template(api: Kube, namespace: str) -> None:
    """Template ``tmpl``, whose class has no device: its pods stay pending, their claims matter."""
    create_template(api, namespace, template_body("tmpl", device_class="absent"))


def placeholder_pods(api: Kube, namespace: str, names: list[str]) -> None:
    """Pods of template ``tmpl`` left to kube-scheduler."""
    for name in names:
        create_pod(api, namespace, pod_body(name, [template_entry("gpu", "tmpl")], scheduled=True))


def claims_by_pod(api: Kube, namespace: str) -> dict[str, list[str]]:
    result: dict[str, list[str]] = {}
    for claim in api.list(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"):
        for ref in claim["metadata"].get("ownerReferences", []):
            if ref.get("kind") == "Pod" and ref.get("controller"):
                result.setdefault(ref["name"], []).append(claim["metadata"]["name"])
    return result


def all_recorded(api: Kube, namespace: str, count: int) -> bool:
    pods = api.list(f"/api/v1/namespaces/{namespace}/pods")
    return len(pods) == count and all(p.get("status", {}).get("resourceClaimStatuses") for p in pods)


def assert_exactly_one_claim_each(api: Kube, namespace: str, names: list[str]) -> None:
    claims = claims_by_pod(api, namespace)
    assert sorted(claims) == sorted(names)
    duplicated = {pod: c for pod, c in claims.items() if len(c) != 1}
    assert not duplicated, f"pods with more than one claim: {duplicated}"
    for pod in api.list(f"/api/v1/namespaces/{namespace}/pods"):
        recorded = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        assert recorded == claims[pod["metadata"]["name"]][0]


def assert_generated_claim(
    api: Kube, ns: str, claim: Mapping[str, Any], owner: Mapping[str, Any], generate_name: str
) -> None:
    """A claim generated from ``gpu-tmpl`` (template scenario fixture) for ``owner``, a pod or a
    PodGroup: its name, its one controller reference, the template's labels, annotations and spec
    plus the entry annotation, and no finalizer."""
    meta = claim["metadata"]
    assert re.fullmatch(re.escape(generate_name) + GENERATED_SUFFIX, meta["name"]), meta["name"]
    assert meta["generateName"] == generate_name
    assert meta["ownerReferences"] == [controller_reference(owner)]
    entry = generate_name.removeprefix(owner["metadata"]["name"] + "-").removesuffix("-")
    assert meta["annotations"] == {"note": "x", POD_CLAIM_NAME: entry}
    assert meta["labels"] == {"app": "demo"}
    assert not meta.get("finalizers")
    template = api.get(templates_path(ns, "gpu-tmpl"))
    assert claim["spec"] == template["spec"]["spec"]


def on_both_sides(
    operator: Callable[..., Any], run: Callable[[Kube], T], ours: Kube, theirs: Kube
) -> tuple[T, T]:
    """The same scenario set on our operator's cluster and on the upstream-mode one, at the same
    time; our operator runs under its own ServiceAccount and is still ready at the end."""
    with operator("resourceclaim") as running, ThreadPoolExecutor(2) as pool:
        ours_future = pool.submit(run, ours)
        theirs_future = pool.submit(run, theirs)
        results = ours_future.result(), theirs_future.result()
        assert running.ready()
    return results
