"""The e2e tier's cluster backends, chosen once per run by the ``cluster`` fixture: a private
devcluster (the default), an existing cluster (``--kubeconfig``), or kind (``--e2e-cluster=kind``);
and the further private devclusters of the differential, deployed and managed tests.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster import build as build_mod
from devcluster import images, launcher, release
from devcluster.cluster import ensure_devcluster
from e2e import harness
from e2e.support import ARTIFACTS
from operators.core import serverversion


def start_devcluster(
    config: pytest.Config, upstream: bool, binding_timeout: str | None, deployed: bool = False
) -> harness.Cluster:
    """``deployed``: the cluster the product is installed into from manifests/, with an untainted
    real node whose pods reach the API server and Services, and without the operator image: the
    node pulls it from its registry (``deployed_devcluster`` publishes it there)."""
    if config.getoption("--e2e-no-build"):
        os.environ.setdefault("DEVCLUSTER_BUILD_TIMEOUT", "1")
    directory = Path(tempfile.mkdtemp(prefix="dra-devcluster-"))
    # One real node, in the default-mode cluster only: the differential tests compare
    # controllers on fake nodes. It is tainted, so only the tests meant for it land there.
    real_node = deployed or (not upstream and config.getoption("--e2e-node") == "real")
    started = ensure_devcluster(
        directory,
        upstream_dra=upstream,
        workload_claims=config.getoption("--e2e-workload-claims"),
        k8s_version=config.getoption("--e2e-k8s-version"),
        profile=config.getoption("--e2e-profile"),
        real_node=real_node,
        taint_node=not deployed,
        services=deployed,
        binding_timeout=binding_timeout,
        import_operator=not deployed,
        die_with_parent=True,
    )
    if not config.getoption("--e2e-keep-cluster"):
        atexit.register(remove_devcluster, directory)
    return harness.Cluster.of_devcluster(started)


def remove_devcluster(directory: Path, *workdirs: Path) -> None:
    """Stop the cluster and remove its directory, logs included: a failed run has copied them to the
    artifacts, and every e2e run starts dozens of clusters that would otherwise pile up in the
    temporary directory."""
    launcher.down(directory)
    for path in (directory, *workdirs):
        shutil.rmtree(path, ignore_errors=True)


def stop_devcluster(config: pytest.Config, cluster: harness.Cluster, failed: bool) -> None:
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
        remove_devcluster(Path(cluster.state.dir), cluster.workdir)


def existing_cluster(config: pytest.Config, kubeconfig: str) -> harness.Cluster:
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
    version = json.loads(cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]["gitVersion"]
    refusal = serverversion.refusal({"gitVersion": version})
    if refusal:
        raise pytest.UsageError(f"the cluster at {server}: {refusal}")
    return cluster


def kind_cluster(config: pytest.Config) -> harness.Cluster:
    if shutil.which("docker") is None:
        raise RuntimeError("--e2e-cluster=kind needs Docker; none found")
    try:
        from pytest_kind import KindCluster
    except ImportError as err:
        raise RuntimeError("--e2e-cluster=kind needs pytest-kind (pip install -e '.[kind]')") from err
    from devcluster.kind import kind_config

    binaries = build_mod.build(log=lambda text: print(text))
    kind = KindCluster(
        "dra-operators-e2e",
        image=config.getoption("--e2e-kind-image")
        or f"kindest/node:{config.getoption('--e2e-k8s-version') or build_mod.NEWEST.version}",
        kubectl_path=binaries.directory / "kubectl",
    )
    config_path = Path(tempfile.mkdtemp()) / "kind.yaml"
    config_path.write_text(
        kind_config(
            workload_claims=config.getoption("--e2e-workload-claims"),
            k8s_version=config.getoption("--e2e-k8s-version"),
            profile=config.getoption("--e2e-profile"),
        )
    )
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


def deployed_devcluster(
    request: pytest.FixtureRequest, cluster: harness.Cluster, upstream: bool, publish: bool = True
) -> Iterator[harness.Cluster]:
    """A deployed-kind cluster; with ``publish``, the operator image and the chart pushed to its
    node's registry (``publish_operator``), for the tiers that install from there."""
    if cluster.backend != "devcluster" or request.config.getoption("--e2e-node") != "real":
        pytest.skip("installing the product needs the devcluster backend with its real node")
    config = request.config
    lane = config.getoption("--e2e-lane")
    if lane not in ("all", "kube-proxy"):
        # Another lane's kube-proxy may be running beside this one: they would rewrite each
        # other's chains.
        raise pytest.UsageError(
            f"{request.node.nodeid} starts a cluster with kube-proxy in the lane {lane}: mark it kube_proxy"
        )
    handle = start_devcluster(config, upstream=upstream, binding_timeout=None, deployed=True)
    try:
        if publish:
            handle.published = publish_operator(handle)
    except BaseException:
        stop_devcluster(config, handle, failed=True)
        raise
    yield handle
    stop_devcluster(config, handle, request.session.testsfailed > 0)


def publish_operator(cluster: harness.Cluster) -> release.Published:
    """The operator image built here and the chart, pushed to the cluster's node registry as
    ``make release-artifacts`` pushes a release, but for this machine's architecture only: the
    multi-architecture index costs minutes under qemu, and the registry tier covers it."""
    assert cluster.state is not None
    hub = cluster.state.node_registry
    assert hub is not None, "the real node started no registry"
    started = time.monotonic()
    chart = release.package_chart(cluster.workdir)
    published = release.publish(hub, images.ensure_operator().archive, chart)
    print(f"published {published.image} and {published.chart} in {time.monotonic() - started:.1f} s")
    return published
