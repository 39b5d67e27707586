"""Installing the product as users do (``kubectl apply -k``) onto a devcluster with the real node,
and reading the operators' Deployments and Pods back: shared by the deployed tier
(``e2e/test_deployed.py``) and the managed profile (``e2e/test_managed.py``)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from e2e import harness
from e2e.cluster.constants import REPO_ROOT
from e2e.kube import Kube, wait_for
from e2e.realnode_support import DEVICE_CLASS, RESOURCE, create_gpu_class
from e2e.support import ARTIFACTS, cleanup_namespace, make_namespace

NAMESPACE = "dra-operators"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
OPERATOR_PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"


@dataclass
class Installed:
    cluster: harness.Cluster
    api: Kube
    available_at: float
    measurements: dict[str, Any] = field(default_factory=dict)

    def kubectl(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.cluster.kubectl(*args, **kwargs)

    def kubectl_dra(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "operators.kubectl_dra", *args, "--kubeconfig", self.cluster.kubeconfig],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=REPO_ROOT,
        )


def unavailable(api: Kube, operators: Sequence[str]) -> list[str]:
    """The operators whose Deployments are not Available yet (all of them until they exist)."""
    items = {d["metadata"]["name"]: d for d in api.list(DEPLOYMENTS)}
    waiting = []
    for name in operators:
        deployment = items.get(f"dra-operators-{name}")
        conditions = {
            c["type"]: c["status"] for c in (deployment or {}).get("status", {}).get("conditions", [])
        }
        status = (deployment or {}).get("status", {})
        if conditions.get("Available") != "True" or status.get("updatedReplicas") != status.get("replicas"):
            waiting.append(name)
    return waiting


def operator_pods(api: Kube, operators: Sequence[str]) -> dict[str, dict[str, Any]]:
    pods = {}
    for pod in api.list(OPERATOR_PODS):
        component = pod["metadata"].get("labels", {}).get("app.kubernetes.io/component")
        if component in operators and pod["metadata"].get("deletionTimestamp") is None:
            pods[component] = pod
    return pods


@contextlib.contextmanager
def install(
    cluster: harness.Cluster, apply: Callable[[], object], operators: Sequence[str], artifact: str
) -> Iterator[Installed]:
    """``apply()`` (``kubectl apply -k``, ``helm install``) and wait until the operators'
    Deployments are Available; the measurements gathered meanwhile go to
    ``test-artifacts/<artifact>``."""
    api = Kube(cluster.kubeconfig)
    here = Installed(cluster, api, 0.0)
    try:
        started = time.monotonic()
        apply()
        try:
            wait_for(
                lambda: not unavailable(api, operators),
                300,
                "every operator Deployment to become Available",
                interval=0.5,
            )
        except AssertionError:
            print(cluster.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout)
            for name in unavailable(api, operators):
                print(
                    cluster.kubectl(
                        "logs", "-n", NAMESPACE, f"deploy/dra-operators-{name}", "--tail=20", check=False
                    ).stdout
                )
            raise
        here.available_at = time.monotonic()
        here.measurements["apply_to_available_seconds"] = round(here.available_at - started, 1)
        yield here
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / artifact).write_text(json.dumps(here.measurements, indent=2) + "\n")
        print(f"{artifact} measurements: {json.dumps(here.measurements)}")
        api.close()


def namespace_of_test(installed: Installed, request: Any) -> Iterator[str]:
    """A namespace of the test on the installed cluster, removed afterwards (a fixture's body)."""
    name = make_namespace(installed.api, request)
    yield name
    cleanup_namespace(installed.api, name)


def gpu_class(installed: Installed) -> Iterator[str]:
    """The test driver's DeviceClass on the installed cluster (a fixture's body)."""
    yield create_gpu_class(installed.api)
    installed.api.delete(f"{RESOURCE}/deviceclasses/{DEVICE_CLASS}")
