"""The managed profile on a cluster whose kube-controller-manager runs its own DRA controllers,
as managed clusters do: the profile's operators work, and the in-tree controllers handle
templates and evictions undisturbed, on the real node.

It is installed with ``helm install oci://...`` from the node's registry, the image from there too
pinned by digest (the deployed tier uses ``kubectl apply -k``): the chart's managed profile
renders exactly ``manifests/overlays/managed`` (``e2e/product/test_chart.py``), so this is the one
real install of both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from demo.player import Player
from devcluster import realnode
from devcluster.constants import REPO_ROOT
from devcluster.kube import Kube, wait_for
from e2e import harness
from e2e.poolstatus.support import BUILTIN, PROJECT, request_body, wait_done
from e2e.product import support
from e2e.product.support import (
    DEPLOYMENTS,
    RESOURCE,
    Installed,
    allocated_device,
    create_noexecute_rule,
    eviction_condition,
    generated_claim,
    install,
    operator_pods,
    phase,
    pod_body,
    template,
)
from e2e.support import namespace_of_test
from e2e.taintselector.support import SELECTORS, UID_LABEL

# The version pass runs it too (make test-e2e-versions): managed clusters of every supported version
# keep the in-tree controllers on; each test that needs an API asks for it (needs_served).
pytestmark = [
    pytest.mark.devcluster_only,
    pytest.mark.versions,
    pytest.mark.kube_proxy,
    pytest.mark.timeout(600),
]

PROFILE = ("poolstatus", "bindingattacher", "taintselector")
RULES = f"{RESOURCE}/devicetaintrules"
KCM = "kube-controller-manager"


@pytest.fixture(scope="module")
def installed(managed_cluster: harness.Cluster) -> Iterator[Installed]:
    # The README's steps: the namespace with the restricted profile first, then the chart.
    managed_cluster.kubectl("apply", "-f", str(REPO_ROOT / "manifests" / "namespace" / "namespace.yaml"))

    def apply() -> object:
        return support.helm_chart(
            managed_cluster,
            "install",
            "profile=managed",
            # The binding-conditions story's driver, granted by the chart as a user lists theirs.
            f"operators.bindingattacher.drivers={{{support.DEMO_DRIVER}}}",
        )

    with install(managed_cluster, apply, PROFILE, "managed.json") as here:
        yield here


@pytest.fixture
def namespace(installed: Installed, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from namespace_of_test(installed.api, request)


def _managers(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {
        e.get("manager", ""): (e.get("operation", ""), e.get("subresource", ""))
        for e in obj["metadata"].get("managedFields") or []
    }


def _ours(obj: dict[str, Any]) -> list[str]:
    return [m for m in _managers(obj) if m.startswith("dra-operators-")]


def test_only_the_operators_safe_beside_the_in_tree_controllers_run(installed: Installed) -> None:
    api = installed.api
    deployments = {d["metadata"]["name"] for d in api.list(DEPLOYMENTS)}
    assert deployments == {f"dra-operators-{name}" for name in PROFILE}
    pods = operator_pods(api, PROFILE)
    assert sorted(pods) == sorted(PROFILE)
    for name, pod in pods.items():
        assert pod["spec"]["nodeName"] == realnode.NODE_NAME
        assert pod["spec"]["containers"][0]["image"] == installed.published.image, name
        assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "True", name
    assert "--builtin-api=off" in pods["poolstatus"]["spec"]["containers"][0]["args"]
    crds = installed.kubectl("get", "crd", "-o", "name").stdout.split()
    assert "customresourcedefinition.apiextensions.k8s.io/resourcepoolstatusrequests.dra-operators.io" in crds


def test_the_in_tree_controller_runs_a_template_pod_on_the_real_node(
    installed: Installed, namespace: str, gpu_class: str
) -> None:
    api = installed.api
    pods = f"/api/v1/namespaces/{namespace}/pods"
    api.create(pods, pod_body("trainer", template(api, namespace), "sleep 3600"))
    claim = generated_claim(api, namespace, "trainer")
    assert _managers(claim).get(KCM) == ("Update", ""), "created by kube-controller-manager"
    assert not _ours(claim)
    allocated_device(api, namespace, claim["metadata"]["name"])
    wait_for(lambda: phase(api, namespace, "trainer") == "Running", 120, "trainer to run on the real node")
    pod = api.get(f"{pods}/trainer")
    assert _managers(pod).get("ResourceClaimController") == ("Apply", "status")
    assert not _ours(pod)
    api.delete(f"{pods}/trainer")
    claims = f"{RESOURCE}/namespaces/{namespace}/resourceclaims"
    wait_for(lambda: api.list(claims) == [], 90, "the in-tree controller to delete the generated claim")


def _running_victim(api: Kube, namespace: str) -> str:
    pods = f"/api/v1/namespaces/{namespace}/pods"
    api.create(pods, pod_body("victim", template(api, namespace), "sleep 3600"))
    claim = generated_claim(api, namespace, "victim")
    device = allocated_device(api, namespace, claim["metadata"]["name"])
    wait_for(lambda: phase(api, namespace, "victim") == "Running", 120, "victim to run")
    return device


@pytest.mark.needs_served("rule_version")
def test_the_in_tree_controller_evicts_for_a_rule(
    installed: Installed, namespace: str, gpu_class: str, unique_name: Callable[[str], str]
) -> None:
    api = installed.api
    device = _running_victim(api, namespace)
    rule = unique_name("evict")
    create_noexecute_rule(api, rule, device)
    try:
        wait_for(
            lambda: eviction_condition(api.get_or_none(f"{RULES}/{rule}")).get("reason") == "Completed",
            120,
            "EvictionInProgress to reach Completed",
        )
        assert api.get_or_none(f"/api/v1/namespaces/{namespace}/pods/victim") is None
        written = api.get(f"{RULES}/{rule}")
        assert _managers(written).get("device-taint-eviction-controller") == ("Apply", "status")
        assert not _ours(written)
    finally:
        api.delete(f"{RULES}/{rule}")


@pytest.mark.needs_served("rule_version")
def test_a_device_class_taint_is_enforced_by_the_in_tree_controller(
    installed: Installed, namespace: str, gpu_class: str, unique_name: Callable[[str], str]
) -> None:
    """What the managed profile adds: taintselector turns "every device of this class" into
    DeviceTaintRules, and kube-controller-manager evicts the pods; the container really stops."""
    api = installed.api
    _running_victim(api, namespace)
    name = unique_name("by-class")
    selector = api.create(
        SELECTORS,
        {
            "apiVersion": "dra-operators.io/v1alpha1",
            "kind": "DeviceTaintSelector",
            "metadata": {"name": name},
            "spec": {
                "taint": {"key": "dra-operators.test/maintenance", "value": "true", "effect": "NoExecute"},
                "deviceSelector": {"deviceClassName": gpu_class},
            },
        },
    )
    uid = selector["metadata"]["uid"]
    try:
        wait_for(
            lambda: api.get_or_none(f"/api/v1/namespaces/{namespace}/pods/victim") is None,
            120,
            "kube-controller-manager to evict the victim for the selector's rules",
        )
        rules = api.list(RULES, labelSelector=f"{UID_LABEL}={uid}")
        assert rules, "taintselector created no DeviceTaintRule"
        for rule in rules:
            assert "dra-operators-taintselector" in _managers(rule), "the rule is taintselector's"
        wait_for(
            lambda: any(
                "device-taint-eviction-controller" in _managers(r)
                for r in api.list(RULES, labelSelector=f"{UID_LABEL}={uid}")
            ),
            30,
            "the in-tree controller to report on the selector's rules",
        )
    finally:
        api.delete(f"{SELECTORS}/{name}")
        wait_for(
            lambda: not api.list(RULES, labelSelector=f"{UID_LABEL}={uid}"),
            60,
            "taintselector to remove its rules",
        )


@pytest.mark.needs_served("builtin_pool_status")
def test_pool_status_on_the_crd_beside_the_in_tree_one(
    installed: Installed, unique_name: Callable[[str], str]
) -> None:
    """The project CRD is ours; the built-in API, served on this cluster, is kube-controller-manager's."""
    api = installed.api
    name = unique_name("pools")
    created = []
    try:
        for surface in (PROJECT, BUILTIN):
            api.create(surface.path(), request_body(surface, name, realnode.DRIVER_NAME))
            created.append(surface.path(name))
        ours = wait_done(api, PROJECT, name, timeout=60)
        theirs = wait_done(api, BUILTIN, name, timeout=60)
        for request, manager in ((ours, "dra-operators-poolstatus"), (theirs, KCM)):
            (condition,) = request["status"]["conditions"]
            assert (condition["type"], condition["status"]) == ("Complete", "True"), condition
            assert request["status"]["poolCount"] == 1
            assert manager in _managers(request), _managers(request)
        assert not _ours(theirs), "the built-in request is left to the in-tree controller"
    finally:
        for path in created:
            api.delete(path)


@pytest.mark.lacks_served("builtin_pool_status")
def test_pool_status_on_the_crd_where_no_built_in_api_is_served(
    installed: Installed, unique_name: Callable[[str], str]
) -> None:
    """Upstream's defaults serve no built-in pool status API: the project CRD answers alone."""
    api = installed.api
    assert api.get_or_none(BUILTIN.path()) is None, "the matrix says this cluster serves no built-in API"
    ours = support.project_pool_status_completes(api, unique_name("pools"))
    assert "dra-operators-poolstatus" in _managers(ours), _managers(ours)


@pytest.mark.needs_served("binding_conditions")
def test_binding_conditions_demo_story(installed: Installed) -> None:
    player = Player(installed.cluster.kubectl_path, installed.cluster.kubeconfig)
    try:
        support.play_story(installed, player, "binding-conditions")
    finally:
        player.close()


def test_the_profile_stays_ready_and_restarts_nothing(installed: Installed) -> None:
    """poolstatus carries the coexistence guard: on this cluster it must never fire, since the
    profile leaves the built-in API alone (a fired guard would show as an unready pod)."""
    assert sorted(operator_pods(installed.api, PROFILE)) == sorted(PROFILE)
    problems = support.unready_or_restarted(installed, PROFILE)
    assert not problems, "\n\n".join(f"{name}: {text}" for name, text in problems.items())
