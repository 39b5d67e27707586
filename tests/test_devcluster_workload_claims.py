"""The devcluster's workload claims option: its gates reach every component and the PodGroup API
is served only with it, and a running cluster started without it is not reused with it (nor the
other way round). No process is started here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from devcluster_builders import LaunchRecorder

from devcluster import launcher, realnode
from devcluster.constants import (
    FEATURE_GATES,
    FEATURE_GATES_FLAG,
    RUNTIME_CONFIG,
    RUNTIME_CONFIG_FLAG,
    feature_gates,
    feature_gates_flag,
    runtime_config,
    runtime_config_flag,
)
from devcluster.kind import kind_config

WORKLOAD_GATES = {"DRAWorkloadResourceClaims": True, "GenericWorkload": True}
PODGROUP_API = "scheduling.k8s.io/v1beta1"


def _flag(args: list[str], name: str) -> str:
    values = [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]
    assert len(values) == 1, (name, args)
    return values[0]


def test_the_default_gates_and_runtime_config_are_unchanged() -> None:
    assert feature_gates() == FEATURE_GATES
    assert feature_gates_flag() == FEATURE_GATES_FLAG
    assert runtime_config() == RUNTIME_CONFIG
    assert runtime_config_flag() == RUNTIME_CONFIG_FLAG
    assert not set(WORKLOAD_GATES) & set(FEATURE_GATES)
    assert "GenericWorkload" not in FEATURE_GATES_FLAG
    assert "scheduling.k8s.io" not in RUNTIME_CONFIG_FLAG


def test_the_option_adds_both_gates_and_the_podgroup_api() -> None:
    assert feature_gates(workload_claims=True) == {**FEATURE_GATES, **WORKLOAD_GATES}
    gates = feature_gates_flag(workload_claims=True).split(",")
    assert gates[: len(FEATURE_GATES)] == FEATURE_GATES_FLAG.split(",")
    assert {"DRAWorkloadResourceClaims=true", "GenericWorkload=true"} <= set(gates)
    assert runtime_config(workload_claims=True) == {**RUNTIME_CONFIG, PODGROUP_API: "true"}
    assert runtime_config_flag(workload_claims=True) == f"{RUNTIME_CONFIG_FLAG},{PODGROUP_API}=true"


def _up_options(directory: Path, binary_dir: Path, *, workload_claims: bool) -> launcher.UpOptions:
    """The options of ``make cluster`` at v1.37.2 (etcd 3.7.0) with or without workload claims."""
    return launcher.UpOptions(
        directory=directory,
        binary_dir=binary_dir,
        k8s_version="v1.37.2",
        etcd_version="3.7.0",
        workload_claims=workload_claims,
    )


def _launch(tmp_path: Path, workload_claims: bool) -> tuple[LaunchRecorder, launcher.ClusterState]:
    options = _up_options(tmp_path / "cluster", tmp_path / "bin", workload_claims=workload_claims)
    recorder = LaunchRecorder(options)
    return recorder, recorder._up_once()


@pytest.mark.parametrize("workload_claims", [False, True])
def test_every_control_plane_component_gets_the_gates(tmp_path: Path, workload_claims: bool) -> None:
    recorder, state = _launch(tmp_path, workload_claims)
    gates = feature_gates_flag(workload_claims)
    for name in ("kube-apiserver", "kube-scheduler", "kube-controller-manager"):
        assert _flag(recorder.spawned[name], "feature-gates") == gates, name
    assert _flag(recorder.spawned["kube-apiserver"], "runtime-config") == runtime_config_flag(workload_claims)
    assert (PODGROUP_API in _flag(recorder.spawned["kube-apiserver"], "runtime-config")) is workload_claims
    assert state.feature_gates == gates
    assert state.workload_claims is workload_claims
    assert launcher.ClusterState.load(Path(state.dir)) == state


@pytest.mark.parametrize("workload_claims", [False, True])
def test_the_kubelet_and_kind_get_the_same_gates(workload_claims: bool) -> None:
    layout = realnode.NodeLayout.of(Path("/tmp/wc"))
    kubelet = realnode.kubelet_config(layout, Path("/tmp/wc/ca.crt"), 10250, 10248, [], workload_claims)
    assert kubelet["featureGates"] == feature_gates(workload_claims)
    doc = yaml.safe_load(kind_config(workload_claims=workload_claims))
    assert doc["featureGates"] == feature_gates(workload_claims)
    assert doc["runtimeConfig"] == runtime_config(workload_claims)


def test_a_state_file_from_before_the_option_reads_as_without_it(tmp_path: Path) -> None:
    _, state = _launch(tmp_path, workload_claims=False)
    path = Path(state.dir) / "state.json"
    raw = json.loads(path.read_text())
    del raw["workload_claims"]
    path.write_text(json.dumps(raw))
    loaded = launcher.ClusterState.load(Path(state.dir))
    assert loaded is not None
    assert loaded.workload_claims is False


@pytest.mark.parametrize(("running", "wanted"), [(False, True), (True, False)])
def test_a_running_cluster_with_other_options_is_not_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, running: bool, wanted: bool
) -> None:
    _, state = _launch(tmp_path, workload_claims=running)
    doc: dict[str, Any] = {
        "mode": state.mode,
        "workload_claims": state.workload_claims,
        "k8s_version": state.k8s_version,
        "profile": state.profile,
    }
    monkeypatch.setattr(launcher, "status", lambda directory: (0, doc))
    options = _up_options(Path(state.dir), tmp_path / "bin", workload_claims=wanted)
    with pytest.raises(launcher.ClusterError, match="run make cluster-down first") as err:
        launcher.up(options, say=lambda _: None)
    assert ("default mode, workload claims" in str(err.value)) is running
    same = _up_options(Path(state.dir), tmp_path / "bin", workload_claims=running)
    assert launcher.up(same, say=lambda _: None) == (state, True)
