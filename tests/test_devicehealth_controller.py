"""The device-health controller against fakes: watch events into its cache, a sync into API calls
that its RBAC (API_CALLS) grants, and a restart that rebuilds its state from the cluster."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from devicehealth_builders import (
    GPU,
    RULES_API,
    at,
    claim_body,
    device,
    gpu,
    pod_body,
    policy_body,
    rule_body,
    slice_body,
)
from runtime_support import ServingClient

from operators.core.discovery import ServedResource
from operators.core.events import ObjectRef
from operators.core.keys import Key
from operators.core.reconcile import Done, Requeue
from operators.core.runtime import Runtime
from operators.devicehealth.controller import POLICY, RESYNC_KEY, DeviceHealthController
from operators.devicehealth.operator import API_CALLS

RULES = "/apis/resource.k8s.io/v1/devicetaintrules"
KEY = Key(POLICY, "", "gpu-health")


SERVED = {
    "/apis/resource.k8s.io/v1": {
        "resources": [{"name": "resourceslices"}, {"name": "deviceclasses"}, {"name": "resourceclaims"}]
    },
    "/apis/dra-operators.io/v1alpha1": {"resources": [{"name": "devicehealthpolicies"}]},
}


@dataclass
class FakeQueue:
    added: list[tuple[Key, float]] = field(default_factory=list)
    periodic: list[tuple[Key, float]] = field(default_factory=list)

    def add_after(self, key: Key, delay: float) -> None:
        self.added.append((key, delay))

    def every(self, key: Key, interval: float, **_: Any) -> None:
        self.periodic.append((key, interval))


@dataclass
class FakeEvents:
    recorded: list[tuple[ObjectRef, str, str]] = field(default_factory=list)

    def record(self, obj: ObjectRef, type_: str, reason: str, message: str) -> None:
        self.recorded.append((obj, type_, reason))


@dataclass
class FakeRuntime:
    client: ServingClient = field(default_factory=lambda: ServingClient({**SERVED}))
    queue: FakeQueue = field(default_factory=FakeQueue)
    events: FakeEvents = field(default_factory=FakeEvents)
    field_manager: str = "dra-operators-devicehealth"
    served: dict[tuple[str, str], ServedResource | None] = field(
        default_factory=lambda: {("resource.k8s.io", "devicetaintrules"): RULES_API}
    )

    def served_resource(self, group: str, plural: str) -> ServedResource | None:
        return self.served.get((group, plural))


async def started(now: datetime) -> tuple[DeviceHealthController, FakeRuntime]:
    runtime = FakeRuntime()
    controller = DeviceHealthController(cast(Runtime, runtime))
    controller.now = lambda: now
    assert await controller.prepare()
    assert runtime.queue.periodic == [(RESYNC_KEY, 60.0)]
    return controller, runtime


def granted(calls: list[tuple[str, str, Any]]) -> None:
    """Every call the sync made is one the operator's RBAC grants."""
    resources = {
        "devicetaintrules": ("resource.k8s.io", "devicetaintrules"),
        "status": ("dra-operators.io", "devicehealthpolicies/status"),
    }
    for verb, path, _ in calls:
        kind = "status" if path.endswith("/status") else "devicetaintrules"
        assert (*resources[kind], verb) in API_CALLS, (verb, path)


async def test_a_slice_taint_held_for_after_is_tainted_and_status_applied() -> None:
    controller, runtime = await started(at(61))
    controller.upsert_policy(policy_body(evictions_per_minute=6))
    controller.upsert_slice(slice_body("node-1", device("gpu-0", unhealthy_since=at(0)), device("gpu-1")))
    assert (KEY, 0.0) in runtime.queue.added
    assert await controller.sync(KEY) == Done()
    creates = [c for c in runtime.client.calls if c[0] == "create"]
    assert [(path, body["spec"]["deviceSelector"]["device"]) for _, path, body in creates] == [
        (RULES, "gpu-0")
    ]
    applied = [body for verb, path, body in runtime.client.calls if path.endswith("/status")]
    assert applied[0]["status"]["taintedDevices"] == 1
    assert controller.counts["gpu-health"].tainted == 1
    assert [reason for _, _, reason in runtime.events.recorded] == ["DeviceTainted"]
    granted(runtime.client.calls)


async def test_pods_without_claims_never_reach_the_cache() -> None:
    controller, runtime = await started(at(0))
    controller.upsert_policy(policy_body())
    runtime.queue.added.clear()
    controller.upsert_pod(
        {"metadata": {"name": "web", "namespace": "a"}, "spec": {"containers": [{"name": "c"}]}}
    )
    assert controller.cache.pods == {}
    assert runtime.queue.added == []
    reporting = pod_body(
        "train", {"claim:gpu/gpu": [(f"{GPU}/node-1/gpu-0", "Unhealthy")]}, claims={"gpu": "c"}
    )
    controller.upsert_pod(reporting)
    assert set(controller.cache.pods) == {("team-a", "train")}
    assert runtime.queue.added == [(KEY, 1.0)]
    controller.delete_pod(reporting)
    assert controller.cache.pods == {}


async def test_after_a_restart_the_rule_is_kept_and_cleared_only_clear_after_from_first_sight() -> None:
    owned = gpu("node-1", "gpu-0")
    controller, runtime = await started(at(0))
    controller.upsert_policy(policy_body())
    controller.upsert_slice(slice_body("node-1", device("gpu-0"), device("gpu-1")))
    controller.upsert_rule(rule_body(owned))
    controller.upsert_claim(claim_body("c", ("gpu", "node-1", "gpu-0"), pods=("trainer",)))
    # Another owner's rule is none of the policy's business.
    controller.upsert_rule(
        {**rule_body(gpu("node-1", "gpu-1")), "metadata": {"name": "users-own", "uid": "u"}}
    )
    assert set(controller.cache.rules) == {rule_body(owned)["metadata"]["name"]}
    result = await controller.sync(KEY)
    assert isinstance(result, Requeue)
    assert result.after == 600.0
    assert [c for c in runtime.client.calls if c[0] != "patch"] == []
    controller.now = lambda: at(600)
    assert await controller.sync(KEY) == Done()
    deletes = [(path, body) for verb, path, body in runtime.client.calls if verb == "delete"]
    name = rule_body(owned)["metadata"]["name"]
    assert deletes == [
        (
            f"{RULES}/{name}",
            {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": f"uid-{name}"}},
        )
    ]
    granted(runtime.client.calls)


async def test_a_rule_the_policy_controls_under_another_version_of_its_group_is_still_its_own() -> None:
    controller, _ = await started(at(0))
    body = rule_body(gpu("node-1", "gpu-0"))
    [owner] = body["metadata"]["ownerReferences"]
    body["metadata"]["ownerReferences"] = [{**owner, "apiVersion": "dra-operators.io/v1beta1"}]
    controller.upsert_rule(body)
    name = body["metadata"]["name"]
    assert set(controller.cache.rules) == {name}
    assert controller.cache.rule_controllers[name] == owner["uid"]


async def test_a_rule_of_someone_elses_with_the_policys_rule_name_holds_the_device_until_it_goes() -> None:
    sick = gpu("node-1", "gpu-0")
    controller, runtime = await started(at(61))
    controller.upsert_policy(policy_body())
    controller.upsert_slice(slice_body("node-1", device("gpu-0", unhealthy_since=at(0)), device("gpu-1")))
    # A user's rule under the very name the policy's rule for gpu-0 would take, owned by nobody.
    namesake = {**rule_body(sick), "metadata": {"name": rule_body(sick)["metadata"]["name"], "uid": "u"}}
    runtime.queue.added.clear()
    controller.upsert_rule(namesake)
    assert [key for key, _ in runtime.queue.added] == [KEY]
    assert await controller.sync(KEY) == Done()
    assert [c for c in runtime.client.calls if c[0] == "create"] == []
    (applied,) = [body for verb, path, body in runtime.client.calls if path.endswith("/status")]
    assert [(d["device"], d["state"]) for d in applied["status"]["devices"]] == [("gpu-0", "Conflict")]
    assert applied["status"]["taintedDevices"] == 0
    assert [reason for _, _, reason in runtime.events.recorded] == ["RuleConflict"]

    # Its deletion concerns every policy: the next pass creates the policy's own rule.
    runtime.queue.added.clear()
    controller.delete_rule(namesake)
    assert [key for key, _ in runtime.queue.added] == [KEY]
    assert await controller.sync(KEY) == Done()
    creates = [body["metadata"]["name"] for verb, _, body in runtime.client.calls if verb == "create"]
    assert creates == [namesake["metadata"]["name"]]
    granted(runtime.client.calls)


async def test_an_unparsable_policy_is_skipped_and_a_bad_one_is_not_ready() -> None:
    controller, runtime = await started(at(0))
    controller.upsert_policy({"metadata": {"name": "broken"}, "spec": {"scope": "everything"}})
    assert controller.cache.policies == {}
    controller.upsert_policy(policy_body(signals={"after": "60s"}))
    assert await controller.sync(KEY) == Done()
    (apply,) = [body for verb, path, body in runtime.client.calls if path.endswith("/status")]
    (ready,) = [c for c in apply["status"]["conditions"] if c["type"] == "Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "NoSignal")
    assert [reason for _, _, reason in runtime.events.recorded] == ["InvalidPolicy"]


async def test_the_resync_passes_over_every_policy_and_a_deleted_policy_is_forgotten() -> None:
    controller, runtime = await started(at(0))
    controller.upsert_policy(policy_body())
    runtime.queue.added.clear()
    assert await controller.sync(RESYNC_KEY) == Done()
    assert runtime.queue.added == [(KEY, 0.0)]
    await controller.sync(KEY)
    assert "gpu-health" in controller.counts
    controller.delete_policy(policy_body())
    assert controller.counts == {}
    assert controller.tracks == {}
    assert await controller.sync(KEY) == Done("deleted: its rules go with it (owner references)")
