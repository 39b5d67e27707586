"""The conformance tier's own logic: which specs run, how results are read and compared."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from e2e.conformance import build, results, run
from e2e.conformance.selection import CI, FULL, FULL_WORKLOAD_CLAIMS, TWO_NODES, reason_not_run

DRA = "[sig-node] [DRA]"
KUBELET = f"{DRA} kubelet [Feature:DynamicResourceAllocation]"
DEALLOCATE = f"{DRA} control plane must deallocate after use"
ROLLING = f"{KUBELET} rolling update [KubeletMinVersion:1.33]"
POOLS = f"{DRA} control plane [FeatureGate:DRAResourcePoolStatus] should filter by pool name [Alpha]"


def junit_case(name: str, status: str, inner: str) -> str:
    return f'  <testcase name="{name}" classname="Kubernetes e2e suite" status="{status}">{inner}</testcase>'


# As ginkgo writes them: the node type first, then the labels and the version constraints.
JUNIT = "\n".join(
    [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<testsuites><testsuite name="Kubernetes e2e suite">',
        junit_case("[SynchronizedBeforeSuite]", "passed", ""),
        junit_case(f"[It] {DEALLOCATE} [sig-node, DRA]", "passed", ""),
        junit_case(
            f"[It] {ROLLING} [sig-node, DRA, Feature:DynamicResourceAllocation, KubeletMinVersion:1.33]"
            " [kubelet: [&gt;=1.33]]",
            "failed",
            '<failure message="x">x</failure>',
        ),
        junit_case(f"[It] {POOLS} [sig-node, DRA]", "skipped", '<skipped message="2 ready nodes required"/>'),
        "</testsuite></testsuites>",
    ]
)


def test_a_junit_report_gives_each_spec_by_its_text(tmp_path: Path) -> None:
    report = tmp_path / "ours.xml"
    report.write_text(JUNIT)
    assert results.read_junit(report) == {DEALLOCATE: "passed", ROLLING: "failed", POOLS: "skipped"}
    assert results.read_junit(tmp_path / "missing.xml") == {}


def test_a_defect_is_a_spec_that_passes_in_tree_and_fails_or_is_missing_with_ours() -> None:
    upstream = {DEALLOCATE: "passed", ROLLING: "failed", POOLS: "passed"}
    table = results.Table(upstream, {DEALLOCATE: "failed", ROLLING: "failed"})
    assert set(table.regressions()) == {DEALLOCATE, POOLS}
    assert (
        results.Table(upstream, {DEALLOCATE: "passed", ROLLING: "passed", POOLS: "passed"}).regressions()
        == []
    )
    assert results.Table(upstream, {}).regressions() == [], "where ours did not run, nothing is compared"


def test_the_table_shows_both_results_and_the_counts() -> None:
    text = results.Table({DEALLOCATE: "passed"}, {DEALLOCATE: "passed"}).markdown(
        "v1.37.2", "ci", "2026-12-04", {"ours": 120.0}
    )
    assert f"| {DEALLOCATE} | passed | passed |" in text
    assert "ours: 1 passed, 0 failed, 0 skipped, 2 min" in text


def test_a_baseline_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    results.write_baseline(path, "v1.37.2", "full", {ROLLING: "failed", DEALLOCATE: "passed"}, "lab")
    assert results.read_baseline(path) == {DEALLOCATE: "passed", ROLLING: "failed"}


def test_the_selections_leave_out_what_cannot_run_and_the_podgroup_specs_but_the_second_pass() -> None:
    device_plugin = (
        f"{KUBELET} on single node supports extended resources together with ResourceClaim [Serial]"
    )
    podgroup = (
        f"{KUBELET} [FeatureGate:DRADeviceTaints] [FeatureGate:DRAWorkloadResourceClaims]"
        " [FeatureGate:GenericWorkload] [KubeletMinVersion:1.36]"
        " DeviceTaintRule evicts pod with PodGroup claim"
    )
    assert reason_not_run(device_plugin) is not None
    assert re.search(FULL.skip(), device_plugin)
    assert re.search(FULL.skip(), podgroup)
    assert not re.search(FULL.skip(), DEALLOCATE)
    assert not re.search(FULL_WORKLOAD_CLAIMS.skip(), podgroup)
    assert "DRAWorkloadResourceClaims" in FULL_WORKLOAD_CLAIMS.label_filter


def test_the_ci_subset_is_the_controllers_specs() -> None:
    chosen = [
        DEALLOCATE,
        f"{KUBELET} removes reservation from claim when pod is done",
        f"{KUBELET} [FeatureGate:DRADeviceTaints] DeviceTaintRule evicts pod"
        " [FeatureGate:DRADeviceTaintRules]",
        f"{DRA} CRUD Tests resource.k8s.io/v1 DeviceTaintRule [Conformance]",
    ]
    left = [f"{KUBELET} registers plugin", ROLLING]
    assert all(re.search(CI.focus, spec) for spec in chosen)
    assert not any(re.search(CI.focus, spec) for spec in left)
    assert CI.baseline_name == "full"


def test_the_two_nodes_selection_is_the_control_plane_specs_that_need_a_second_node() -> None:
    chosen = [
        POOLS,
        f"{DRA} control plane [FeatureGate:DRAResourcePoolStatus] should populate status for all"
        " matching pools",
        f"{DRA} control plane with node-local resources uses all resources",
        f"{DRA} control plane with different ResourceSlices keeps pod pending because of CEL runtime errors",
    ]
    left = [
        # One node serves these; a second would take the driver's kubelet plugin.
        f"{DRA} control plane [FeatureGate:DRAResourcePoolStatus] should reflect allocated devices after pod"
        " is scheduled",
        f"{KUBELET} on multiple nodes with node-local resources uses all resources",
        DEALLOCATE,
    ]
    assert all(re.search(TWO_NODES.focus, spec) for spec in chosen)
    assert not any(re.search(TWO_NODES.focus, spec) for spec in left)
    assert TWO_NODES.second_node
    # A second node would change which node each of the other selections' specs picks.
    assert not FULL.second_node
    assert not CI.second_node
    assert run.baseline_path("v1.37.2", "lab", TWO_NODES).name == "baseline-v1.37.2-two-nodes.json"


def test_passes_merge_to_the_result_where_a_spec_ran() -> None:
    first = {DEALLOCATE: "passed", POOLS: "skipped"}
    second = {DEALLOCATE: "skipped", POOLS: "passed", ROLLING: "failed"}
    assert results.merged(first, second) == {DEALLOCATE: "passed", POOLS: "passed", ROLLING: "failed"}


def _options(modes: tuple[str, ...], profile: str, version: str | None = None) -> run.Options:
    return run.Options(modes, CI, 4, Path("unused"), 10, False, False, version, profile)


def test_each_configuration_has_its_own_baseline_and_the_lab_keeps_its_old_name() -> None:
    assert run.baseline_path("v1.37.2", "lab", FULL).name == "baseline-v1.37.2-full.json"
    assert run.baseline_path("v1.35.4", "defaults", FULL).name == "baseline-v1.35.4-defaults-full.json"
    # The CI subset is compared with the full selection's in-tree results.
    assert run.baseline_path("v1.35.4", "defaults", CI).name == "baseline-v1.35.4-defaults-full.json"


def test_under_upstreams_defaults_the_specs_of_gates_that_are_off_are_left_out() -> None:
    assert _options(("ours",), "lab").label_filter == CI.label_filter
    assert _options(("ours",), "defaults").label_filter == f"({CI.label_filter}) && !Feature:OffByDefault"


def test_ours_alone_without_an_in_tree_baseline_fails_before_building_anything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_build(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the suite was built although the run cannot be judged")

    monkeypatch.setattr(build, "build", no_build)
    monkeypatch.setattr(run, "HERE", tmp_path)
    monkeypatch.setattr(run, "ARTIFACTS", tmp_path / "artifacts")
    monkeypatch.setattr(run, "REPO_ROOT", tmp_path)
    assert run.run(_options(("ours",), "defaults", "v1.36.3")) == 1
    assert "no in-tree baseline baseline-v1.36.3-defaults-full.json" in capsys.readouterr().out


def test_each_image_tag_the_suite_names_has_a_cache_entry_of_its_own() -> None:
    names = {
        build._cache_name(ref)
        for ref in (
            "registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
            "registry.k8s.io/e2e-test-images/busybox:1.37.0-1",
            "registry.k8s.io/sig-storage/hostpathplugin:v1.15.0",
            "registry.k8s.io/sig-storage/hostpathplugin:v1.16.1",
            "registry.k8s.io/sig-storage/hostpathplugin:v1.17.0",
        )
    }
    assert names == {
        "busybox-1.36.1-1",
        "busybox-1.37.0-1",
        "hostpathplugin-v1.15.0",
        "hostpathplugin-v1.16.1",
        "hostpathplugin-v1.17.0",
    }
