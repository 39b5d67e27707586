"""Fixtures of the e2e tier (see the devcluster spec, section 7)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devcluster import build as build_mod
from devcluster import realnode
from devcluster.constants import DEFAULT_PROFILE, PROFILES, minor_of
from devcluster.kube import Kube
from e2e import backends, harness
from e2e.product import matrix
from e2e.product.support import DEVICE_CLASS, RESOURCE, create_gpu_class
from e2e.support import ARTIFACTS, Tracker, namespace_of_test, node_hash

DEFAULT_BINDING_TIMEOUT = "30s"
LANES = ("all", "main", "kube-proxy", "alone")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The coexistence guard never fires where the in-tree DRA controllers are off: each
    replacement operator's gauge was read when it was stopped (harness.GUARD_READINGS)."""
    readings = harness.GUARD_READINGS
    if not readings:
        return
    unexpected = [r for r in readings if r.detected and not r.expected]
    summary = {
        "operator_stops_read": len(readings),
        "expected_detections": sum(1 for r in readings if r.detected and r.expected),
        "unexpected_detections": [
            {"operator": r.operator, "detected": list(r.detected), "kubeconfig": r.kubeconfig}
            for r in unexpected
        ],
    }
    lane = session.config.getoption("--e2e-lane")
    ARTIFACTS.mkdir(exist_ok=True)
    name = "coexistence-guard.json" if lane == "all" else f"coexistence-guard-{lane}.json"
    (ARTIFACTS / name).write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"\ncoexistence guard: read at {len(readings)} operator stops; "
        f"fired where expected {summary['expected_detections']} times, elsewhere {len(unexpected)} times"
    )
    if unexpected:
        print(f"coexistence guard fired without an in-tree controller: {summary['unexpected_detections']}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("e2e", "dra-operators e2e backends")
    # pytest-kind registers --kubeconfig too (same meaning: use this cluster); share it.
    with contextlib.suppress(ValueError):
        group.addoption("--kubeconfig", default=None, help="run the e2e tier against this existing cluster")
    group.addoption(
        "--e2e-cluster",
        default=os.environ.get("E2E_CLUSTER", "devcluster"),
        choices=["devcluster", "kind"],
        help="backend when no --kubeconfig is given",
    )
    group.addoption(
        "--e2e-kind-image", default=None, help="default: kindest/node of --e2e-k8s-version (or the newest)"
    )
    group.addoption(
        "--e2e-node",
        default=os.environ.get("NODE") or "real",
        choices=["real", "fake"],
        help="real: the default-mode devcluster has one real node (kubelet, containerd, test driver)",
    )
    group.addoption(
        "--e2e-keep-cluster",
        action="store_true",
        help="leave the cluster running at the end, with its directory and logs; otherwise a failed run "
        "copies the logs to test-artifacts/ and the directory is removed",
    )
    group.addoption("--e2e-no-build", action="store_true", help="missing binaries are an error, not a build")
    group.addoption("--e2e-binding-timeout", default=DEFAULT_BINDING_TIMEOUT)
    group.addoption("--e2e-allow-nonlocal", action="store_true")
    group.addoption(
        "--e2e-upstream-dra",
        action="store_true",
        help="the existing cluster runs the in-tree DRA controllers",
    )
    group.addoption(
        "--e2e-k8s-version",
        default=os.environ.get("K8S_VERSION") or None,
        help="the devclusters' Kubernetes version (make test-e2e-versions, make test-matrix); with it, or "
        "with --e2e-profile=defaults, only the tests marked versions run",
    )
    group.addoption(
        "--e2e-profile",
        default=os.environ.get("PROFILE") or DEFAULT_PROFILE,
        choices=PROFILES,
        help="the devclusters' settings: lab (the newest version's alpha DRA gates and APIs) or defaults "
        "(upstream's, as on managed clusters)",
    )
    group.addoption(
        "--e2e-lane",
        default="all",
        choices=LANES,
        help="one lane of the tier (make test runs main and kube-proxy side by side, then alone): "
        "kube-proxy, the tests marked kube_proxy; alone, those marked alone; main, the rest",
    )
    group.addoption(
        "--e2e-workload-claims",
        action="store_true",
        default=bool(os.environ.get("WORKLOAD_CLAIMS")),
        help="the devclusters (or kind) get the DRAWorkloadResourceClaims and GenericWorkload gates "
        "and serve the PodGroup API, and the tests marked workload_claims run (an existing cluster: "
        "it has them); without it those tests are deselected",
    )


def version_pass(config: pytest.Config) -> bool:
    """A run against another version or profile than the lab's: the tests marked versions only."""
    version = config.getoption("--e2e-k8s-version")
    newest = version is None or version == build_mod.NEWEST.version
    return not newest or config.getoption("--e2e-profile") != DEFAULT_PROFILE


def served_in_pass(config: pytest.Config) -> matrix.Served:
    """What the pass's clusters serve, by the support matrix."""
    version = config.getoption("--e2e-k8s-version") or build_mod.NEWEST.version
    return matrix.SERVED[(minor_of(version), config.getoption("--e2e-profile"))]


def _fits(item: pytest.Item, served: matrix.Served) -> bool:
    """needs_served("rule_version"): the test asserts what works where the cluster serves it;
    lacks_served(...): what the user sees where it does not."""
    needs = [name for mark in item.iter_markers("needs_served") for name in mark.args]
    lacks = [name for mark in item.iter_markers("lacks_served") for name in mark.args]
    return all(getattr(served, n) for n in needs) and not any(getattr(served, n) for n in lacks)


def lane_of(item: pytest.Item) -> str:
    """Where a test runs when the tier runs in lanes. Clusters with kube-proxy write the machine's
    iptables chains, so their tests share one lane, a module at a time; a test that compares the
    machine before and after runs when nothing else does; the rest share the main lane."""
    if item.get_closest_marker("alone"):
        return "alone"
    if item.get_closest_marker("kube_proxy"):
        return "kube-proxy"
    return "main"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests are deselected, not skipped (a skip fails a CI run): those of the workload claims option
    without it; in a version pass every test not marked versions, and in the lab's pass the tests
    marked versions only, which a version pass runs instead; in either, the tests for what the
    pass's clusters do not serve, or do serve (needs_served, lacks_served); with --e2e-lane, the
    tests of the other lanes."""
    served = served_in_pass(config)
    if version_pass(config):
        off = [item for item in items if not item.get_closest_marker("versions")]
    else:
        off = [item for item in items if item.get_closest_marker("versions_only")]
    off += [item for item in items if not _fits(item, served) and item not in off]
    lane = config.getoption("--e2e-lane")
    if lane != "all":
        off += [item for item in items if lane_of(item) != lane and item not in off]
    if not config.getoption("--e2e-workload-claims"):
        off += [item for item in items if item.get_closest_marker("workload_claims") and item not in off]
    if off:
        config.hook.pytest_deselected(items=off)
        items[:] = [item for item in items if item not in off]


# -- clusters -----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[harness.Cluster]:
    """The cluster of the session, with the eviction guard installed (harness.eviction_guard):
    the tests that evict cluster-wide on purpose carry its annotation, and every other
    DeviceTaintRule and DeviceTaintSelector of the run shows it lets ordinary ones through."""
    config = request.config
    kubeconfig = config.getoption("--kubeconfig") or os.environ.get("E2E_KUBECONFIG")
    if kubeconfig:
        handle = backends.existing_cluster(config, kubeconfig)
        with harness.eviction_guard(handle):
            yield handle
        return
    if config.getoption("--e2e-cluster") == "kind":
        handle = backends.kind_cluster(config)
        with harness.eviction_guard(handle):
            yield handle
        return
    handle = backends.start_devcluster(
        config, upstream=False, binding_timeout=config.getoption("--e2e-binding-timeout")
    )
    with harness.eviction_guard(handle):
        yield handle
    backends.stop_devcluster(config, handle, request.session.testsfailed > 0)


@pytest.fixture(scope="session")
def upstream_cluster(request: pytest.FixtureRequest, cluster: harness.Cluster) -> Iterator[harness.Cluster]:
    """A second devcluster with the in-tree DRA controllers on (differential tests only)."""
    if cluster.backend != "devcluster":
        pytest.skip(f"differential tests need the devcluster backend, not {cluster.backend}")
    config = request.config
    handle = backends.start_devcluster(
        config, upstream=True, binding_timeout=config.getoption("--e2e-binding-timeout")
    )
    yield handle
    backends.stop_devcluster(config, handle, request.session.testsfailed > 0)


@pytest.fixture(scope="module")
def deployed_cluster(request: pytest.FixtureRequest, cluster: harness.Cluster) -> Iterator[harness.Cluster]:
    """A third devcluster, for the product installed as users install it (e2e/product/test_deployed.py):
    no operator of this one runs on the host, and its node pulls the operator image from its
    registry (``harness.Cluster.published``). Module-scoped: its kube-proxy's iptables rules
    are the machine's, and other tests compare the machine's rules before and after."""
    yield from backends.deployed_devcluster(request, cluster, upstream=False)


@pytest.fixture(scope="module")
def managed_cluster(request: pytest.FixtureRequest, cluster: harness.Cluster) -> Iterator[harness.Cluster]:
    """The same kind of cluster in upstream mode, kube-controller-manager's DRA controllers on,
    as on a managed cluster: for the managed profile (e2e/product/test_managed.py)."""
    yield from backends.deployed_devcluster(request, cluster, upstream=True)


@pytest.fixture(scope="module")
def registry_cluster(request: pytest.FixtureRequest, cluster: harness.Cluster) -> Iterator[harness.Cluster]:
    """A deployed-kind cluster with nothing pushed to its node's registry: the registry tier
    publishes a release there itself, both architectures (e2e/product/test_registry.py)."""
    yield from backends.deployed_devcluster(request, cluster, upstream=False, publish=False)


@pytest.fixture(scope="session")
def api(cluster: harness.Cluster) -> Iterator[Kube]:
    client = Kube(cluster.kubeconfig)
    yield client
    client.close()


@pytest.fixture(scope="session")
def upstream_api(upstream_cluster: harness.Cluster) -> Iterator[Kube]:
    client = Kube(upstream_cluster.kubeconfig)
    yield client
    client.close()


# -- the real node ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def node(cluster: harness.Cluster) -> realnode.NodeLayout:
    """The devcluster's real node (kubelet, containerd, the test driver), for pods that really run."""
    if cluster.state is None or cluster.state.node is None:
        pytest.skip("the cluster has no real node (NODE=fake)")
    return cluster.state.node_layout


@pytest.fixture(scope="module")
def node_gpu_class(api: Kube, node: realnode.NodeLayout) -> Iterator[str]:
    """The DeviceClass of the test driver's GPUs on the main cluster's real node (the product
    tests' ``gpu_class`` is the one of the cluster they install)."""
    yield create_gpu_class(api)
    api.delete(f"{RESOURCE}/deviceclasses/{DEVICE_CLASS}")


# -- names and namespaces -------------------------------------------------------------------------


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    stem = node_hash(request)
    counter = iter(range(10**6))

    def make(prefix: str = "x") -> str:
        return f"{prefix}-{stem}-{next(counter)}"[:63].rstrip("-")

    return make


@pytest.fixture
def driver_name(request: pytest.FixtureRequest) -> str:
    return f"{node_hash(request)}.e2e.dra-operators.test"


@pytest.fixture
def namespace(api: Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from namespace_of_test(api, request)


@pytest.fixture
def upstream_namespace(upstream_api: Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from namespace_of_test(upstream_api, request)


# -- cluster-scoped object factories ------------------------------------------------------------


@pytest.fixture
def objects(api: Kube) -> Iterator[Tracker]:
    with Tracker(api) as tracker:
        yield tracker


@pytest.fixture
def upstream_objects(upstream_api: Kube) -> Iterator[Tracker]:
    with Tracker(upstream_api) as tracker:
        yield tracker


@pytest.fixture
def fake_node(objects: Tracker) -> Callable[..., dict[str, Any]]:
    return objects.node


@pytest.fixture
def resource_slice(objects: Tracker) -> Callable[..., dict[str, Any]]:
    return objects.resource_slice


@pytest.fixture
def device_class(objects: Tracker) -> Callable[..., dict[str, Any]]:
    return objects.device_class


# -- operators ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def operator_identity(cluster: harness.Cluster, api: Kube) -> Callable[[str], str]:
    """A restricted kubeconfig per operator: its ServiceAccount from manifests/, with a fresh token."""
    applied: dict[str, tuple[str, str]] = {}

    def kubeconfig_for(operator: str) -> str:
        if operator not in applied:
            objects = harness.rbac_objects(cluster)
            harness.apply_rbac(cluster, objects)
            applied[operator] = harness.service_account_of(objects, operator)
        ns, sa = applied[operator]
        return harness.token_kubeconfig(cluster, api, ns, sa)

    return kubeconfig_for


@pytest.fixture
def operator(cluster: harness.Cluster, operator_identity: Callable[[str], str]) -> Callable[..., Any]:
    """``with operator("resourceclaim", mode=..., identity=...) as op:`` runs one operator."""

    @contextlib.contextmanager
    def run(
        name: str, mode: str = "subprocess", identity: str = "restricted", extra_args: tuple[str, ...] = ()
    ) -> Iterator[harness.RunningOperator]:
        kubeconfig = cluster.kubeconfig if identity == "admin" else operator_identity(name)
        with harness.operator_running(name, kubeconfig, cluster.workdir, mode, extra_args) as op:
            yield op

    return run
