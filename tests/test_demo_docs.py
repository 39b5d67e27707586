"""The demo folders without a cluster: the READMEs show exactly the commands the scenarios run
(and so the e2e tests), every manifest is used, and the fake driver and the clean-up read them
as intended."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from demo import cleanup, fakedriver, transcripts
from demo.player import Played, transcript
from demo.scenarios import DEMO_DIR, SCENARIOS, Scenario, Step

NAMES = sorted(SCENARIOS)


def test_every_folder_is_a_scenario() -> None:
    folders = sorted(p.name for p in DEMO_DIR.iterdir() if p.is_dir() and not p.name.startswith("__"))
    assert folders == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_readme_shows_the_scenario_commands(name: str) -> None:
    scenario = SCENARIOS[name]
    recorded = transcripts.read(scenario.folder / "README.md")
    assert transcripts.commands(recorded) == scenario.commands, (
        f"demo/{name}/README.md is out of date: run `python -m demo --record {name}`"
    )


@pytest.mark.parametrize("name", NAMES)
def test_manifests_are_numbered_used_and_in_the_namespace(name: str) -> None:
    scenario = SCENARIOS[name]
    files = sorted(p.name for p in scenario.folder.glob("*.yaml"))
    assert [int(f.split("-", 1)[0]) for f in files] == list(range(1, len(files) + 1)), files
    assert files[0] == "1-driver.yaml"
    commands = " ".join(scenario.commands)
    assert f"python -m demo.fakedriver apply demo/{name}" in commands
    for file in files[1:]:
        assert f"demo/{name}/{file}" in commands, f"{file} is never applied"
        for doc in yaml.safe_load_all((scenario.folder / file).read_text()):
            if doc["kind"] == "Namespace":
                assert doc["metadata"]["name"] == scenario.namespace
            elif "namespace" in doc["metadata"]:
                assert doc["metadata"]["namespace"] == scenario.namespace
    assert scenario.operators


def test_scenarios_do_not_share_names() -> None:
    """They may run one after the other on one cluster, and their clean-ups must not collide."""
    seen: dict[tuple[str, str], str] = {}
    for scenario in SCENARIOS.values():
        docs = [d for p in scenario.folder.glob("*.yaml") for d in yaml.safe_load_all(p.read_text()) if d]
        drivers = {d["spec"]["driver"] for d in docs if d["kind"] == "ResourceSlice"}
        keys = {(d["kind"], d["metadata"]["name"]) for d in docs if "namespace" not in d["metadata"]}
        keys |= {("driver", driver) for driver in drivers}
        for key in keys:
            assert key not in seen, f"{key} is in {seen.get(key)} and {scenario.name}"
            seen[key] = scenario.name


def test_cluster_objects_are_found_in_the_manifests() -> None:
    assert cleanup.cluster_objects(SCENARIOS["noexecute-eviction"].folder) == [
        "/apis/resource.k8s.io/v1/devicetaintrules/gpu-maintenance"
    ]
    assert cleanup.cluster_objects(SCENARIOS["gpu-pool-status"].folder) == [
        "/apis/dra-operators.io/v1alpha1/resourcepoolstatusrequests/partitioned-gpus"
    ]
    assert cleanup.cluster_objects(SCENARIOS["binding-conditions"].folder) == [
        "/apis/dra-operators.io/v1alpha1/deviceattachpolicies/fabric-gpus"
    ]
    assert cleanup.cluster_objects(SCENARIOS["claims-from-templates"].folder) == []


class FakeApi:
    def __init__(self, existing: set[str] | None = None) -> None:
        self.existing = set(existing or ())
        self.calls: list[tuple[str, str]] = []

    def get_or_none(self, path: str) -> Any:
        return {} if path in self.existing else None

    def create(self, path: str, body: Any) -> Any:
        self.calls.append(("create", f"{path}/{body['metadata']['name']}"))
        return body

    def apply(self, path: str, body: Any, field_manager: str = "") -> Any:
        assert field_manager == fakedriver.FIELD_MANAGER
        self.calls.append(("apply", path))
        return body

    def delete(self, path: str, uid: str | None = None, missing_ok: bool = True, **params: str) -> Any:
        self.calls.append(("delete", path))
        return {} if path in self.existing else None


def test_fake_driver_creates_nodes_with_status_and_applies_the_rest() -> None:
    docs = fakedriver.load(fakedriver.driver_file(SCENARIOS["binding-conditions"].folder))
    api = FakeApi(existing={"/api/v1/nodes/fabric-node-b"})
    said: list[str] = []
    fakedriver.apply(api, docs, said.append)
    assert said == [
        "node/fabric-node-a created",
        "node/fabric-node-b unchanged",
        "resourceslice.resource.k8s.io/fabric-gpus serverside-applied",
        "deviceclass.resource.k8s.io/fabric-gpu serverside-applied",
    ]
    said.clear()
    api = FakeApi(
        existing={"/api/v1/nodes/fabric-node-a", "/apis/resource.k8s.io/v1/resourceslices/fabric-gpus"}
    )
    fakedriver.delete(api, docs, said.append)
    assert [c[1].rsplit("/", 1)[1] for c in api.calls] == [
        "fabric-gpu",
        "fabric-gpus",
        "fabric-node-a",
        "fabric-node-b",
    ]
    assert said == ['resourceslice.resource.k8s.io "fabric-gpus" deleted', 'node "fabric-node-a" deleted']


def test_fake_nodes_get_kubelet_times() -> None:
    (node,) = [
        d for d in fakedriver.load(SCENARIOS["dry-run"].folder / "1-driver.yaml") if d["kind"] == "Node"
    ]
    stamped = fakedriver.node_with_times(node, datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    (ready,) = stamped["status"]["conditions"]
    assert (ready["type"], ready["status"]) == ("Ready", "True")
    assert ready["lastHeartbeatTime"] == ready["lastTransitionTime"] == "2026-01-02T03:04:05Z"
    assert stamped["status"]["capacity"]["pods"] == "110"
    assert "lastHeartbeatTime" not in node["status"]["conditions"][0]


def test_fake_driver_refuses_other_kinds(tmp_path: Any) -> None:
    bad = tmp_path / "1-driver.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    with pytest.raises(fakedriver.DriverFileError, match="only Node, ResourceSlice, DeviceClass"):
        fakedriver.load(fakedriver.driver_file(tmp_path))
    with pytest.raises(fakedriver.DriverFileError, match="no such folder"):
        fakedriver.driver_file(tmp_path / "missing")


def test_transcript_format_and_rewrite(tmp_path: Any) -> None:
    scenario = Scenario(
        "x", "X", ("poolstatus",), "ns", (Step("Say.", "kubectl get a"), Step("", "kubectl b"))
    )
    text = transcript([Played(scenario.steps[0], "out\n"), Played(scenario.steps[1], "")])
    assert text == "# Say.\n$ kubectl get a\nout\n\n$ kubectl b\n"
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n\n{transcripts.BEGIN}\n```console\nold\n```\n{transcripts.END}\n\nmore\n")
    transcripts.write(readme, text)
    assert transcripts.read(readme) == text
    assert readme.read_text().startswith("intro\n")
    assert readme.read_text().endswith("\n\nmore\n")
    assert transcripts.commands(transcripts.read(readme)) == scenario.commands
