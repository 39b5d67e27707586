"""The product as users run it: ``kubectl apply -k`` of the shipped manifests, the image built
here, every operator a Pod on the real node under its own ServiceAccount, in a namespace that
enforces the restricted Pod Security profile. No operator of this cluster runs on the host.

The install is ``e2e/deployed/``: the shipped manifests, the Exec action's command mounted from a
ConfigMap (what a user adds for their own action), and the image the fixture pushed to the node's
registry, pinned by digest (``support.registry_overlay``); the kubelet pulls it, as it pulls the
chart's in the helm rollouts at the end. Measurements (time to Ready, each operator's memory) go
to ``test-artifacts/deployed.json``.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from demo.player import Player
from devcluster import images, launcher, realnode
from devcluster.constants import REPO_ROOT
from devcluster.kube import Kube, wait_for
from e2e import harness
from e2e.bindingattacher.world import condition, policy_ready
from e2e.product import support
from e2e.product.scenarios import STORIES
from e2e.product.support import (
    DEPLOYMENTS,
    NAMESPACE,
    OPERATOR_PODS,
    RESOURCE,
    Installed,
    allocated_device,
    create_noexecute_rule,
    eviction_condition,
    generated_claim,
    logs,
    operator_pods,
    phase,
    pod_body,
    template,
    unavailable,
)
from e2e.resourceclaim.support import (
    absent_template,
    all_recorded,
    assert_exactly_one_claim_each,
    claim_body,
    create_claim,
    placeholder_pods,
)
from e2e.support import device_class_body, namespace_of_test
from operators import OPERATOR_NAMES
from operators.core.client import ApiError
from operators.dra.quantity import parse_quantity

pytestmark = [pytest.mark.devcluster_only, pytest.mark.kube_proxy, pytest.mark.timeout(600)]

OVERLAY = REPO_ROOT / "e2e" / "deployed"
OWN = "/apis/dra-operators.io/v1alpha1"
POLICIES = f"{OWN}/deviceattachpolicies"
TAINT_RULES = f"{RESOURCE}/devicetaintrules"
COMMAND = "/etc/dra-operators/commands/fabric-attach"
NO_RESTART_WINDOW = 120.0


@pytest.fixture(scope="module")
def installed(deployed_cluster: harness.Cluster) -> Iterator[Installed]:
    yield from support.installed_from_kustomize(deployed_cluster, OVERLAY, "deployed.json")


def _available(api: Kube) -> list[str]:
    return unavailable(api, OPERATOR_NAMES)


def _operator_pods(api: Kube) -> dict[str, dict[str, Any]]:
    return operator_pods(api, OPERATOR_NAMES)


@pytest.fixture
def deployed_namespace(installed: Installed, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from namespace_of_test(installed.api, request)


# -- the install ---------------------------------------------------------------------------------


def test_every_operator_is_available_under_its_own_service_account(installed: Installed) -> None:
    api = installed.api
    namespace = api.get(f"/api/v1/namespaces/{NAMESPACE}")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    rendered = installed.kubectl("kustomize", str(REPO_ROOT / "manifests")).stdout
    shipped = {
        d["metadata"]["name"]: d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"
    }
    pods = _operator_pods(api)
    assert sorted(pods) == sorted(OPERATOR_NAMES)
    published = installed.published
    # Pulled, not imported: the node's containerd has the operator image under the registry's name only.
    assert support.operator_images(installed.cluster) == {published.image: published.digest}
    for name, pod in pods.items():
        assert pod["spec"]["serviceAccountName"] == f"dra-operators-{name}"
        assert pod["spec"]["nodeName"] == realnode.NODE_NAME
        container = pod["spec"]["containers"][0]
        assert container["image"] == published.image
        expected = shipped[f"dra-operators-{name}"]["spec"]["template"]["spec"]["containers"][0]
        for probe in ("livenessProbe", "readinessProbe"):
            # The API server adds the defaults (scheme HTTP, thresholds); what was shipped stays.
            for key, value in expected[probe]["httpGet"].items():
                assert container[probe]["httpGet"][key] == value, f"{name} {probe}.{key}"
        ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert ready["Ready"] == "True", f"{name}: {pod['status']['conditions']}"


SCRAPE_HELPERS = (
    "import json, ssl, sys, urllib.error, urllib.request\n"
    "tls = ssl.create_default_context(); tls.check_hostname = False; tls.verify_mode = ssl.CERT_NONE\n"
    "own = open('/var/run/secrets/kubernetes.io/serviceaccount/token').read()\n"
    "def get(url, token):\n"
    "    headers = {'Authorization': 'Bearer ' + token} if token else {}\n"
    "    try:\n"
    "        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30,"
    " context=tls) as answer:\n"
    "            return answer.status, answer.read().decode()\n"
    "    except urllib.error.HTTPError as err:\n"
    "        return err.code, err.read().decode()\n"
)
"""What a scraping pod's script starts with: ``get(url, token)`` -> (status, body), and ``own``,
the pod's ServiceAccount token."""


def _run_as_metrics_reader(
    installed: Installed, namespace: str, pod: str, script: str, args: list[str]
) -> None:
    """``script`` in a pod of the operator image under a ServiceAccount bound to
    dra-operators-metrics-reader, until it finishes."""
    api = installed.api
    accounts = f"/api/v1/namespaces/{namespace}/serviceaccounts"
    if api.get_or_none(f"{accounts}/reader") is None:
        api.create(accounts, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}})
    binding = f"dra-operators-metrics-reader-{namespace}"
    api.create(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": binding},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "dra-operators-metrics-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
        },
    )
    try:
        api.create(
            f"/api/v1/namespaces/{namespace}/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": pod},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": "reader",
                    "containers": [
                        {
                            "name": "scrape",
                            "image": installed.published.image,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["python3", "-c", script, *args],
                        }
                    ],
                },
            },
        )
        wait_for(
            lambda: phase(api, namespace, pod) in ("Succeeded", "Failed"), 300, f"the {pod} pod to finish"
        )
    finally:
        api.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{binding}")


def test_secure_metrics_are_scraped_through_each_service_from_a_pod(
    installed: Installed, deployed_namespace: str
) -> None:
    api = installed.api
    # The series docs/operate.md names (section "Metrics, health and logs").
    wanted = {
        "resourceclaim": [
            "dra_operators_resourceclaim_creates_total",
            "dra_operators_resourceclaim_resource_claims",
        ],
        "devicetaint": ["dra_operators_devicetaint_pod_deletions_total"],
        "poolstatus": ["dra_operators_poolstatus_"],
        "bindingattacher": ["dra_operators_bindingattacher_"],
        "taintselector": ["dra_operators_taintselector_"],
        "devicehealth": ["dra_operators_devicehealth_"],
    }
    urls = {}
    for name in OPERATOR_NAMES:
        service = api.get(f"/api/v1/namespaces/{NAMESPACE}/services/dra-operators-{name}")
        urls[name] = f"https://{service['spec']['clusterIP']}:8080/metrics"
    # Three callers: the scraper's own ServiceAccount, bound to dra-operators-metrics-reader; a
    # ServiceAccount without that role; and no token at all.
    accounts = f"/api/v1/namespaces/{deployed_namespace}/serviceaccounts"
    api.create(accounts, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "stranger"}})
    stranger = api.create(
        f"{accounts}/stranger/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        },
    )["status"]["token"]
    script = (
        SCRAPE_HELPERS + "for name, url in json.loads(sys.argv[1]).items():\n"
        "    refused = [get(url, sys.argv[2])[0], get(url, '')[0]]\n"
        "    status, body = get(url, own)\n"
        "    print(f'=== {name} {status} {refused[0]} {refused[1]}'); print(body)\n"
    )
    _run_as_metrics_reader(installed, deployed_namespace, "scraper", script, [json.dumps(urls), stranger])
    output = logs(installed.cluster, deployed_namespace, "scraper")
    assert phase(api, deployed_namespace, "scraper") == "Succeeded", output[-2000:]
    sections: dict[str, str] = {}
    for part in output.split("=== ")[1:]:
        head, body = part.split("\n", 1)
        name, reader_status, stranger_status, anonymous_status = head.split()
        assert (reader_status, stranger_status, anonymous_status) == ("200", "403", "401"), f"{name}: {head}"
        sections[name] = body
    exported: set[str] = set()
    assert sorted(sections) == sorted(OPERATOR_NAMES)
    assert sorted(wanted) == sorted(OPERATOR_NAMES), "name the series each operator must export"
    for name, prefixes in wanted.items():
        body = sections[name]
        assert 'dra_operators_workqueue_depth{name="' in body, name
        assert "dra_operators_client_requests_total" in body, name
        for prefix in prefixes:
            assert prefix in body, f"{name}: no {prefix} series"
        exported |= harness.exported_names(body)
        if name in ("resourceclaim", "devicetaint", "poolstatus"):
            # The coexistence guard: exported, and silent where the in-tree controllers are off.
            assert harness.GUARD_METRIC in body, name
            assert harness.in_tree_detected(body) == (), name
    # The monitoring assets name only series some operator exports.
    monitoring = REPO_ROOT / "manifests" / "monitoring"
    named = set(re.findall(r"\bdra_operators_[a-z_]+", (monitoring / "prometheusrule.yaml").read_text()))
    named |= set(re.findall(r"\bdra_operators_[a-z_]+", (monitoring / "dashboard.json").read_text()))
    assert named, "no series named by the alerts and the dashboard"
    assert named <= exported, f"named but exported by no operator: {sorted(named - exported)}"


HELD_PODS = 50
DEVICETAINT = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/dra-operators-devicetaint"


def _apiserver_requests(installed: Installed, *labels: str) -> float:
    """kube-apiserver's ``apiserver_request_total`` summed over the series carrying ``labels``."""
    total = 0.0
    for line in installed.kubectl("get", "--raw", "/metrics").stdout.splitlines():
        if line.startswith("apiserver_request_total{") and all(label in line for label in labels):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _refused_evictions(installed: Installed) -> float:
    """Evictions kube-apiserver answered with 429 (a budget's refusal)."""
    return _apiserver_requests(installed, 'code="429"', 'resource="pods"', 'subresource="eviction"')


def _rolled(api: Kube, path: str) -> bool:
    deployment = api.get(path)
    status = deployment["status"]
    return bool(
        status.get("observedGeneration") == deployment["metadata"]["generation"]
        and status.get("updatedReplicas") == status.get("replicas") == status.get("availableReplicas")
    )


def _held_pod(name: str) -> dict[str, Any]:
    body = pod_body(name, "", "sleep 3600")
    body["metadata"]["labels"] = {"app": "held"}
    body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
    return body


def test_a_budget_that_allows_no_disruption_holds_fifty_running_pods_with_backoff(
    installed: Installed, deployed_namespace: str, gpu_class: str, unique_name: Callable[[str], str]
) -> None:
    """devicetaint in evict mode, 50 pods Running on the real node on one shared claim, and a
    PodDisruptionBudget that allows no disruption: a NoExecute rule on the device gives the first
    Warning naming the budget within 2 s, kube-apiserver refuses at most about 5 evictions per pod
    in the first 20 s (1, 2, 4, 8 s apart), and once the budget allows it every pod goes."""
    api, namespace = installed.api, deployed_namespace
    args = api.get(DEVICETAINT)["spec"]["template"]["spec"]["containers"][0]["args"]
    api.request(
        "PATCH",
        DEVICETAINT,
        body=[
            {"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--eviction-mode=evict"}
        ],
        content_type="application/json-patch+json",
    )
    rule = unique_name("held")
    pdbs = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    pods = f"/api/v1/namespaces/{namespace}/pods"
    try:
        wait_for(functools.partial(_rolled, api, DEVICETAINT), 180, "devicetaint to roll out in evict mode")
        wait_for(functools.partial(_holder, api, "devicetaint"), 60, "a devicetaint leader")
        api.create(
            f"{RESOURCE}/namespaces/{namespace}/resourceclaims",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "shared"},
                "spec": {
                    "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": gpu_class}}]}
                },
            },
        )
        names = [f"held-{i}" for i in range(HELD_PODS)]
        for name in names:
            api.create(pods, _held_pod(name))
        api.create(
            pdbs,
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "keep-all"},
                # An integer minAvailable: the disruption controller counts pods without a controller
                # only for that form.
                "spec": {"minAvailable": HELD_PODS, "selector": {"matchLabels": {"app": "held"}}},
            },
        )

        def all_healthy() -> bool:
            budget = api.get(f"{pdbs}/keep-all").get("status", {})
            return bool(budget.get("currentHealthy") == HELD_PODS == budget.get("expectedPods"))

        wait_for(all_healthy, 300, f"{HELD_PODS} Running, Ready pods under the budget")
        device = allocated_device(api, namespace, "shared")
        refused_before = _refused_evictions(installed)
        create_noexecute_rule(api, rule, device)
        started = time.monotonic()

        def first_warning() -> dict[str, Any] | None:
            events = api.list(f"/api/v1/namespaces/{namespace}/events")
            found = [
                e for e in events if e["type"] == "Warning" and "PodDisruptionBudget keep-all" in e["message"]
            ]
            return found[0] if found else None

        warning = wait_for(first_warning, 10, "a Warning naming the budget", interval=0.1)
        first_after = time.monotonic() - started
        assert warning is not None
        # The window of the backoff schedule is the measurement, not a synchronisation.
        time.sleep(max(0.0, started + 20 - time.monotonic()))
        refused = _refused_evictions(installed) - refused_before
        installed.measurements["budget"] = {
            "first_warning_seconds": round(first_after, 2),
            "refused_in_20_s": refused,
            "per_pod": round(refused / HELD_PODS, 2),
        }
        assert first_after <= 2.0, f"the first Warning came {first_after:.1f} s after the rule"
        assert HELD_PODS <= refused <= 6 * HELD_PODS, f"{refused} refusals in 20 s for {HELD_PODS} pods"
        assert all(api.get_or_none(f"{pods}/{name}") for name in names), "a pod went while its budget held"

        api.patch(f"{pdbs}/keep-all", {"spec": {"minAvailable": 0}})
        wait_for(
            lambda: eviction_condition(api.get_or_none(f"{TAINT_RULES}/{rule}")).get("reason") == "Completed",
            120,
            "every pod evicted once the budget allows it",
        )
    finally:
        api.delete(f"{TAINT_RULES}/{rule}")
        api.request(
            "PATCH",
            DEVICETAINT,
            body=[{"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": args}],
            content_type="application/json-patch+json",
        )
        wait_for(functools.partial(_rolled, api, DEVICETAINT), 180, "devicetaint to roll back to delete mode")


BOGUS_TOKENS = 1000


def _token_reviews(installed: Installed) -> float:
    """TokenReviews kube-apiserver answered."""
    return _apiserver_requests(installed, 'resource="tokenreviews"')


def test_a_thousand_bogus_tokens_cost_bounded_reviews_and_memory(
    installed: Installed, deployed_namespace: str
) -> None:
    """1 000 distinct made-up tokens against the resourceclaim operator's /metrics, 64 at a time:
    each is refused (401, or 429 while 8 reviews are in flight), kube-apiserver reviews no more
    than the refused ones, the operator stays under its memory limit without a restart, and an
    authorised scrape (its token checked once, before) is answered during the flood and after it."""
    api = installed.api
    service = api.get(f"/api/v1/namespaces/{NAMESPACE}/services/dra-operators-resourceclaim")
    url = f"https://{service['spec']['clusterIP']}:8080/metrics"
    assert installed.cluster.state is not None
    (target,) = [p for n, p in _operator_pods(api).items() if n == "resourceclaim"]
    cgroup = _memory_cgroup(installed.cluster.state.node_layout, target)
    (cgroup / "memory.max_usage_in_bytes").write_text("0")
    reviews_before = _token_reviews(installed)
    script = (
        SCRAPE_HELPERS + "import collections, concurrent.futures, secrets\n"
        "url, count = sys.argv[1], int(sys.argv[2])\n"
        "tokens = [f'bogus.{i}.{secrets.token_urlsafe(24)}' for i in range(count)]\n"
        "before = get(url, own)[0]\n"
        "with concurrent.futures.ThreadPoolExecutor(64) as pool:\n"
        "    flood = [pool.submit(get, url, t) for t in tokens]\n"
        "    during = get(url, own)[0]\n"
        "    codes = collections.Counter(str(f.result()[0]) for f in flood)\n"
        "print(json.dumps({'codes': codes, 'before': before, 'during': during, 'after': get(url, own)[0]}))\n"
    )
    _run_as_metrics_reader(installed, deployed_namespace, "flood", script, [url, str(BOGUS_TOKENS)])
    output = logs(installed.cluster, deployed_namespace, "flood")
    assert phase(api, deployed_namespace, "flood") == "Succeeded", output[-2000:]
    answer = json.loads(output.strip().splitlines()[-1])
    reviews = _token_reviews(installed) - reviews_before
    peak = int((cgroup / "memory.max_usage_in_bytes").read_text())
    limit = target["spec"]["containers"][0]["resources"]["limits"]["memory"]
    installed.measurements["token_flood"] = {
        **answer,
        "token_reviews": reviews,
        "peak_usage_mib": round(peak / 2**20, 1),
        "limit": limit,
    }
    codes = answer["codes"]
    assert set(codes) <= {"401", "429"}, codes
    assert sum(codes.values()) == BOGUS_TOKENS
    # Each 401 took one review, a 429 none; the authorised caller's answer is cached after its
    # first scrape, which is the one more review allowed here.
    assert reviews <= codes.get("401", 0) + 1, (reviews, codes)
    assert (answer["before"], answer["during"], answer["after"]) == (200, 200, 200), answer
    assert peak < parse_quantity(limit).as_fraction(), f"peak {peak} bytes, limit {limit}"
    (now,) = [p for n, p in _operator_pods(api).items() if n == "resourceclaim"]
    assert now["metadata"]["uid"] == target["metadata"]["uid"]
    assert now["status"]["containerStatuses"][0].get("restartCount", 0) == 0


# -- the demo, against the deployed operators ---------------------------------------------------


@pytest.fixture(scope="module")
def demo_player(installed: Installed) -> Iterator[Player]:
    yield from support.demo_player(installed)


@pytest.mark.parametrize("story", list(STORIES))
def test_demo_story_against_the_deployed_operators(
    installed: Installed, demo_player: Player, story: str
) -> None:
    """The README's demo as ``make demo`` plays it, with the operators as Pods instead of on the host."""
    support.play_story(installed, demo_player, story)
    installed.measurements.setdefault("memory_after_demo_story", {})[story] = _memory(installed)


# -- claims and eviction on the real node ------------------------------------------------------


def test_template_pod_runs_on_the_real_node_with_the_deployed_operator(
    installed: Installed, deployed_namespace: str, gpu_class: str
) -> None:
    support.template_pod_runs_and_its_claim_goes_with_it(installed, deployed_namespace)


def test_noexecute_rule_evicts_through_the_deployed_operator(
    installed: Installed,
    deployed_namespace: str,
    gpu_class: str,
    unique_name: Callable[[str], str],
) -> None:
    api, namespace = installed.api, deployed_namespace
    pods = f"/api/v1/namespaces/{namespace}/pods"
    api.create(pods, pod_body("victim", template(api, namespace), "sleep 3600"))
    claim = generated_claim(api, namespace, "victim")
    device = allocated_device(api, namespace, claim["metadata"]["name"])
    wait_for(lambda: phase(api, namespace, "victim") == "Running", 120, "victim to run")
    rule = unique_name("evict")
    create_noexecute_rule(api, rule, device)
    try:
        done = wait_for(
            lambda: eviction_condition(api.get_or_none(f"{TAINT_RULES}/{rule}")).get("reason") == "Completed",
            120,
            "EvictionInProgress to reach Completed",
        )
        assert done
        assert api.get_or_none(f"{pods}/victim") is None, "Completed while the pod still exists"
    finally:
        api.delete(f"{TAINT_RULES}/{rule}")


# -- binding conditions: the Exec action, the default policy, the driver permission -----------


def _fabric(api: Kube, prefix: str, driver: str) -> tuple[str, list[str]]:
    """A slice of three free devices d0-d2 of ``driver`` that bind to the node the scheduler
    picks (the real node), and a DeviceClass for them."""
    names = ["d0", "d1", "d2"]
    devices = [
        {
            "name": n,
            "bindsToNode": True,
            "bindingConditions": [f"{driver}/attached"],
            "bindingFailureConditions": [f"{driver}/attach-failed"],
        }
        for n in names
    ]
    api.create(
        f"{RESOURCE}/resourceslices",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{prefix}-slice"},
            "spec": {
                "driver": driver,
                "pool": {"name": f"{prefix}-pool", "generation": 1, "resourceSliceCount": 1},
                "allNodes": True,
                "devices": devices,
            },
        },
    )
    api.create(f"{RESOURCE}/deviceclasses", device_class_body(f"{prefix}-class", driver))
    return f"{prefix}-class", names


def _exec_policy(name: str, driver: str, fail: str = "", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "dra-operators.io/v1alpha1",
        "kind": "DeviceAttachPolicy",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "action": {
                "kind": "Exec",
                "exec": {"command": [COMMAND], "env": [{"name": "FAIL_DEVICES", "value": fail}]},
            },
            "conditions": {},
            **spec,
        },
    }


def _fabric_pod(api: Kube, namespace: str, device_class: str, name: str = "trainer") -> None:
    create_claim(api, namespace, claim_body(f"{name}-fabric", request="gpu", device_class=device_class))
    api.create(
        f"/api/v1/namespaces/{namespace}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-fabric"}],
                "containers": [
                    {
                        "name": "main",
                        "image": images.BASE_IMAGE,
                        "imagePullPolicy": "Never",
                        "command": ["sleep", "3600"],
                        "resources": {"claims": [{"name": "gpu"}]},
                    }
                ],
            },
        },
    )


def _bound_device(api: Kube, namespace: str, pod: str) -> str | None:
    obj = api.get_or_none(f"/api/v1/namespaces/{namespace}/pods/{pod}")
    if not obj or not obj["spec"].get("nodeName"):
        return None
    claim = api.get(f"{RESOURCE}/namespaces/{namespace}/resourceclaims/{pod}-fabric")
    results = (claim.get("status", {}).get("allocation") or {}).get("devices", {}).get("results") or []
    return str(results[0]["device"]) if results else None


@pytest.fixture
def fabric(
    installed: Installed, deployed_namespace: str, unique_name: Callable[[str], str]
) -> Iterator[Callable[..., tuple[str, list[str]]]]:
    made: list[tuple[str, str]] = []

    def make(driver: str) -> tuple[str, list[str]]:
        prefix = unique_name("fab")
        made.append((prefix, driver))
        return _fabric(installed.api, prefix, driver)

    yield make
    api = installed.api
    # The workload's pods and claims first: a policy keeps its finalizer until its devices are
    # detached, which happens when the claims are deallocated. The pods that serve an action (the
    # webhook server) go last, as the detach calls them: deleted with the workload, the server
    # could be gone before the detach, which would then be retried for ever.
    pods = f"/api/v1/namespaces/{deployed_namespace}/pods"
    servers = []
    for pod in api.list(pods):
        if pod["spec"].get("resourceClaims"):
            api.delete(f"{pods}/{pod['metadata']['name']}", gracePeriodSeconds="0")
        else:
            servers.append(pod["metadata"]["name"])
    claims = f"{RESOURCE}/namespaces/{deployed_namespace}/resourceclaims"
    for claim in api.list(claims):
        api.delete(f"{claims}/{claim['metadata']['name']}")
    wait_for(lambda: api.list(claims) == [], 90, "the test's claims to be deallocated and gone")
    for policy in api.list(POLICIES):
        api.delete(f"{POLICIES}/{policy['metadata']['name']}")
    wait_for(lambda: api.list(POLICIES) == [], 60, "the policies to be finalized and gone")
    for name in servers:
        api.delete(f"{pods}/{name}", gracePeriodSeconds="0")
    for prefix, driver in made:
        api.delete(f"{RESOURCE}/resourceslices/{prefix}-slice")
        api.delete(f"{RESOURCE}/deviceclasses/{prefix}-class")
        for rule in api.list(TAINT_RULES):
            if rule["spec"].get("deviceSelector", {}).get("driver") == driver:
                api.delete(f"{TAINT_RULES}/{rule['metadata']['name']}")


def test_exec_action_from_a_configmap_runs_under_the_read_only_root(
    installed: Installed, deployed_namespace: str, fabric: Callable[..., tuple[str, list[str]]]
) -> None:
    api = installed.api
    device_class, _ = fabric(support.DEMO_DRIVER)
    api.create(POLICIES, _exec_policy("fabric-exec", support.DEMO_DRIVER))
    wait_for(lambda: policy_ready(api, "fabric-exec"), 60, "the Exec policy to be Ready")
    _fabric_pod(api, deployed_namespace, device_class)
    device = wait_for(lambda: _bound_device(api, deployed_namespace, "trainer"), 90, "the pod to be bound")
    claim = api.get(f"{RESOURCE}/namespaces/{deployed_namespace}/resourceclaims/trainer-fabric")
    entries = claim["status"].get("devices") or []
    attached = [c for e in entries if e["device"] == device for c in e.get("conditions", [])]
    assert any(c["type"] == f"{support.DEMO_DRIVER}/attached" and c["status"] == "True" for c in attached), (
        entries
    )
    # The command's answer names the temp file it wrote under the read-only root (/tmp emptyDir).
    messages = " ".join(c.get("message", "") for c in attached)
    assert "staged in /tmp/fabric-attach-" in messages, attached


MISBEHAVE = "/etc/dra-operators/commands/misbehave"


def _processes(cgroup: Path) -> dict[int, tuple[str, str]]:
    """The processes of a container's cgroup: pid -> (state, command line)."""
    found = {}
    for line in (cgroup / "cgroup.procs").read_text().split():
        pid = int(line)
        try:
            state = next(
                f.split()[1]
                for f in Path(f"/proc/{pid}/status").read_text().splitlines()
                if f.startswith("State:")
            )
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except (FileNotFoundError, ProcessLookupError):
            continue  # gone between the listing and the read
        found[pid] = (state, command)
    return found


def test_exec_helpers_that_flood_fork_or_ignore_sigterm_leave_nothing_behind(
    installed: Installed, deployed_namespace: str, fabric: Callable[..., tuple[str, list[str]]]
) -> None:
    """Each helper misbehaves once, then attaches on the retry: d0 writes 100 MiB to stdout, d1
    leaves a child sleeping in the background, d2 ignores SIGTERM past a 3 s timeout. The attacher
    stays under its memory limit and is not restarted; once every device is attached, no process
    of the helpers is left in its container and none is a zombie."""
    api = installed.api
    driver = "misbehave.fabric.example.com"
    assert installed.kubectl_dra("grant-driver", driver).returncode == 0
    device_class, devices = fabric(driver)
    assert installed.cluster.state is not None
    node = installed.cluster.state.node_layout
    (attacher,) = [p for n, p in _operator_pods(api).items() if n == "bindingattacher"]
    cgroup = _memory_cgroup(node, attacher)
    # The peak from here on: cgroup v1 resets it on a write.
    (cgroup / "memory.max_usage_in_bytes").write_text("0")
    policy = _exec_policy("misbehave", driver)
    policy["spec"]["action"]["exec"] = {"command": [MISBEHAVE]}
    policy["spec"]["action"]["timeout"] = "3s"
    policy["spec"]["retry"] = {"initialBackoff": "1s", "maxBackoff": "2s"}
    api.create(POLICIES, policy)
    wait_for(lambda: policy_ready(api, "misbehave"), 60, "the policy to be Ready")
    pods = [f"helper-{i}" for i in range(len(devices))]
    for pod in pods:
        _fabric_pod(api, deployed_namespace, device_class, name=pod)
    bound: dict[str, str] = {}
    for pod in pods:
        device = wait_for(functools.partial(_bound_device, api, deployed_namespace, pod), 120, f"{pod} bound")
        assert device is not None
        bound[pod] = device
    assert sorted(bound.values()) == devices
    records = api.list(f"{OWN}/namespaces/{NAMESPACE}/deviceattachments")
    errors = {
        r["spec"]["device"]: r["status"].get("lastError", "")
        for r in records
        if r["spec"]["driver"] == driver
    }
    attempts = {
        r["spec"]["device"]: r["status"].get("attempts", 0) for r in records if r["spec"]["driver"] == driver
    }
    assert all(attempts[d] >= 2 for d in ("d0", "d2")), attempts
    peak = int((cgroup / "memory.max_usage_in_bytes").read_text())
    limit = attacher["spec"]["containers"][0]["resources"]["limits"]["memory"]
    installed.measurements["exec_flood"] = {
        "peak_usage_mib": round(peak / 2**20, 1),
        "limit": limit,
        "errors": errors,
    }
    assert peak < parse_quantity(limit).as_fraction(), f"peak {peak} bytes, limit {limit}"
    left = _processes(cgroup)
    assert not [c for _, c in left.values() if MISBEHAVE in c], left
    assert not [pid for pid, (state, _) in left.items() if state == "Z"], left
    (now,) = [p for n, p in _operator_pods(api).items() if n == "bindingattacher"]
    assert now["metadata"]["uid"] == attacher["metadata"]["uid"]
    assert now["status"]["containerStatuses"][0].get("restartCount", 0) == 0


def _refusal(api: Kube, name: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The policy's Ready and Accepted conditions, once they describe its current generation."""
    policy = api.get_or_none(f"{POLICIES}/{name}")
    ready, accepted = condition(policy, "Ready"), condition(policy, "Accepted")
    if not policy or not ready or not accepted:
        return None
    if policy["status"].get("observedGeneration") != policy["metadata"]["generation"]:
        return None
    return ready, accepted


def test_policies_the_operator_does_not_allow_say_what_would_fix_them(installed: Installed) -> None:
    """Against the deployed attacher, which allows the files of its commands directory and no plain
    HTTP: a command from elsewhere and a plain-HTTP webhook are Ready=False with a reason and a
    message that names the operator's flag; BASH_ENV is refused by the CRD itself."""
    api = installed.api
    # One policy per driver: a second policy for a driver is not accepted.
    shell = _exec_policy("refused-shell", "shell.refused.example.com")
    shell["spec"]["action"]["exec"] = {"command": ["/bin/sh", "-c", "id"]}
    plain = _exec_policy("refused-http", "http.refused.example.com")
    plain["spec"]["action"] = {
        "kind": "Webhook",
        "webhook": {"url": "http://attach.example.com/v1/attach", "allowInsecureHTTP": True},
    }
    try:
        for body in (shell, plain):
            api.create(POLICIES, body)
        for name, reason, fix in (
            ("refused-shell", "CommandNotAllowed", "/etc/dra-operators/commands (--exec-commands-dir)"),
            ("refused-http", "InvalidActionConfig", "operator does not allow (--allow-insecure-webhooks)"),
        ):
            found = wait_for(functools.partial(_refusal, api, name), 60, f"{name}'s conditions")
            assert found is not None
            ready, accepted = found
            # Ready says it is not accepted, Accepted says why; both messages name the fix.
            assert (ready["status"], ready["reason"]) == ("False", "NotAccepted"), ready
            assert (accepted["status"], accepted["reason"]) == ("False", reason), accepted
            assert fix in ready["message"], ready
            assert fix in accepted["message"], accepted
        bash_env = _exec_policy("refused-env", "env.refused.example.com")
        bash_env["spec"]["action"]["exec"] = {
            "command": [COMMAND],
            "env": [{"name": "BASH_ENV", "value": "/x"}],
        }
        with pytest.raises(ApiError) as refused:
            api.create(POLICIES, bash_env)
        assert refused.value.status == 422
        assert "this variable makes a shell, the dynamic linker or an interpreter load other code" in str(
            refused.value
        )
    finally:
        for name in ("refused-shell", "refused-http"):
            api.delete(f"{POLICIES}/{name}")
        wait_for(
            lambda: not any(api.get_or_none(f"{POLICIES}/{n}") for n in ("refused-shell", "refused-http")),
            60,
            "the refused policies to be gone",
        )


def test_default_policy_moves_a_permanently_failing_device_aside(
    installed: Installed, deployed_namespace: str, fabric: Callable[..., tuple[str, list[str]]]
) -> None:
    """The livelock of #21: with the default onFailure the scheduler must not pick d0 forever."""
    api = installed.api
    driver = "livelock.fabric.example.com"
    granted = installed.kubectl_dra("grant-driver", driver)
    assert granted.returncode == 0, granted.stderr
    device_class, _ = fabric(driver)
    api.create(POLICIES, _exec_policy("livelock", driver, fail="d0"))
    wait_for(lambda: policy_ready(api, "livelock"), 60, "the policy to be Ready")
    policy = api.get(f"{POLICIES}/livelock")
    assert policy["spec"]["onFailure"]["taintDevice"] == "OnPermanentError"
    _fabric_pod(api, deployed_namespace, device_class)
    # The scheduler tries devices in order, so d0 comes first; the taint of its permanent
    # failure sends the next scheduling round elsewhere.
    device = wait_for(lambda: _bound_device(api, deployed_namespace, "trainer"), 120, "the pod to be bound")
    assert device in ("d1", "d2")
    records = api.list(f"{OWN}/namespaces/{NAMESPACE}/deviceattachments")
    failed_on_d0 = [r for r in records if r["spec"]["device"] == "d0"]
    assert len(failed_on_d0) <= 2, f"more than two rounds on d0: {len(failed_on_d0)}"
    rules = [r for r in api.list(TAINT_RULES) if r["spec"]["deviceSelector"].get("driver") == driver]
    assert [r["spec"]["deviceSelector"]["device"] for r in rules] == ["d0"]


def test_a_claim_failing_again_and_again_on_one_device_is_reported(
    installed: Installed, deployed_namespace: str, fabric: Callable[..., tuple[str, list[str]]]
) -> None:
    api = installed.api
    driver = "stuck.fabric.example.com"
    assert installed.kubectl_dra("grant-driver", driver).returncode == 0
    device_class, _ = fabric(driver)
    # Never, and every device fails: the loop the default prevents, made visible.
    api.create(POLICIES, _exec_policy("stuck", driver, fail="d0,d1,d2", onFailure={"taintDevice": "Never"}))
    wait_for(lambda: policy_ready(api, "stuck"), 60, "the policy to be Ready")
    _fabric_pod(api, deployed_namespace, device_class)

    def warning() -> dict[str, Any] | None:
        events = api.list(f"/api/v1/namespaces/{deployed_namespace}/events")
        found = [e for e in events if e.get("reason") == "RepeatedAttachFailure"]
        return found[0] if found else None

    event = wait_for(warning, 180, "a RepeatedAttachFailure Warning")
    assert event is not None
    assert event["type"] == "Warning"
    assert "allocation rounds in a row failed on this device" in event["message"]
    assert "onFailure.taintDevice: Never" in event["message"]


def test_a_driver_without_the_grant_is_not_authorized_until_granted(
    installed: Installed, fabric: Callable[..., tuple[str, list[str]]]
) -> None:
    api = installed.api
    driver = "late.fabric.example.com"
    fabric(driver)
    api.create(POLICIES, _exec_policy("late", driver))

    def authorized(status: str) -> dict[str, Any] | None:
        found = condition(api.get_or_none(f"{POLICIES}/late"), "Authorized") or {}
        return found if found.get("status") == status else None

    denied = wait_for(lambda: authorized("False"), 60, "Authorized=False")
    assert denied is not None
    assert denied["reason"] == "MissingDriverPermission"
    assert f"grant it with `kubectl dra grant-driver {driver}`" in denied["message"]
    assert (condition(api.get(f"{POLICIES}/late"), "Ready") or {}).get("reason") == "NotAuthorized"
    granted = installed.kubectl_dra("grant-driver", driver)
    assert granted.returncode == 0, granted.stderr
    assert (
        "clusterrolebinding/dra-operators-bindingattacher-driver-late.fabric.example.com applied"
        in granted.stdout
    )
    wait_for(lambda: authorized("True"), 60, "Authorized=True after the grant")
    wait_for(lambda: policy_ready(api, "late"), 30, "the policy to be Ready")


WEBHOOK_SERVER = """\
import json, ssl
from http.server import BaseHTTPRequestHandler, HTTPServer


class Attach(BaseHTTPRequestHandler):
    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps({"outcome": "Succeeded", "message": f"{request['operation']} by the webhook pod"})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())


server = HTTPServer(("0.0.0.0", 8443), Attach)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain("/tls/tls.crt", "/tls/tls.key")
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"""


def test_https_webhook_action_reaches_a_server_pod_through_its_service(
    installed: Installed, deployed_namespace: str, fabric: Callable[..., tuple[str, list[str]]]
) -> None:
    """The attacher calls a webhook served by a pod on the real node, through a Service, and
    verifies it with the policy's caBundle (no cluster DNS here: the URL names the cluster IP,
    which the server certificate carries)."""
    import ipaddress

    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    from devcluster import pki

    api, namespace = installed.api, deployed_namespace
    driver = "webhook.fabric.example.com"
    assert installed.kubectl_dra("grant-driver", driver).returncode == 0
    device_class, _ = fabric(driver)
    service = api.create(
        f"/api/v1/namespaces/{namespace}/services",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "attach-webhook"},
            "spec": {"selector": {"app": "attach-webhook"}, "ports": [{"port": 443, "targetPort": 8443}]},
        },
    )
    cluster_ip = service["spec"]["clusterIP"]
    authority = pki.Authority.create("attach-webhook CA")
    cert, key = authority.issue(
        pki.name("attach-webhook"),
        ExtendedKeyUsageOID.SERVER_AUTH,
        [x509.IPAddress(ipaddress.ip_address(cluster_ip))],
    )
    api.create(
        f"/api/v1/namespaces/{namespace}/secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "attach-webhook-tls"},
            "type": "kubernetes.io/tls",
            "stringData": {"tls.crt": cert.decode(), "tls.key": key.decode()},
        },
    )
    api.create(
        f"/api/v1/namespaces/{namespace}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "attach-webhook", "labels": {"app": "attach-webhook"}},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {
                        "name": "server",
                        "image": installed.published.image,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["python3", "-c", WEBHOOK_SERVER],
                        "ports": [{"containerPort": 8443}],
                        "readinessProbe": {"tcpSocket": {"port": 8443}, "periodSeconds": 1},
                        "volumeMounts": [{"name": "tls", "mountPath": "/tls", "readOnly": True}],
                    }
                ],
                "volumes": [{"name": "tls", "secret": {"secretName": "attach-webhook-tls"}}],
            },
        },
    )

    def ready() -> bool:
        pod = api.get_or_none(f"/api/v1/namespaces/{namespace}/pods/attach-webhook")
        conditions = {c["type"]: c["status"] for c in (pod or {}).get("status", {}).get("conditions", [])}
        return conditions.get("Ready") == "True"

    wait_for(ready, 120, "the webhook server pod to be ready")
    policy = {
        "apiVersion": "dra-operators.io/v1alpha1",
        "kind": "DeviceAttachPolicy",
        "metadata": {"name": "webhook"},
        "spec": {
            "driver": driver,
            "action": {
                "kind": "Webhook",
                "webhook": {"url": f"https://{cluster_ip}/attach", "caBundle": authority.cert_pem.decode()},
            },
        },
    }
    api.create(POLICIES, policy)
    wait_for(lambda: policy_ready(api, "webhook"), 60, "the webhook policy to be Ready")
    _fabric_pod(api, namespace, device_class)
    device = wait_for(lambda: _bound_device(api, namespace, "trainer"), 90, "the pod to be bound")
    claim = api.get(f"{RESOURCE}/namespaces/{namespace}/resourceclaims/trainer-fabric")
    conditions = [
        c for e in claim["status"]["devices"] if e["device"] == device for c in e.get("conditions", [])
    ]
    attached = [c for c in conditions if c["type"] == f"{driver}/attached"]
    assert attached, conditions
    assert attached[0]["status"] == "True"
    assert "by the webhook pod" in attached[0].get("message", ""), attached


# -- steadiness, memory, uninstall -------------------------------------------------------------


def _memory_cgroup(node: realnode.NodeLayout, pod: dict[str, Any]) -> Path:
    """The (cgroup v1) memory cgroup of the pod's first container."""
    container_id = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    root = Path("/sys/fs/cgroup/memory") / node.cgroup_parent / "kubepods"
    # The kubelet's cgroupfs layout, by QoS class; not a walk of the tree, which races with other
    # pods' cgroups being removed.
    pod_dir = f"pod{pod['metadata']['uid']}"
    candidates = [root / qos / pod_dir / container_id for qos in ("", "burstable", "besteffort")]
    found: list[Path] = [path for path in candidates if path.is_dir()]
    assert found, f"no memory cgroup for container {container_id} under {root}"
    return found[0]


def _working_set(node: realnode.NodeLayout, pod: dict[str, Any]) -> int:
    """The container cgroup's working set (usage minus inactive file pages), as the kubelet
    reports it for cgroup v1."""
    cgroup = _memory_cgroup(node, pod)
    usage = int((cgroup / "memory.usage_in_bytes").read_text())
    stat = dict(line.split() for line in (cgroup / "memory.stat").read_text().splitlines())
    return max(usage - int(stat.get("total_inactive_file", "0")), 0)


def _memory(installed: Installed) -> dict[str, dict[str, Any]]:
    """Each operator's working set now, checked against its limit."""
    assert installed.cluster.state is not None
    node = installed.cluster.state.node_layout
    memory = {}
    for name, pod in _operator_pods(installed.api).items():
        used = _working_set(node, pod)
        limit = pod["spec"]["containers"][0]["resources"]["limits"]["memory"]
        memory[name] = {"working_set_mib": round(used / 2**20, 1), "limit": limit}
        assert used < parse_quantity(limit).as_fraction(), f"{name} uses {used} bytes, limit {limit}"
    return memory


def _restarts(pods: dict[str, dict[str, Any]]) -> dict[str, int]:
    return {
        name: sum(s.get("restartCount", 0) for s in pod["status"].get("containerStatuses", []))
        for name, pod in pods.items()
    }


def test_no_operator_restarts_and_memory_stays_under_the_limits(installed: Installed) -> None:
    api = installed.api
    deadline = installed.available_at + NO_RESTART_WINDOW

    # Observed for the whole window: a restart fails at once, not at the end.
    while True:
        counts = _restarts(_operator_pods(api))
        assert set(counts.values()) == {0}, f"restarts: {counts}"
        if time.monotonic() >= deadline:
            break
        time.sleep(5)
    installed.measurements["memory_after_stories"] = _memory(installed)


NEXT_OVERLAY = REPO_ROOT / "e2e" / "deployed-next"


def test_three_rollouts_in_the_middle_of_template_bursts_lose_and_duplicate_nothing(
    installed: Installed, deployed_namespace: str
) -> None:
    """``kubectl apply -k`` of the image by another reference over the running install (the tag
    ``next``, then the digest again), three times, each in the middle of 500 template pods: every
    Deployment rolls its pod (the Lease passes from the old pod to the new), and every pod ends
    with exactly one claim."""
    by_tag = support.tag_next(installed)
    by_digest = installed.published.image

    def apply(overlay: Path) -> Callable[[], object]:
        return lambda: installed.kubectl("apply", "-k", str(overlay), timeout=180)

    to_next = apply(support.registry_overlay(installed.cluster, NEXT_OVERLAY, by_digest=False))
    rolls = [
        (by_tag, to_next),
        (by_digest, apply(support.registry_overlay(installed.cluster, OVERLAY))),
        (by_tag, to_next),
    ]
    installed.measurements["kubectl_rollout_seconds"] = support.bursts_through_rollouts(
        installed, deployed_namespace, rolls
    )


HA_OVERLAY = REPO_ROOT / "e2e" / "deployed-ha"
BURST = 200
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"


def _holder(api: Kube, operator: str) -> str | None:
    lease = api.get_or_none(f"{LEASES}/dra-operators-{operator}")
    return None if lease is None else lease["spec"].get("holderIdentity")


def _all_have_two_replicas(api: Kube) -> bool:
    deployments = api.list(DEPLOYMENTS)
    return len(deployments) == len(OPERATOR_NAMES) and all(
        d["status"].get("availableReplicas") == 2 == d["status"].get("updatedReplicas")
        and d["status"].get("replicas") == 2
        for d in deployments
    )


def test_ha_standby_takes_over_in_the_middle_of_a_burst(
    installed: Installed, deployed_namespace: str
) -> None:
    """The ha overlay applied over the running install; the resourceclaim leader's pod deleted
    halfway through 200 template pods: the standby holds the Lease within 20 s, and every pod
    ends with exactly one claim."""
    api, namespace = installed.api, deployed_namespace
    installed.kubectl(
        "apply", "-k", str(support.registry_overlay(installed.cluster, HA_OVERLAY)), timeout=180
    )
    wait_for(lambda: _all_have_two_replicas(api), 300, "two available replicas of every operator")
    leader = wait_for(lambda: _holder(api, "resourceclaim"), 60, "a resourceclaim leader")
    assert leader is not None
    absent_template(api, namespace)
    names = [f"burst-{i}" for i in range(BURST)]
    deleted_at = 0.0
    for index, name in enumerate(names):
        if index == BURST // 2:
            api.delete(f"{OPERATOR_PODS}/{leader}")
            deleted_at = time.time()
        placeholder_pods(api, namespace, [name])
    successor = wait_for(
        lambda: (holder := _holder(api, "resourceclaim")) != leader and holder,
        60,
        "the standby to take the Lease",
    )
    assert successor
    # The same machine's clock wrote acquireTime: the hand-over as the Lease records it.
    acquired = api.get(f"{LEASES}/dra-operators-resourceclaim")["spec"]["acquireTime"]
    handover = datetime.fromisoformat(acquired.replace("Z", "+00:00")).timestamp() - deleted_at
    installed.measurements["ha_lease_handover_seconds"] = round(handover, 2)
    assert handover <= 20, f"the standby took the Lease {handover:.1f} s after the leader's deletion"

    wait_for(
        lambda: all_recorded(api, namespace, BURST), 180, f"all {BURST} pods to have their claim recorded"
    )
    assert_exactly_one_claim_each(api, namespace, names)
    assert installed.cluster.state is not None
    node = installed.cluster.state.node_layout
    leader_pod = api.get(f"{OPERATOR_PODS}/{successor}")
    installed.measurements["resourceclaim_working_set_mib_after_burst"] = round(
        _working_set(node, leader_pod) / 2**20, 1
    )


OUTAGE_SECONDS = 300.0


def _settled_pods(api: Kube) -> dict[str, dict[str, Any]] | None:
    pods = api.list(OPERATOR_PODS)
    settled = _all_have_two_replicas(api) and all(
        not p["metadata"].get("deletionTimestamp") and p["status"].get("podIP") for p in pods
    )
    return {p["metadata"]["name"]: p for p in pods} if settled else None


def test_an_api_server_outage_of_five_minutes_restarts_no_operator(
    installed: Installed, deployed_namespace: str
) -> None:
    """kube-apiserver stopped for five minutes under every replica of the ha install: each loses
    its Lease and starts over in its process, /healthz answers throughout, no container restarts,
    and afterwards every operator is Available again, leads, and serves a new template pod."""
    api, namespace = installed.api, deployed_namespace
    assert installed.cluster.state is not None
    directory = Path(installed.cluster.state.dir)
    # The previous test deleted a leader: its successor pod may still lack an IP, and the old one
    # may still be terminating, so the outage starts from a settled install.
    pods = wait_for(lambda: _settled_pods(api), 180, "every operator pod settled with an IP")
    assert pods is not None
    before = _restarts(pods)
    urls = {name: f"http://{pod['status']['podIP']}:8081/healthz" for name, pod in pods.items()}
    unanswered: dict[str, int] = {}
    launcher.stop_component(directory, "kube-apiserver")
    try:
        ends = time.monotonic() + OUTAGE_SECONDS
        while time.monotonic() < ends:
            # The outage is the scenario: these polls watch the liveness endpoint through it.
            for name, url in urls.items():
                if launcher.http_get(url)[0] != 200:
                    unanswered[name] = unanswered.get(name, 0) + 1
            time.sleep(5)
    finally:
        launcher.start_component(directory, "kube-apiserver")
    installed.measurements["outage_healthz_unanswered_polls"] = unanswered
    wait_for(lambda: not _available(api), 300, "every operator Deployment Available after the outage")
    after = {p["metadata"]["name"]: p for p in api.list(OPERATOR_PODS)}
    assert sorted(after) == sorted(pods), "operator pods were replaced"
    assert _restarts(after) == before
    for name in OPERATOR_NAMES:
        wait_for(functools.partial(_holder, api, name), 60, f"a {name} leader after the outage")
    absent_template(api, namespace)
    placeholder_pods(api, namespace, ["after-outage"])
    wait_for(functools.partial(all_recorded, api, namespace, 1), 120, "the claim of a pod created after it")
    assert_exactly_one_claim_each(api, namespace, ["after-outage"])


def test_uninstall_leaves_no_project_object(installed: Installed) -> None:
    """The order of docs/install.md, "Uninstall": the project's objects first (while the operators
    can still remove their finalizers), then ``kubectl delete -k``; the grants carry the project's
    label."""
    api = installed.api
    installed.kubectl(
        "delete",
        "deviceattachpolicies.dra-operators.io,devicetaintselectors.dra-operators.io,"
        "resourcepoolstatusrequests.dra-operators.io",
        "--all",
        "--wait=true",
        timeout=120,
    )
    pinned = support.registry_overlay(installed.cluster, OVERLAY)
    installed.kubectl("delete", "-k", str(pinned), "--wait=true", timeout=300)
    installed.kubectl(
        "delete",
        "clusterrole,clusterrolebinding",
        "-l",
        "app.kubernetes.io/part-of=dra-operators",
        timeout=60,
    )
    left = installed.kubectl(
        "get",
        "clusterroles,clusterrolebindings,crds,namespaces",
        "-l",
        "app.kubernetes.io/part-of=dra-operators",
        "-o",
        "name",
    ).stdout.split()
    assert left == []
    assert api.get_or_none(f"/api/v1/namespaces/{NAMESPACE}") is None
    crds = [
        c["metadata"]["name"] for c in api.list("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
    ]
    assert not [c for c in crds if c.endswith(".dra-operators.io")]


def test_three_helm_upgrades_in_the_middle_of_template_bursts_lose_and_duplicate_nothing(
    installed: Installed, deployed_namespace: str
) -> None:
    """After the uninstall above, the chart from the node's registry on the same cluster, as users
    install it; then ``helm upgrade`` to the image by another reference (the tag ``next``, then the
    digest again) three times, each in the middle of 500 template pods: every pod ends with exactly
    one claim."""
    api, cluster = installed.api, installed.cluster
    by_tag = support.tag_next(installed)
    by_digest = installed.published.image
    wait_for(
        lambda: api.get_or_none(f"/api/v1/namespaces/{NAMESPACE}") is None, 120, "the old namespace gone"
    )
    installed.kubectl("apply", "-f", str(REPO_ROOT / "manifests" / "namespace" / "namespace.yaml"))
    support.helm_chart(cluster, "install")
    wait_for(lambda: not _available(api), 300, "every operator Deployment to become Available")
    rolls = [
        (by_tag, lambda: support.helm_chart(cluster, "upgrade", tag=support.NEXT_TAG)),
        (by_digest, lambda: support.helm_chart(cluster, "upgrade")),
        (by_tag, lambda: support.helm_chart(cluster, "upgrade", tag=support.NEXT_TAG)),
    ]
    installed.measurements["helm_rollout_seconds"] = support.bursts_through_rollouts(
        installed, deployed_namespace, rolls
    )
