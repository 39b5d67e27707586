"""Fixtures of the devicehealth e2e modules: the product installed as users install it.

The package gets a devcluster of its own with the shipped manifests applied (``e2e/deployed``):
resourceclaim, devicetaint and devicehealth run as Pods on the real node under their shipped
ServiceAccounts, and the test driver on that node reports the health the policies act on. Every
test of the package shares the one install; ``cluster`` and ``api`` name that cluster here, so the
ordinary fixtures (``node``, ``namespace``, ``objects``, ``node_gpu_class``) serve it too.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devcluster import realnode
from devcluster.constants import REPO_ROOT
from devcluster.kube import Kube
from e2e import backends, harness
from e2e.product import support
from e2e.product.support import Installed


@pytest.fixture(scope="package")
def cluster(request: pytest.FixtureRequest, cluster: harness.Cluster) -> Iterator[harness.Cluster]:
    """Started once for the package (its kube-proxy's iptables rules are the machine's until it
    stops, so no other package's test runs beside it)."""
    yield from backends.deployed_devcluster(request, cluster, upstream=False)


@pytest.fixture(scope="package")
def api(cluster: harness.Cluster) -> Iterator[Kube]:
    client = Kube(cluster.kubeconfig)
    yield client
    client.close()


@pytest.fixture(scope="package", autouse=True)
def installed(cluster: harness.Cluster) -> Iterator[Installed]:
    yield from support.installed_from_kustomize(
        cluster, REPO_ROOT / "e2e" / "deployed", "device-health-deployed.json"
    )


@pytest.fixture
def healthy_node(node: realnode.NodeLayout) -> Iterator[realnode.NodeLayout]:
    """Every device Healthy and untainted before and after the test."""
    realnode.clear_device_health(node)
    yield node
    realnode.clear_device_health(node)
