"""Fixtures of the e2e tier (see the devcluster spec, section 7)."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import string
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import harness
from e2e.cluster import build as build_mod
from e2e.cluster import launcher, nodes
from e2e.cluster.constants import DELETE_PROTECTION_FINALIZER, E2E_NAMESPACE_LABEL, REPO_ROOT
from e2e.cluster.devcluster import ensure_devcluster
from e2e.kube import ApiError, Kube, wait_for

DEFAULT_BINDING_TIMEOUT = "30s"
ARTIFACTS = REPO_ROOT / "test-artifacts"


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
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "coexistence-guard.json").write_text(json.dumps(summary, indent=2) + "\n")
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
    group.addoption("--e2e-kind-image", default="kindest/node:v1.37.2")
    group.addoption(
        "--e2e-node",
        default=os.environ.get("NODE") or "real",
        choices=["real", "fake"],
        help="real: the default-mode devcluster has one real node (kubelet, containerd, test driver)",
    )
    group.addoption("--e2e-keep-cluster", action="store_true", help="leave the cluster running at the end")
    group.addoption("--e2e-no-build", action="store_true", help="missing binaries are an error, not a build")
    group.addoption("--e2e-binding-timeout", default=DEFAULT_BINDING_TIMEOUT)
    group.addoption("--e2e-allow-nonlocal", action="store_true")
    group.addoption(
        "--e2e-upstream-dra",
        action="store_true",
        help="the existing cluster runs the in-tree DRA controllers",
    )


# -- clusters -----------------------------------------------------------------------------------


def _devcluster(
    config: pytest.Config, upstream: bool, binding_timeout: str | None, deployed: bool = False
) -> harness.Cluster:
    """``deployed``: the cluster the product is installed into from manifests/, with an untainted
    real node whose pods reach the API server and Services."""
    if config.getoption("--e2e-no-build"):
        os.environ.setdefault("DEVCLUSTER_BUILD_TIMEOUT", "1")
    directory = Path(tempfile.mkdtemp(prefix="dra-devcluster-"))
    # One real node, in the default-mode cluster only: the differential tests compare
    # controllers on fake nodes. It is tainted, so only the tests meant for it land there.
    real_node = deployed or (not upstream and config.getoption("--e2e-node") == "real")
    started = ensure_devcluster(
        directory,
        upstream_dra=upstream,
        real_node=real_node,
        taint_node=not deployed,
        services=deployed,
        binding_timeout=binding_timeout,
        die_with_parent=True,
    )
    if not config.getoption("--e2e-keep-cluster"):
        atexit.register(launcher.down, directory)
    return harness.Cluster.of_devcluster(started)


def _stop_devcluster(config: pytest.Config, cluster: harness.Cluster, failed: bool) -> None:
    if cluster.state is None:
        return
    if failed:
        ARTIFACTS.mkdir(exist_ok=True)
        target = ARTIFACTS / f"logs-{cluster.mode}"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(Path(cluster.state.dir) / "logs", target)
        for log in cluster.workdir.glob("operator-*.log"):
            shutil.copy(log, ARTIFACTS)
    if not config.getoption("--e2e-keep-cluster"):
        launcher.down(Path(cluster.state.dir))


def _existing(config: pytest.Config, kubeconfig: str) -> harness.Cluster:
    import yaml

    doc = yaml.safe_load(Path(kubeconfig).read_text())
    server = doc["clusters"][0]["cluster"]["server"]
    if not config.getoption("--e2e-allow-nonlocal") and not re.match(
        r"https?://(127\.|localhost|\[::1\])", server
    ):
        raise pytest.UsageError(f"{server} is not a loopback address; pass --e2e-allow-nonlocal to use it")
    kubectl = shutil.which("kubectl") or "kubectl"
    with_state = Path(kubeconfig).parent / "state.json"
    mode = "upstream-dra" if config.getoption("--e2e-upstream-dra") else "default"
    state = None
    if with_state.is_file():
        state = launcher.ClusterState.load(with_state.parent)
        if state is not None:
            mode = state.mode
            kubectl = str(Path(state.binary_dir) / "kubectl")
    cluster = harness.Cluster(
        kubeconfig=kubeconfig,
        server=server,
        mode=mode,
        backend="existing",
        kubectl_path=kubectl,
        state=state,
        binding_timeout=state.binding_timeout if state else None,
    )
    version = cluster.kubectl("version", "-o", "json").stdout
    if '"minor": "37"' not in version:
        raise pytest.UsageError(f"the cluster at {server} is not Kubernetes 1.37")
    return cluster


def _kind(config: pytest.Config) -> harness.Cluster:
    if shutil.which("docker") is None:
        raise RuntimeError("--e2e-cluster=kind needs Docker; none found")
    try:
        from pytest_kind import KindCluster
    except ImportError as err:
        raise RuntimeError("--e2e-cluster=kind needs pytest-kind (pip install -e '.[kind]')") from err
    from e2e.cluster.kind import kind_config

    binaries = build_mod.build(log=lambda text: print(text))
    kind = KindCluster(
        "dra-operators-e2e",
        image=config.getoption("--e2e-kind-image"),
        kubectl_path=binaries.directory / "kubectl",
    )
    config_path = Path(tempfile.mkdtemp()) / "kind.yaml"
    config_path.write_text(kind_config())
    kind.create(config_path)
    if not config.getoption("--e2e-keep-cluster"):
        atexit.register(kind.delete)
    return harness.Cluster(
        kubeconfig=str(kind.kubeconfig_path),
        server="",
        mode="default",
        backend="kind",
        kubectl_path=str(binaries.directory / "kubectl"),
    )


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[harness.Cluster]:
    config = request.config
    kubeconfig = config.getoption("--kubeconfig") or os.environ.get("E2E_KUBECONFIG")
    if kubeconfig:
        yield _existing(config, kubeconfig)
        return
    if config.getoption("--e2e-cluster") == "kind":
        yield _kind(config)
        return
    handle = _devcluster(config, upstream=False, binding_timeout=config.getoption("--e2e-binding-timeout"))
    yield handle
    _stop_devcluster(config, handle, request.session.testsfailed > 0)


@pytest.fixture(scope="session")
def upstream_cluster(request: pytest.FixtureRequest, cluster: harness.Cluster) -> Iterator[harness.Cluster]:
    """A second devcluster with the in-tree DRA controllers on (differential tests only)."""
    if cluster.backend != "devcluster":
        pytest.skip(f"differential tests need the devcluster backend, not {cluster.backend}")
    config = request.config
    handle = _devcluster(config, upstream=True, binding_timeout=config.getoption("--e2e-binding-timeout"))
    yield handle
    _stop_devcluster(config, handle, request.session.testsfailed > 0)


def _deployed_devcluster(
    request: pytest.FixtureRequest, cluster: harness.Cluster, upstream: bool
) -> Iterator[harness.Cluster]:
    if cluster.backend != "devcluster" or request.config.getoption("--e2e-node") != "real":
        pytest.skip("installing the product needs the devcluster backend with its real node")
    config = request.config
    handle = _devcluster(config, upstream=upstream, binding_timeout=None, deployed=True)
    yield handle
    _stop_devcluster(config, handle, request.session.testsfailed > 0)


@pytest.fixture(scope="module")
def deployed_cluster(request: pytest.FixtureRequest, cluster: harness.Cluster) -> Iterator[harness.Cluster]:
    """A third devcluster, for the product installed as users install it (e2e/test_deployed.py):
    no operator of this one runs on the host. Module-scoped: its kube-proxy's iptables rules
    are the machine's, and other tests compare the machine's rules before and after."""
    yield from _deployed_devcluster(request, cluster, upstream=False)


@pytest.fixture(scope="module")
def managed_cluster(request: pytest.FixtureRequest, cluster: harness.Cluster) -> Iterator[harness.Cluster]:
    """The same kind of cluster in upstream mode, kube-controller-manager's DRA controllers on,
    as on a managed cluster: for the managed profile (e2e/test_managed.py)."""
    yield from _deployed_devcluster(request, cluster, upstream=True)


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


# -- names and namespaces -------------------------------------------------------------------------


def _test_hash(request: pytest.FixtureRequest) -> str:
    return hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:8]


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    stem = _test_hash(request)
    counter = iter(range(10**6))

    def make(prefix: str = "x") -> str:
        return f"{prefix}-{stem}-{next(counter)}"[:63].rstrip("-")

    return make


@pytest.fixture
def driver_name(request: pytest.FixtureRequest) -> str:
    return f"{_test_hash(request)}.e2e.dra-operators.test"


def make_namespace(api: Kube, request: pytest.FixtureRequest, labels: dict[str, str] | None = None) -> str:
    suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=4))
    name = f"e2e-{_test_hash(request)}-{suffix}"
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


@pytest.fixture
def namespace(api: Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    name = make_namespace(api, request)
    yield name
    cleanup_namespace(api, name)


# -- cluster-scoped object factories ------------------------------------------------------------


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

    def device_class(
        self, name: str, driver: str, extra_selectors: list[str] | None = None
    ) -> dict[str, Any]:
        selectors = [{"cel": {"expression": f'device.driver == "{driver}"'}}]
        selectors += [{"cel": {"expression": e}} for e in extra_selectors or []]
        return self.create(
            "/apis/resource.k8s.io/v1/deviceclasses",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"selectors": selectors},
            },
        )

    def cleanup(self) -> None:
        for path in reversed(self.paths):
            self.api.delete(path)
        for name in reversed(self.nodes):
            nodes.delete_fake_node(self.api, name)


@pytest.fixture
def objects(api: Kube) -> Iterator[Tracker]:
    tracker = Tracker(api)
    yield tracker
    tracker.cleanup()


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
