"""The product on the clusters users run: each supported Kubernetes version with upstream's default
settings (make test-e2e-versions, make test-matrix), installed as a self-managed cluster's
administrator installs it (``kubectl apply -k``, the image from the node's registry pinned by
digest, the in-tree DRA controllers off). The managed profile on the same version is
test_managed.py, which the version pass runs too.

What each version serves is the support matrix (e2e/product/matrix.py, the table of docs/install.md); the
first test holds the cluster to it, and the others assert what works where it is served and what
the user sees where it is not (needs_served, lacks_served).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from demo.player import Player
from devcluster import launcher, realnode
from devcluster.constants import REPO_ROOT, minor_of
from devcluster.kube import wait_for
from e2e import harness
from e2e.product import matrix, support
from e2e.product.support import (
    NAMESPACE,
    RESOURCE,
    Installed,
    allocated_device,
    generated_claim,
    operator_pods,
    pod_body,
    template,
)
from e2e.support import device_class_body, namespace_of_test, slice_body
from operators import OPERATOR_NAMES

pytestmark = [
    pytest.mark.devcluster_only,
    pytest.mark.versions,
    pytest.mark.versions_only,
    pytest.mark.kube_proxy,
    pytest.mark.timeout(600),
]

OVERLAY = REPO_ROOT / "e2e" / "deployed"
NEXT_OVERLAY = REPO_ROOT / "e2e" / "deployed-next"
# A driver of the test's own, whose ResourceSlice the test writes: the test driver's slices are
# the kubelet plugin's, and the test needs to taint one device of them.
DRIVER = "versions.dra-operators.test"
SLICES = f"{RESOURCE}/resourceslices"
CLASSES = f"{RESOURCE}/deviceclasses"
TAINT = {"key": "dra-operators.test/versions", "value": "broken", "effect": "NoExecute"}
UPGRADE_BURST = 200
# The demo stories each version can play, and what they need it to serve. The two pool-status
# stories are not among them: they publish partitionable devices with partition types and
# consumable capacity, which need gates of the lab profile (DRAPartitionableDevicesType) or of 1.36.
STORY_NEEDS: dict[str, tuple[str, ...]] = {
    "claims-from-templates": (),
    "noexecute-eviction": ("rule_version",),
    "dry-run": ("rule_version",),
    "binding-conditions": ("binding_conditions",),
}


@pytest.fixture(scope="module")
def installed(deployed_cluster: harness.Cluster) -> Iterator[Installed]:
    yield from support.installed_from_kustomize(deployed_cluster, OVERLAY, "versions.json")


@pytest.fixture(scope="module")
def served(installed: Installed) -> matrix.Served:
    state = installed.cluster.state
    assert state is not None
    return matrix.SERVED[(minor_of(state.k8s_version), state.profile)]


@pytest.fixture
def namespace(installed: Installed, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from namespace_of_test(installed.api, request)


def test_the_cluster_serves_what_the_support_matrix_says(
    installed: Installed, served: matrix.Served, unique_name: Callable[[str], str]
) -> None:
    api = installed.api
    assert harness.served_rule_version(api) == served.rule_version
    name = unique_name("kept")
    device = {
        "name": "d0",
        "taints": [{"key": TAINT["key"], "value": "x", "effect": "NoSchedule"}],
        "bindingConditions": ["dra-operators.test/ready"],
        "bindingFailureConditions": ["dra-operators.test/failed"],
    }
    api.create(SLICES, slice_body(name, DRIVER, name, [device], nodeName=realnode.NODE_NAME))
    try:
        (kept,) = api.get(f"{SLICES}/{name}")["spec"]["devices"]
        # The API server drops a field whose gate is off, silently: what the operators can act on.
        assert bool(kept.get("taints")) == served.slice_taints, kept
        assert bool(kept.get("bindingConditions")) == served.binding_conditions, kept
    finally:
        api.delete(f"{SLICES}/{name}")


def test_a_template_pod_runs_on_the_real_node_and_its_claim_goes_with_it(
    installed: Installed, namespace: str, gpu_class: str
) -> None:
    support.template_pod_runs_and_its_claim_goes_with_it(installed, namespace)


@pytest.mark.needs_served("slice_taints")
def test_a_noexecute_slice_taint_evicts_the_pod_that_uses_the_device(
    installed: Installed, namespace: str, unique_name: Callable[[str], str]
) -> None:
    api = installed.api
    name, klass = unique_name("tainted"), unique_name("versions")
    api.create(SLICES, slice_body(name, DRIVER, name, [{"name": "d0"}], nodeName=realnode.NODE_NAME))
    api.create(CLASSES, device_class_body(klass, DRIVER))
    try:
        pods = f"/api/v1/namespaces/{namespace}/pods"
        api.create(pods, pod_body("victim", template(api, namespace, klass=klass), "sleep 3600"))
        claim = generated_claim(api, namespace, "victim")
        assert allocated_device(api, namespace, claim["metadata"]["name"]) == "d0"
        current = api.get(f"{SLICES}/{name}")
        current["spec"]["devices"][0]["taints"] = [TAINT]
        api.replace(f"{SLICES}/{name}", current)
        wait_for(
            lambda: (
                api.get_or_none(f"{pods}/victim") is None
                or api.get(f"{pods}/victim")["metadata"].get("deletionTimestamp") is not None
            ),
            90,
            "devicetaint to evict the pod whose device is tainted NoExecute",
        )
    finally:
        api.delete(f"{CLASSES}/{klass}")
        api.delete(f"{SLICES}/{name}")


@pytest.mark.lacks_served("rule_version")
def test_tainting_says_which_api_the_cluster_lacks(installed: Installed) -> None:
    """taintselector and ``kubectl dra taint`` can do nothing without a DeviceTaintRule API, and say
    which gate and API version would bring it."""
    done = installed.kubectl_dra(
        "taint", f"driver={realnode.DRIVER_NAME},pool={realnode.NODE_NAME}", "--effect", "NoSchedule", "--yes"
    )
    assert done.returncode != 0, done.stdout
    assert "DeviceTaintRule" in done.stderr, done.stderr
    assert "DRADeviceTaintRules" in done.stderr, done.stderr
    pods = operator_pods(installed.api, ["taintselector"])
    log = installed.kubectl("logs", "-n", NAMESPACE, pods["taintselector"]["metadata"]["name"]).stdout
    assert "DeviceTaintRule" in log, log[-2000:]


def test_a_pool_status_request_on_the_project_crd_completes(
    installed: Installed, unique_name: Callable[[str], str]
) -> None:
    support.project_pool_status_completes(installed.api, unique_name("pools"))


@pytest.fixture(scope="module")
def demo_player(installed: Installed) -> Iterator[Player]:
    yield from support.demo_player(installed)


@pytest.mark.parametrize(
    "story",
    [pytest.param(story, marks=pytest.mark.needs_served(*needs)) for story, needs in STORY_NEEDS.items()],
)
def test_a_demo_story_this_version_serves(installed: Installed, demo_player: Player, story: str) -> None:
    """The README's demo as ``make demo`` plays it, against the operators installed on this version."""
    support.play_story(installed, demo_player, story)


def test_an_upgrade_in_the_middle_of_a_template_burst_loses_and_duplicates_nothing(
    installed: Installed, namespace: str
) -> None:
    """``kubectl apply -k`` of the image by another reference (the tag ``next``) while template
    pods arrive, and back to the digest: every Deployment rolls, and every pod ends with exactly
    one claim."""
    by_tag = support.tag_next(installed)

    def apply(overlay: Path, by_digest: bool) -> Callable[[], object]:
        kustomization = support.registry_overlay(installed.cluster, overlay, by_digest)
        return lambda: installed.kubectl("apply", "-k", str(kustomization), timeout=180)

    rolls = [(by_tag, apply(NEXT_OVERLAY, False)), (installed.published.image, apply(OVERLAY, True))]
    installed.measurements["upgrade_seconds"] = support.bursts_through_rollouts(
        installed, namespace, rolls, burst=UPGRADE_BURST
    )


def test_no_operator_restarted_and_every_one_is_ready(installed: Installed) -> None:
    assert sorted(operator_pods(installed.api, OPERATOR_NAMES)) == sorted(OPERATOR_NAMES)
    problems = support.unready_or_restarted(installed, OPERATOR_NAMES)
    state = installed.cluster.state
    assert state is not None
    setup = launcher.describe(state.mode, False, state.k8s_version, state.profile)
    assert not problems, f"{setup}:\n" + "\n\n".join(f"{name}: {text}" for name, text in problems.items())
