"""``kubectl dra`` installed on its own (issue #42): the kubectl-dra wheel in a new virtualenv from
PyPI, without kopf, found by kubectl on ``$PATH`` as a user finds it, asking the real control plane
with the poolstatus operator running under its ServiceAccount."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devcluster import dist
from e2e import harness
from e2e.poolstatus.support import SLICES, install_crd, plain_devices, slice_body
from e2e.support import Tracker

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def plugin_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = dist.build_plugin(tmp_path_factory.mktemp("dist"), say=lambda _: None)
    wheel = next(p for p in built if p.suffix == ".whl")
    bin_dir = dist.clean_venv(tmp_path_factory.mktemp("plugin-venv"), wheel)
    no_kopf = "import importlib.util, sys; sys.exit(importlib.util.find_spec('kopf') is not None)"
    assert subprocess.run([bin_dir / "python", "-c", no_kopf], check=False, timeout=60).returncode == 0
    return bin_dir


def kubectl_dra(cluster: harness.Cluster, bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``kubectl dra ...``: kubectl runs the first ``kubectl-dra`` on PATH, the clean virtualenv's."""
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "KUBECONFIG": cluster.kubeconfig,
    }
    return subprocess.run(
        [cluster.kubectl_path, "dra", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_plugin_alone_answers_help_and_pools(
    cluster: harness.Cluster,
    plugin_bin: Path,
    objects: Tracker,
    operator: Callable[..., Any],
    unique_name: Callable[[str], str],
    driver_name: str,
) -> None:
    helped = kubectl_dra(cluster, plugin_bin, "--help")
    assert helped.returncode == 0, helped.stderr
    assert "usage: kubectl dra" in helped.stdout

    install_crd(cluster)
    pool = unique_name("pool")
    objects.create(SLICES, slice_body(unique_name("slice"), driver_name, pool, plain_devices(3)))
    with operator("poolstatus"):
        table = kubectl_dra(cluster, plugin_bin, "pools", "--driver", driver_name)
        assert table.returncode == 0, table.stderr
        assert f"Pool {driver_name}/{pool} " in table.stdout, table.stdout
        document = kubectl_dra(cluster, plugin_bin, "pools", "--driver", driver_name, "-o", "json")
    assert document.returncode == 0, document.stderr
    answer = json.loads(document.stdout)
    assert answer["apiVersion"] == "dra-operators.io/v1alpha1"
    (listed,) = answer["pools"]
    assert (listed["driver"], listed["poolName"]) == (driver_name, pool)
    assert (listed["totalDevices"], listed["allocatedDevices"], listed["availableDevices"]) == (3, 0, 3)
