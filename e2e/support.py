"""What the e2e tests of every package share: their namespaces and the cluster-scoped objects
they create, each removed at teardown; and the eviction guard the session installs.

The fixtures of ``e2e/conftest.py`` wrap these; tests that need a second namespace, or one on the
upstream cluster, call them directly.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import string
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from devcluster import nodes
from devcluster.constants import DELETE_PROTECTION_FINALIZER, E2E_NAMESPACE_LABEL, REPO_ROOT
from devcluster.kube import ApiError, Kube, WaitTimeout, wait_for

ARTIFACTS = REPO_ROOT / "test-artifacts"

EVICTION_GUARD = REPO_ROOT / "manifests" / "components" / "eviction-guard"
ALLOW_CLUSTER_WIDE_EVICTION = "dra-operators.io/allow-cluster-wide-eviction"
"""The annotation that lets the eviction guard's refusals through (docs/operate.md, "Guard against
cluster-wide eviction"); the tests that evict cluster-wide on purpose carry it."""


def node_hash(request: pytest.FixtureRequest) -> str:
    """Eight hex digits of the test's node id: the stem of its object names."""
    return hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:8]


def make_namespace(api: Kube, request: pytest.FixtureRequest, labels: dict[str, str] | None = None) -> str:
    suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=4))
    name = f"e2e-{node_hash(request)}-{suffix}"
    api.create(
        "/api/v1/namespaces",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {E2E_NAMESPACE_LABEL: "true", **(labels or {})}},
        },
    )
    wait_for(
        lambda: api.get_or_none(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
        60,
        f"the default ServiceAccount in {name}",
    )
    return name


NAMESPACE_DELETION_SECONDS = 120


def cleanup_namespace(api: Kube, name: str) -> None:
    for pod in api.list(f"/api/v1/namespaces/{name}/pods"):
        api.delete(f"/api/v1/namespaces/{name}/pods/{pod['metadata']['name']}", gracePeriodSeconds="0")
    _delete_podgroups(api, name)
    for claim in api.list(f"/apis/resource.k8s.io/v1/namespaces/{name}/resourceclaims"):
        finalizers = claim["metadata"].get("finalizers", [])
        if DELETE_PROTECTION_FINALIZER in finalizers:
            remaining = [f for f in finalizers if f != DELETE_PROTECTION_FINALIZER]
            with contextlib.suppress(ApiError):
                api.patch(
                    f"/apis/resource.k8s.io/v1/namespaces/{name}/resourceclaims/{claim['metadata']['name']}",
                    {
                        "metadata": {
                            "finalizers": remaining,
                            "resourceVersion": claim["metadata"]["resourceVersion"],
                        }
                    },
                )
    api.delete(f"/api/v1/namespaces/{name}")
    try:
        # kube-controller-manager's namespace controller backs off while content remains, and
        # after the API server outage test it took 61 s for a namespace with nothing left
        # that holds a finalizer.
        wait_for(
            lambda: api.get_or_none(f"/api/v1/namespaces/{name}") is None,
            NAMESPACE_DELETION_SECONDS,
            f"namespace {name} to go",
        )
    except AssertionError:
        leftovers = [
            f"{kind}/{o['metadata']['name']}: {o['metadata'].get('finalizers')}"
            for kind, path in (
                ("pods", f"/api/v1/namespaces/{name}/pods"),
                ("resourceclaims", f"/apis/resource.k8s.io/v1/namespaces/{name}/resourceclaims"),
            )
            for o in api.list(path)
            if o["metadata"].get("finalizers")
        ]
        raise AssertionError(
            f"namespace {name} is still there; objects with finalizers: {leftovers}"
        ) from None


def namespace_of_test(api: Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test, removed afterwards (a fixture's body)."""
    name = make_namespace(api, request)
    yield name
    cleanup_namespace(api, name)


def _delete_podgroups(api: Kube, namespace: str) -> None:
    """A PodGroup keeps its protection finalizer until its members are gone, and the namespace
    controller that meets it retries only after a backoff: 5 s more per namespace. Deleted
    after the pods, the groups go at once. Nothing to do where PodGroups are not served."""
    path = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups"
    try:
        groups = api.list(path)
    except ApiError as err:
        if err.not_found:
            return
        raise
    if not groups:
        return
    for group in groups:
        api.delete(f"{path}/{group['metadata']['name']}")
    # A member held by a finalizer keeps its group; the namespace's deletion then waits for both.
    with contextlib.suppress(WaitTimeout):
        wait_for(lambda: not api.list(path), 10, f"the PodGroups of {namespace} to go")


class Tracker:
    """Creates cluster-scoped objects and deletes them at teardown, nodes (with slices) last."""

    def __init__(self, api: Kube) -> None:
        self.api = api
        self.paths: list[str] = []
        self.nodes: list[str] = []

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        obj: dict[str, Any] = self.api.create(path, body)
        self.paths.append(f"{path}/{obj['metadata']['name']}")
        return obj

    def node(self, name: str, **kwargs: Any) -> dict[str, Any]:
        obj = nodes.create_fake_node(self.api, name, **kwargs)
        self.nodes.append(name)
        return obj

    def resource_slice(
        self, node: str, driver: str, devices: list[dict[str, Any]], **kwargs: Any
    ) -> dict[str, Any]:
        return self.create(
            "/apis/resource.k8s.io/v1/resourceslices", nodes.slice_body(node, driver, devices, **kwargs)
        )

    def fake_pool(self, node: str, device_class: str, driver: str, devices: int) -> None:
        """A fake node whose pool publishes ``devices`` devices of ``driver``, and a DeviceClass of
        them, for kube-scheduler to allocate from."""
        self.node(node)
        self.device_class(device_class, driver)
        self.resource_slice(node, driver, nodes.make_devices(devices))

    def device_class(
        self, name: str, driver: str, extra_selectors: list[str] | None = None
    ) -> dict[str, Any]:
        body = device_class_body(name, driver)
        body["spec"]["selectors"] += [{"cel": {"expression": e}} for e in extra_selectors or []]
        return self.create("/apis/resource.k8s.io/v1/deviceclasses", body)

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    def cleanup(self) -> None:
        for path in reversed(self.paths):
            self.api.delete(path)
        for name in reversed(self.nodes):
            nodes.delete_fake_node(self.api, name)


# -- the eviction guard ---------------------------------------------------------------------------


def eviction_guard_kustomization(directory: Path) -> Path:
    """A kustomization that adds the component under ``components:``, as docs/operate.md says. It has
    no resources of its own: the e2e tier runs the operators on the host, not from manifests/."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        "components:\n"
        f"- {os.path.relpath(EVICTION_GUARD, directory)}\n"
    )
    return directory


def guard_refusal(api: Kube, path: str, body: dict[str, Any]) -> str | None:
    """The eviction guard's refusal of creating ``body`` (a server-side dry run, so nothing is
    stored whatever the answer), or None when it is accepted."""
    try:
        api.request("POST", path, params={"dryRun": "All"}, body=body)
    except ApiError as err:
        if err.status == 403 and "dra-operators-eviction-guard" in err.message:
            return err.message
        raise
    return None


def controller_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """The ownerReference a controller puts on what it creates for ``owner`` (a Pod or a PodGroup
    as the API returned it, which names its own apiVersion and kind)."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }


def device_class_body(name: str, driver: str) -> dict[str, Any]:
    """A DeviceClass of every device of ``driver``."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def slice_body(
    name: str, driver: str, pool: str, devices: list[dict[str, Any]], **where: Any
) -> dict[str, Any]:
    """A ResourceSlice that is its pool's only one; ``where``: ``nodeName``, ``nodeSelector`` or
    ``allNodes``."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
            **where,
        },
    }
