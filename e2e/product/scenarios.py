"""What each ``demo/`` folder's README promises under "The outcome", checked against the API.

``STORIES[name](api, player, scenario)`` plays the scenario with the player and reads the
objects back. The same checks run with the operators on the host (``e2e/product/test_demo.py``, as
``make demo`` runs them) and deployed as Pods from the shipped manifests (``e2e/product/test_deployed.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from demo import cleanup
from demo.player import Played, Player
from demo.scenarios import Scenario
from devcluster.kube import Kube, wait_for
from e2e.poolstatus.support import complete

RESOURCE = "/apis/resource.k8s.io/v1"
RPSR = "/apis/dra-operators.io/v1alpha1/resourcepoolstatusrequests"
BUILTIN_RPSR = "/apis/resource.k8s.io/v1alpha3/resourcepoolstatusrequests"
CLAIM_NAME = re.compile(r"^(?P<pod>trainer-[01])-gpu-[bcdfghjklmnpqrstvwxz2456789]{5}$")
DRY_RUN_MESSAGE = (
    "3 published devices selected. 1 allocated device selected. 1 pod would be evicted in 1 namespace "
    "if the effect was NoExecute. This information will not be updated again. Recreate the "
    "DeviceTaintRule to trigger an update."
)
GPU_DRIVER = "gpu.partitions.demo.example.com"
HEALTH_DRIVER = "gpu.health.demo.example.com"
HEALTH_POLICIES = "/apis/dra-operators.io/v1alpha1/devicehealthpolicies"
HEALTH_RULES = "app.kubernetes.io/managed-by=dra-operators-devicehealth"
GPU_POOL = {
    "driver": GPU_DRIVER,
    "poolName": "partitions-node",
    "nodeName": "partitions-node",
    "generation": 1,
    "resourceSliceCount": 2,
    "totalDevices": 6,
    "allocatedDevices": 1,
    "availableDevices": 5,
    "unavailableDevices": 0,
    "partitionSummary": [
        {"attribute": f"{GPU_DRIVER}/profile", "type": "Full", "total": 2, "allocatable": 1},
        {"attribute": f"{GPU_DRIVER}/profile", "type": "Half", "total": 4, "allocatable": 3},
    ],
}
GPU_TABLE = """\
Pool gpu.partitions.demo.example.com/partitions-node (node partitions-node, generation 1, 2 slices)
  TOTAL  ALLOCATED  AVAILABLE  UNAVAILABLE  UTILISATION
  6      1          5          0            ###.................  17%
  PARTITION TYPE  ATTRIBUTE                                TOTAL  ALLOCATABLE
  Full            gpu.partitions.demo.example.com/profile  2      1
  Half            gpu.partitions.demo.example.com/profile  4      3
  Partition types are alternative ways to use the same hardware: do not add them up.

Bars: # allocated, x unavailable (tainted), . available.
"""
NIC_SUMMARY = {
    "fullyAvailableDevices": 1,
    "partiallyAvailableDevices": 2,
    "capacity": [{"name": "bandwidth", "total": "40Gi", "consumed": "22Gi", "available": "18Gi"}],
}


def _output(played: list[Played], command_start: str) -> str:
    (found,) = [p.output for p in played if p.step.command.startswith(command_start)]
    return found


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition["type"] == type_:
            return dict(condition)
    return None


def _eviction_progress(api: Kube, rule: str) -> dict[str, Any]:
    """The fields of a DeviceTaintRule's EvictionInProgress condition that a story promises."""
    condition = _condition(api.get(f"{RESOURCE}/devicetaintrules/{rule}"), "EvictionInProgress")
    assert condition is not None
    return {k: condition[k] for k in ("status", "reason", "message", "observedGeneration")}


def _events(api: Kube, namespace: str, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in api.list(f"/api/v1/namespaces/{namespace}/events")
        if e["involvedObject"].get("name") == name
    ]


def play_claims_from_templates(api: Kube, player: Player, scenario: Scenario) -> None:
    ns = scenario.namespace
    cut = scenario.index("kubectl delete pod trainer-1 -n demo-templates")
    player.play(scenario, stop=cut)

    pods = {p["metadata"]["name"]: p for p in api.list(f"/api/v1/namespaces/{ns}/pods")}
    claims = api.list(f"{RESOURCE}/namespaces/{ns}/resourceclaims")
    template = api.get(f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates/one-gpu")
    assert len(claims) == 2, [c["metadata"]["name"] for c in claims]
    devices = set()
    for claim in claims:
        meta = claim["metadata"]
        match = CLAIM_NAME.match(meta["name"])
        assert match, meta["name"]
        pod = pods[match["pod"]]
        owner = {"apiVersion": "v1", "kind": "Pod", "name": match["pod"], "uid": pod["metadata"]["uid"]}
        assert meta["ownerReferences"] == [{**owner, "controller": True}]
        assert meta["annotations"] == {"resource.kubernetes.io/pod-claim-name": "gpu"}
        assert meta["labels"] == {"app": "trainer"}
        assert claim["spec"] == template["spec"]["spec"]
        assert pod["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": meta["name"]}]
        assert pod["spec"]["nodeName"] == "templates-node"
        assert claim["status"]["reservedFor"] == [
            {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
        ]
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        devices.add(result["device"])
    assert devices == {"gpu-0", "gpu-1"}
    kept = next(c["metadata"]["name"] for c in claims if c["metadata"]["name"].startswith("trainer-0-"))

    player.play(scenario, start=cut)  # its last step waits until only trainer-0's claim is left
    (left,) = api.list(f"{RESOURCE}/namespaces/{ns}/resourceclaims")
    assert left["metadata"]["name"] == kept
    assert left["status"]["allocation"]


def play_noexecute_eviction(api: Kube, player: Player, scenario: Scenario) -> None:
    ns = scenario.namespace
    played = player.play(scenario)

    batch = api.get(f"/api/v1/namespaces/{ns}/pods/batch")
    monitor = api.get(f"/api/v1/namespaces/{ns}/pods/monitor")
    disruption = _condition(batch, "DisruptionTarget")
    assert disruption is not None
    assert (disruption["status"], disruption["reason"]) == ("True", "DeletionByDeviceTaintManager")
    assert batch["metadata"].get("deletionTimestamp")
    assert _condition(monitor, "DisruptionTarget") is None
    assert not monitor["metadata"].get("deletionTimestamp")
    (event,) = [e for e in _events(api, ns, "batch") if e["reason"] == "DeviceTaintManagerEviction"]
    assert (event["type"], event["message"]) == ("Normal", "Marking for deletion")
    assert event["source"]["component"] == "dra-operators-devicetaint"
    assert not [e for e in _events(api, ns, "monitor") if e["reason"] == "DeviceTaintManagerEviction"]
    assert _eviction_progress(api, "gpu-maintenance") == {
        "status": "False",
        "reason": "Completed",
        "message": "1 pod evicted since starting the controller.",
        "observedGeneration": 1,
    }
    assert "Terminating" in _output(played, "kubectl get pods")


def play_dry_run(api: Kube, player: Player, scenario: Scenario) -> None:
    ns = scenario.namespace
    played = player.play(scenario)

    assert _eviction_progress(api, "drain-preview") == {
        "status": "False",
        "reason": "NoEffect",
        "message": DRY_RUN_MESSAGE,
        "observedGeneration": 1,
    }
    pod = api.get(f"/api/v1/namespaces/{ns}/pods/inference")
    assert _condition(pod, "DisruptionTarget") is None
    assert not pod["metadata"].get("deletionTimestamp")
    assert not [e for e in _events(api, ns, "inference") if e["reason"] == "DeviceTaintManagerEviction"]
    device = api.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims/inference-gpu")["status"]["allocation"][
        "devices"
    ]["results"][0]["device"]

    table = _output(played, "kubectl dra taint-preview")
    assert table.splitlines()[1] == (
        "devicetaint operator (dry run): 3 published devices selected. 1 allocated device selected. "
        "1 pod would be evicted in 1 namespace if the effect was NoExecute."
    )
    assert re.search(rf"^demo-dry-run/inference-gpu +dry-run-node/{device} +at once$", table, re.M), table
    assert re.search(r"^demo-dry-run/inference +dry-run-node +inference-gpu +at once$", table, re.M), table

    done = player.run(
        "kubectl dra taint-preview driver=gpu.dry-run.demo.example.com,pool=dry-run-node "
        "--key example.com/maintenance -o json"
    )
    assert done.returncode == 0, done.stderr
    preview = json.loads(done.stdout)
    assert preview["dryRun"] == {
        "publishedDevices": 3,
        "allocatedDevices": 1,
        "pods": 1,
        "namespaces": 1,
        "message": DRY_RUN_MESSAGE.split(" This information")[0],
    }
    assert [d["device"] for d in preview["devices"]] == ["gpu-0", "gpu-1", "gpu-2"]
    assert [(c["name"], c["evictionAfterSeconds"]) for c in preview["claims"]] == [("inference-gpu", 0)]
    assert [(p["name"], p["nodeName"], p["evictionAfterSeconds"]) for p in preview["pods"]] == [
        ("inference", "dry-run-node", 0)
    ]
    left = [r["metadata"]["name"] for r in api.list(f"{RESOURCE}/devicetaintrules")]
    assert not [name for name in left if name.startswith("kubectl-dra-")], f"the plugin left rules: {left}"


def _request_status(api: Kube, path: str) -> dict[str, Any]:
    status: dict[str, Any] = api.get(path)["status"]
    (condition,) = status["conditions"]
    assert {k: condition[k] for k in ("type", "status", "reason", "message")} == complete(1)
    assert status["poolCount"] == 1
    return status


def _no_plugin_requests(api: Kube) -> None:
    for path in (RPSR, BUILTIN_RPSR):
        left = [
            r["metadata"]["name"] for r in api.list(path) if r["metadata"]["name"].startswith("kubectl-dra-")
        ]
        assert not left, f"the plugin left requests behind: {left}"


def play_gpu_pool_status(api: Kube, player: Player, scenario: Scenario) -> None:
    played = player.play(scenario)

    assert _request_status(api, f"{RPSR}/partitioned-gpus")["pools"] == [GPU_POOL]
    assert _output(played, "kubectl dra pools") == GPU_TABLE

    for api_choice, api_version in (
        ("auto", "dra-operators.io/v1alpha1"),
        ("builtin", "resource.k8s.io/v1alpha3"),
    ):
        done = player.run(f"kubectl dra pools --driver {GPU_DRIVER} --api {api_choice} -o json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {
            "apiVersion": api_version,
            "requests": [
                {
                    "driver": GPU_DRIVER,
                    "poolCount": 1,
                    "condition": complete(1),
                }
            ],
            "pools": [GPU_POOL],
        }
    _no_plugin_requests(api)


def play_shareable_nic_pool(api: Kube, player: Player, scenario: Scenario) -> None:
    played = player.play(scenario)

    claims = api.list(f"{RESOURCE}/namespaces/{scenario.namespace}/resourceclaims")
    nics = {c["status"]["allocation"]["devices"]["results"][0]["device"] for c in claims}
    assert len(claims) == 3
    assert len(nics) == 3, "no two of 6Gi, 6Gi and 10Gi fit one 10Gi NIC"
    (pool,) = _request_status(api, f"{RPSR}/shared-nics")["pools"]
    assert {
        k: pool[k] for k in ("totalDevices", "allocatedDevices", "availableDevices", "unavailableDevices")
    } == {
        "totalDevices": 4,
        "allocatedDevices": 3,
        "availableDevices": 1,
        "unavailableDevices": 0,
    }
    assert pool["shareableSummary"] == NIC_SUMMARY
    table = _output(played, "kubectl dra pools")
    assert "  Shareable devices: 1 fully available, 2 partially available.\n" in table
    assert re.search(r"^  bandwidth +40Gi +22Gi +18Gi +#{11}\.{9}  55%$", table, re.M), table
    _no_plugin_requests(api)


def play_binding_conditions(api: Kube, player: Player, scenario: Scenario) -> None:
    ns = scenario.namespace
    player.play(scenario)

    policy = api.get("/apis/dra-operators.io/v1alpha1/deviceattachpolicies/fabric-gpus")
    for type_ in ("Accepted", "Authorized", "Ready"):
        condition = _condition(policy, type_)
        assert condition is not None
        assert condition["status"] == "True", condition
    claim = api.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims/fabric-gpu")
    (term,) = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    assert "matchExpressions" not in term
    (field,) = term["matchFields"]
    assert (field["key"], field["operator"]) == ("metadata.name", "In")
    (node,) = field["values"]
    assert node in ("fabric-node-a", "fabric-node-b")
    (entry,) = claim["status"]["devices"]
    result = claim["status"]["allocation"]["devices"]["results"][0]
    assert (entry["driver"], entry["pool"], entry["device"]) == (
        result["driver"],
        result["pool"],
        result["device"],
    )
    states = {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]}
    assert states["gpu.fabric.example.com/attached"] == ("True", "Attached")
    assert states["gpu.fabric.example.com/attach-failed"][0] == "False"
    pod = api.get(f"/api/v1/namespaces/{ns}/pods/trainer")
    assert pod["spec"]["nodeName"] == node
    assert "BindingConditionsPending" in {e["reason"] for e in _events(api, ns, "trainer")}

    uid = claim["metadata"]["uid"]
    records = "/apis/dra-operators.io/v1alpha1/namespaces/dra-operators/deviceattachments"
    assert len(api.list(records, labelSelector=f"dra-operators.io/claim-uid={uid}")) == 1
    cleanup.clean(api, scenario)
    wait_for(
        lambda: not api.list(records, labelSelector=f"dra-operators.io/claim-uid={uid}"),
        30,
        "the attacher to detach and forget the attachment",
    )


def play_device_health(api: Kube, player: Player, scenario: Scenario) -> None:
    ns = scenario.namespace
    repaired = scenario.index("python -m demo.fakedriver apply demo/device-health/5-gpu-1-repaired.yaml")
    player.play(scenario, stop=repaired)

    policy = api.get(f"{HEALTH_POLICIES}/gpu-health")
    (rule,) = api.list(f"{RESOURCE}/devicetaintrules", labelSelector=HEALTH_RULES)
    assert rule["spec"]["deviceSelector"] == {
        "driver": HEALTH_DRIVER,
        "pool": "health-node",
        "device": "gpu-1",
    }
    assert rule["spec"]["taint"]["effect"] == "NoExecute"
    (owner,) = rule["metadata"]["ownerReferences"]
    assert (owner["name"], owner["uid"], owner["controller"]) == (
        "gpu-health",
        policy["metadata"]["uid"],
        True,
    )
    status = policy["status"]
    assert (status["signalledDevices"], status["taintedDevices"], status["heldBackDevices"]) == (1, 1, 0)
    assert [(d["device"], d["state"]) for d in status["devices"]] == [("gpu-1", "Tainted")]
    trainer = api.get(f"/api/v1/namespaces/{ns}/pods/trainer")
    notebook = api.get(f"/api/v1/namespaces/{ns}/pods/notebook")
    disruption = _condition(trainer, "DisruptionTarget")
    assert disruption is not None
    assert (disruption["status"], disruption["reason"]) == ("True", "DeletionByDeviceTaintManager")
    assert trainer["metadata"].get("deletionTimestamp")
    assert _condition(notebook, "DisruptionTarget") is None
    assert not notebook["metadata"].get("deletionTimestamp")
    unhealthy = [e for e in _events(api, ns, "trainer") if e["reason"] == "DeviceUnhealthy"]
    assert [e["message"] for e in unhealthy] == [
        f"Device {HEALTH_DRIVER}/health-node/gpu-1 is unhealthy and tainted NoExecute "
        "by DeviceHealthPolicy gpu-health."
    ]

    player.play(scenario, start=repaired)  # its wait ends when the rule is deleted
    assert api.list(f"{RESOURCE}/devicetaintrules", labelSelector=HEALTH_RULES) == []
    status = api.get(f"{HEALTH_POLICIES}/gpu-health")["status"]
    assert (status["signalledDevices"], status["taintedDevices"], status["devices"]) == (0, 0, [])
    active = _condition({"status": status}, "Active")
    assert active is not None
    assert (active["status"], active["reason"], active["message"]) == (
        "False",
        "Idle",
        "No device is tainted.",
    )
    # Events outlive the policy: those of an earlier play carry another UID.
    uid = policy["metadata"]["uid"]
    reasons = [
        e["reason"] for e in _events(api, "default", "gpu-health") if e["involvedObject"].get("uid") == uid
    ]
    assert (reasons.count("DeviceTainted"), reasons.count("DeviceCleared")) == (1, 1), reasons


Story = Callable[[Kube, Player, Scenario], None]
STORIES: dict[str, Story] = {
    "claims-from-templates": play_claims_from_templates,
    "noexecute-eviction": play_noexecute_eviction,
    "dry-run": play_dry_run,
    "gpu-pool-status": play_gpu_pool_status,
    "shareable-nic-pool": play_shareable_nic_pool,
    "binding-conditions": play_binding_conditions,
    "device-health": play_device_health,
}
