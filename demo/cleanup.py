"""Removing everything a scenario created, on a cluster without kubelets.

Three things make this more than ``kubectl delete``, and the order follows from them:

* a bound pod is never confirmed gone by a kubelet, so pods are deleted with a zero grace period;
* the scheduler puts a delete-protection finalizer on every claim it allocates, which only the
  resourceclaim controller removes; when that operator does not run (the e2e tests start only
  the operators a scenario needs), the finalizer is removed here once the pods are gone;
* the bindingattacher keeps a finalizer on a DeviceAttachPolicy until its attachments are
  detached, which follows the claims' deletion; without a running attacher it is removed here.

Cluster-scoped objects of the numbered manifests (DeviceTaintRules, pool status requests,
policies) are found by reading the manifests, so a new manifest needs no change here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from demo import fakedriver
from demo.scenarios import Scenario
from devcluster.constants import DELETE_PROTECTION_FINALIZER
from devcluster.kube import ApiError, Kube, WaitTimeout, wait_for

# How long the operators get to release what they hold before the finalizers are dropped here:
# the resourceclaim operator deallocates a claim within a second of its pods' deletion, the
# attacher detaches and releases its policy within a few.
CLAIM_GRACE = 5.0
POLICY_GRACE = 15.0


def plural(kind: str) -> str:
    lower = kind.lower()
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + ("es" if lower.endswith("s") else "s")


def collection(doc: dict[str, Any]) -> str:
    version = doc["apiVersion"]
    root = f"/api/{version}" if "/" not in version else f"/apis/{version}"
    return f"{root}/{plural(doc['kind'])}"


def numbered_manifests(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("[0-9]-*.yaml") if not p.name.endswith("-driver.yaml"))


def cluster_objects(folder: Path) -> list[str]:
    """API paths of the cluster-scoped objects (Namespaces aside) that the manifests create."""
    paths = []
    for manifest in numbered_manifests(folder):
        for doc in yaml.safe_load_all(manifest.read_text()):
            if doc and doc["kind"] != "Namespace" and "namespace" not in doc["metadata"]:
                paths.append(f"{collection(doc)}/{doc['metadata']['name']}")
    return paths


def _all_gone(api: Kube, paths: list[str], within: float) -> list[str]:
    """Waits up to ``within`` seconds; returns the paths still there."""
    try:
        wait_for(lambda: all(api.get_or_none(p) is None for p in paths), within, "deletions")
        return []
    except WaitTimeout:
        return [p for p in paths if api.get_or_none(p) is not None]


def _drop_finalizers(api: Kube, path: str, keep: Callable[[str], bool] = lambda _: False) -> None:
    obj = api.get_or_none(path)
    if obj is None:
        return
    finalizers = obj["metadata"].get("finalizers") or []
    with contextlib.suppress(ApiError):  # gone or changed meanwhile: the next look decides
        api.patch(
            path,
            {
                "metadata": {
                    "finalizers": [f for f in finalizers if keep(f)] or None,
                    "resourceVersion": obj["metadata"]["resourceVersion"],
                }
            },
        )


def _delete(
    api: Kube, paths: list[str], within: float, keep: Callable[[str], bool] = lambda _: False
) -> None:
    """Delete, give the finalizers' owners ``within`` seconds, then drop what they left."""
    present = [p for p in paths if api.delete(p) is not None]
    for path in _all_gone(api, present, within) if present else []:
        _drop_finalizers(api, path, keep)


def clean(
    api: Kube, scenario: Scenario, say: Callable[[str], None] = lambda _: None, wait: bool = True
) -> None:
    """Remove what the scenario created. ``wait=False`` leaves the namespace terminating (the
    namespace controller takes a few seconds); a later ``clean`` waits for it to be gone."""
    ns = scenario.namespace
    for pod in api.list(f"/api/v1/namespaces/{ns}/pods"):
        api.delete(f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}", gracePeriodSeconds="0")
    claims = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
    claim_paths = [f"{claims}/{c['metadata']['name']}" for c in api.list(claims)]
    _delete(api, claim_paths, CLAIM_GRACE, keep=lambda f: f != DELETE_PROTECTION_FINALIZER)
    _delete(api, cluster_objects(scenario.folder), POLICY_GRACE)
    if api.delete(f"/api/v1/namespaces/{ns}") is not None and wait:
        _all_gone(api, [f"/api/v1/namespaces/{ns}"], 60)
    if any(scenario.folder.glob("*-driver.yaml")):  # make run's real-node workload has none
        fakedriver.delete(api, fakedriver.load(fakedriver.driver_file(scenario.folder)), say)
    say(f"cleaned up {scenario.name}")
