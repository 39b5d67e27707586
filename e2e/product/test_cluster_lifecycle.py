"""The devcluster's own command line: idempotent up, clean down, clear errors (issue: foundation)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import launcher
from devcluster.cluster import ensure_devcluster
from devcluster.constants import REPO_ROOT
from devcluster.kube import Kube, wait_for
from e2e import harness
from e2e.support import cleanup_namespace, device_class_body, make_namespace

pytestmark = [pytest.mark.devcluster_only, pytest.mark.timeout(150)]


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "devcluster", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        # The real node has its own test (test_realnode); these check the control plane.
        env={**os.environ, "NODE": "fake", **(env or {})},
        check=False,
    )


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "cluster"
    yield directory
    cli("down", "--dir", str(directory))


def _pids(directory: Path) -> dict[str, int]:
    doc = json.loads((directory / "state.json").read_text())
    return {name: comp["pid"] for name, comp in doc["components"].items()}


def test_up_twice_is_idempotent_and_down_leaves_nothing(state_dir: Path) -> None:
    first = cli("up", "--dir", str(state_dir))
    assert first.returncode == 0, first.stderr
    assert "ready at https://127.0.0.1:" in first.stdout
    pids = _pids(state_dir)
    second = cli("up", "--dir", str(state_dir))
    assert second.returncode == 0, second.stderr
    assert "already running (v1.37.2 lab, default mode)" in second.stdout
    assert _pids(state_dir) == pids, "a second up must not restart anything"

    other_mode = cli("up", "--dir", str(state_dir), "--upstream-dra")
    assert other_mode.returncode == 1
    assert "make cluster-down" in other_mode.stderr

    status = cli("status", "--dir", str(state_dir), "--json")
    assert status.returncode == 0
    doc = json.loads(status.stdout)
    assert doc["k8s_version"] == "v1.37.2"
    assert all(c["alive"] and c["ready"] for c in doc["components"].values())

    down = cli("down", "--dir", str(state_dir))
    assert down.returncode == 0
    assert down.stdout.strip() == "stopped"
    for name, pid in pids.items():
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text(), name
    assert (state_dir / "logs" / "kube-apiserver.log").is_file(), "logs survive down"
    again = cli("down", "--dir", str(state_dir))
    assert again.returncode == 0
    assert again.stdout.strip() == "not running"
    assert cli("status", "--dir", str(state_dir)).returncode == 3


def test_missing_binaries_are_named(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    result = cli("build", env={"DEVCLUSTER_BIN_DIR": str(empty)})
    assert result.returncode == 1
    assert f"DEVCLUSTER_BIN_DIR={empty} lacks etcd, kube-apiserver" in result.stderr


def test_missing_go_is_explained(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    result = cli("build", env={"PATH": "/usr/bin:/bin", "DEVCLUSTER_CACHE_DIR": str(cache)})
    assert result.returncode == 1
    assert "Go toolchain not found" in result.stderr
    assert "make test-unit" in result.stderr


def test_taken_port_is_retried(
    cluster: harness.Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A port another process holds makes the component fail; up picks new ports and succeeds."""
    assert cluster.state is not None
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    ports = iter([taken])
    real_free_port = launcher.free_port
    monkeypatch.setattr(launcher, "free_port", lambda: next(ports, None) or real_free_port())
    messages: list[str] = []
    directory = tmp_path / "cluster"
    try:
        started = ensure_devcluster(directory, die_with_parent=True, say=messages.append)
        assert not started.existing
        assert started.state.components["etcd"].port != taken
        assert any("port collision" in m for m in messages), messages
    finally:
        squatter.close()
        launcher.down(directory)


@pytest.mark.differential
def test_upstream_mode_generates_claims(upstream_api: Kube, request: pytest.FixtureRequest) -> None:
    """S6, differential variant: with UPSTREAM_DRA the in-tree controller makes the claim, the pod
    is bound, and force-deleting the pod removes the claim."""
    from e2e.product.test_smoke import _template_pod

    namespace = make_namespace(upstream_api, request)
    driver = f"upstream.{namespace}.e2e.dra-operators.test"
    node = f"node-{namespace}"
    from devcluster import nodes

    nodes.create_fake_node(upstream_api, node)
    cls_name = f"class-{namespace}"
    upstream_api.create("/apis/resource.k8s.io/v1/deviceclasses", device_class_body(cls_name, driver))
    upstream_api.create(
        "/apis/resource.k8s.io/v1/resourceslices", nodes.slice_body(node, driver, nodes.make_devices(1))
    )
    try:
        _template_pod(upstream_api, namespace, cls_name)
        claims_path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
        claims: list[dict[str, Any]] = wait_for(
            lambda: upstream_api.list(claims_path), 30, "the generated claim"
        )
        assert claims[0]["metadata"]["generateName"] == "tmpl-pod-dev-"
        wait_for(
            lambda: upstream_api.get(f"/api/v1/namespaces/{namespace}/pods/tmpl-pod")["spec"].get("nodeName"),
            30,
            "the pod to be bound",
        )
        upstream_api.delete(f"/api/v1/namespaces/{namespace}/pods/tmpl-pod", gracePeriodSeconds="0")
        wait_for(lambda: not upstream_api.list(claims_path), 30, "the generated claim to be deleted")
    finally:
        cleanup_namespace(upstream_api, namespace)
        upstream_api.delete(f"/apis/resource.k8s.io/v1/deviceclasses/{cls_name}")
        nodes.delete_fake_node(upstream_api, node)
