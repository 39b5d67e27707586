"""The devicetaint I/O layer with a fake API: discovery (recorded 1.37.2 documents), writes, retries.

The fake client answers discovery from documents recorded on a 1.37.2 control plane (trimmed to the
fields discovery reads) and records every write; failures can be queued per method.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import pytest
from devicetaint_builders import KEY, P1, R1
from prometheus_client import REGISTRY
from runtime_support import unit_runtime

from operators.core import runtime as runtime_mod
from operators.core.client import STRATEGIC_MERGE_PATCH, ApiError
from operators.core.keys import Key
from operators.core.reconcile import Done, Requeue
from operators.core.runtime import follow_served_version, watched_kinds
from operators.core.settings import OperatorSettings
from operators.devicetaint.apis import served_apis
from operators.devicetaint.controller import DeviceTaintController
from operators.devicetaint.operator import DEFINITION
from operators.devicetaint.podeviction import BudgetRefusal, PodEvict, blocking_budget, budget_retry_delay
from operators.devicetaint.settings import Settings
from operators.dra.taintrules import EVICTIONS_PER_MINUTE

RESOURCES_V1 = [
    ("deviceclasses", "DeviceClass", False),
    ("devicetaintrules", "DeviceTaintRule", False),
    ("devicetaintrules/status", "DeviceTaintRule", False),
    ("resourceclaims", "ResourceClaim", True),
    ("resourceclaims/status", "ResourceClaim", True),
    ("resourceclaimtemplates", "ResourceClaimTemplate", True),
    ("resourceslices", "ResourceSlice", False),
]
RESOURCES_V1ALPHA3 = [
    ("devicetaintrules", "DeviceTaintRule", False),
    ("devicetaintrules/status", "DeviceTaintRule", False),
    ("resourcepoolstatusrequests", "ResourcePoolStatusRequest", False),
    ("resourcepoolstatusrequests/status", "ResourcePoolStatusRequest", False),
]
NO_RULES = [r for r in RESOURCES_V1 if not r[0].startswith("devicetaintrules")]


def document(version: str, resources: list[tuple[str, str, bool]]) -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "groupVersion": f"resource.k8s.io/{version}",
        "resources": [{"name": n, "kind": k, "namespaced": ns} for n, k, ns in resources],
    }


CLUSTER_1_37 = {
    "v1": document("v1", RESOURCES_V1),
    "v1beta2": document("v1beta2", RESOURCES_V1),
    "v1alpha3": document("v1alpha3", RESOURCES_V1ALPHA3),
}
# A 1.36 cluster with --runtime-config=resource.k8s.io/v1beta2=true: rules only in v1beta2.
CLUSTER_1_36_BETA = {"v1": document("v1", NO_RULES), "v1beta2": document("v1beta2", RESOURCES_V1)}
CLUSTER_WITHOUT_RULES = {"v1": document("v1", NO_RULES)}
CLUSTER_ALPHA_WITHOUT_STATUS = {
    "v1": document("v1", NO_RULES),
    "v1alpha3": document("v1alpha3", [("devicetaintrules", "DeviceTaintRule", False)]),
}


class FakeClient:
    def __init__(self, versions: dict[str, dict[str, Any]]) -> None:
        self.versions = versions
        # Other group versions' discovery documents, by path.
        self.documents: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str, Any]] = []
        self.failures: dict[str, list[ApiError]] = defaultdict(list)

    async def get(self, path: str, **params: str) -> Any:
        version = path.rsplit("/", 1)[-1]
        if path.startswith("/apis/resource.k8s.io/") and version in self.versions:
            return self.versions[version]
        if path in self.documents:
            return self.documents[path]
        raise ApiError(404, "NotFound", path)

    async def request(self, method: str, path: str, *, body: Any = None, **kwargs: Any) -> Any:
        if method == "PATCH":
            body = {"type": kwargs.get("content_type", ""), "body": body}
        self.calls.append((method, path, body))
        if self.failures[method]:
            raise self.failures[method].pop(0)
        return {}

    async def create(self, path: str, body: dict[str, Any], **params: str) -> Any:
        return await self.request("POST", path, body=body)

    async def patch(self, path: str, body: dict[str, Any], content_type: str = "", **params: str) -> Any:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    async def apply(
        self, path: str, body: dict[str, Any], field_manager: str, force: bool = True, want_reply: bool = True
    ) -> Any:
        return await self.request(
            "APPLY", path, body={"manager": field_manager, "force": force, "body": body}
        )

    def writes(self, method: str) -> list[tuple[str, Any]]:
        return [(path, body) for m, path, body in self.calls if m == method]


def make_controller(
    versions: dict[str, dict[str, Any]], settings: OperatorSettings | None = None
) -> tuple[DeviceTaintController, FakeClient]:
    client = FakeClient(versions)
    runtime = unit_runtime(
        client,
        "devicetaint",
        settings or Settings(),
        kinds=DEFINITION.kinds,
        field_manager="dra-operators-devicetaint",
    )
    controller = DeviceTaintController(runtime)
    runtime.controller = controller
    return controller, client


RULES = next(watch for watch in DEFINITION.watches if watch.plural == "devicetaintrules")


async def start(controller: DeviceTaintController) -> bool:
    """What the runtime does before the watches: discovery of every declared kind (the rule
    watch's version among them), then prepare() if the required kinds are served."""
    return await controller.runtime.prepare()


def watched_rule_versions(controller: DeviceTaintController) -> list[str]:
    return [
        kind.version
        for kind in watched_kinds(DEFINITION.watches, controller.runtime)
        if kind.plural == RULES.plural
    ]


def slice_body(taints: list[dict[str, Any]]) -> dict[str, Any]:
    device: dict[str, Any] = {"name": "gpu-0", **({"taints": taints} if taints else {})}
    return {
        "metadata": {"name": "node-1-slice", "uid": "S1"},
        "spec": {
            "driver": "dra.example.com",
            "pool": {"name": "node-1", "generation": 1},
            "devices": [device],
        },
    }


CLAIM: dict[str, Any] = {
    "metadata": {"name": "c1", "namespace": "ns1", "uid": "C1"},
    "status": {
        "allocation": {
            "devices": {"results": [{"driver": "dra.example.com", "pool": "node-1", "device": "gpu-0"}]}
        },
        "reservedFor": [{"resource": "pods", "name": "p1", "uid": "U1"}],
    },
}
POD: dict[str, Any] = {
    "metadata": {"name": "p1", "namespace": "ns1", "uid": "U1"},
    "spec": {"nodeName": "node-1", "resourceClaims": [{"name": "gpu", "resourceClaimName": "c1"}]},
}
TAINT = {"key": KEY, "value": "Broken", "effect": "NoExecute", "timeAdded": "2026-03-01T12:00:00Z"}


def fixture_f(controller: DeviceTaintController, taints: list[dict[str, Any]]) -> None:
    controller.upsert_slice(slice_body(taints))
    controller.upsert_claim(CLAIM)
    controller.upsert_pod(POD)


# --- Discovery ------------------------------------------------------------------------------------------


async def test_1_37_watches_v1_rules_with_status() -> None:
    controller, _ = make_controller(CLUSTER_1_37)
    assert await controller.runtime.discover() == [], "claims and slices are served"
    apis = served_apis(controller.runtime)
    assert apis.rules is not None
    assert apis.rules.api_version == "resource.k8s.io/v1"
    assert apis.rule_status_writable


async def sync_example_rule(cluster: dict[str, dict[str, Any]]) -> tuple[DeviceTaintController, FakeClient]:
    """Start on ``cluster``, then sync a rule that taints nothing; the client holds its writes."""
    controller, client = make_controller(cluster)
    assert await start(controller)
    controller.upsert_rule(
        {"metadata": {"name": "example", "uid": "R1", "generation": 1}, "spec": {"taint": TAINT}}
    )
    await controller.sync(R1)
    return controller, client


async def test_only_v1beta2_serves_rules() -> None:
    controller, client = await sync_example_rule(CLUSTER_1_36_BETA)
    assert watched_rule_versions(controller) == ["v1beta2"]
    ((path, body),) = client.writes("APPLY")
    assert path == "/apis/resource.k8s.io/v1beta2/devicetaintrules/example/status"
    assert body["manager"] == "dra-operators-devicetaint"
    assert body["force"] is True
    assert body["body"]["apiVersion"] == "resource.k8s.io/v1beta2"
    assert body["body"]["metadata"] == {"name": "example", "uid": "R1"}
    (condition,) = body["body"]["status"]["conditions"]
    assert (condition["type"], condition["reason"], condition["message"]) == (
        "EvictionInProgress",
        "NotStarted",
        "",
    )


async def test_without_rule_api_slice_taints_still_evict(caplog: pytest.LogCaptureFixture) -> None:
    controller, client = make_controller(CLUSTER_WITHOUT_RULES)
    assert await start(controller)
    assert watched_rule_versions(controller) == []
    assert "DeviceTaintRules are ignored" in caplog.text
    fixture_f(controller, [TAINT])
    await controller.sync(P1)
    await controller.runtime.events.drain(5)
    assert sorted(m for m, _, _ in client.calls) == ["DELETE", "PATCH", "POST"]


async def test_rule_status_not_written_without_status_subresource() -> None:
    controller, client = await sync_example_rule(CLUSTER_ALPHA_WITHOUT_STATUS)
    assert watched_rule_versions(controller) == ["v1alpha3"]
    assert client.writes("APPLY") == []


async def test_not_ready_without_claims_and_slices(caplog: pytest.LogCaptureFixture) -> None:
    controller, _ = make_controller({"v1alpha3": document("v1alpha3", RESOURCES_V1ALPHA3)})
    assert not await start(controller)
    assert (
        "required APIs are not served: resourceclaims in resource.k8s.io/v1, resourceslices in "
        "resource.k8s.io/v1; not ready" in caplog.text
    )
    assert "DeviceTaintRules are" not in caplog.text, "prepare() is not called"


PODGROUPS_V1ALPHA2 = {
    "/apis/scheduling.k8s.io/v1alpha2": {
        "groupVersion": "scheduling.k8s.io/v1alpha2",
        "resources": [{"name": "podgroups", "kind": "PodGroup", "namespaced": True}],
    }
}


@pytest.mark.parametrize(
    ("mode", "documents", "ready", "enabled"),
    [
        ("auto", PODGROUPS_V1ALPHA2, True, True),
        ("auto", {}, True, False),
        ("on", {}, False, False),
        ("off", PODGROUPS_V1ALPHA2, True, False),
    ],
)
async def test_podgroup_claims_follow_what_the_runtime_found(
    mode: str, documents: dict[str, Any], ready: bool, enabled: bool
) -> None:
    controller, client = make_controller(CLUSTER_1_37, Settings.model_validate({"workload_claims": mode}))
    client.documents.update(documents)
    assert await start(controller) is ready
    assert controller.cache.workload_claims is enabled
    followed = runtime_mod.followed_watches(DEFINITION.kinds, controller.runtime)
    assert ("podgroups" in [kind.plural for kind in followed]) is (mode != "off")


async def test_changed_rule_api_stops_the_process_after_two_sightings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runtime_mod, "REDISCOVERY_SECONDS", 0.0)
    controller, client = make_controller(CLUSTER_WITHOUT_RULES)
    assert await start(controller)
    client.versions = CLUSTER_1_37
    await asyncio.wait_for(follow_served_version(controller.runtime, RULES), 5)
    assert controller.runtime._stop.is_set()


# --- Pod evictions --------------------------------------------------------------------------------------


def deletions() -> float:
    return REGISTRY.get_sample_value("dra_operators_devicetaint_pod_deletions_total") or 0.0


async def test_eviction_sends_event_patch_and_delete_with_uid_preconditions() -> None:
    controller, client = make_controller(CLUSTER_1_37)
    await start(controller)
    fixture_f(controller, [TAINT])
    before = deletions()
    await controller.sync(P1)
    # The pod writes go first; the Event is posted in the background, like client-go's recorder.
    (patch_path, patch), (delete_path, options) = [(p, b) for _, p, b in client.calls]
    await controller.runtime.events.drain(5)
    ((event_path, event),) = [(p, b) for _, p, b in client.calls[2:]]
    assert event_path == "/api/v1/namespaces/ns1/events"
    assert (event["reason"], event["message"], event["involvedObject"]["uid"]) == (
        "DeviceTaintManagerEviction",
        "Marking for deletion",
        "U1",
    )
    assert patch_path == "/api/v1/namespaces/ns1/pods/p1/status"
    assert patch["type"] == STRATEGIC_MERGE_PATCH
    assert patch["body"]["metadata"] == {"uid": "U1"}
    assert delete_path == "/api/v1/namespaces/ns1/pods/p1"
    assert options == {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": "U1"}}
    assert deletions() == before + 1


async def test_failed_deletes_are_retried_with_a_single_status_patch() -> None:
    controller, client = make_controller(CLUSTER_1_37)
    await start(controller)
    fixture_f(controller, [TAINT])
    client.failures["DELETE"] = [ApiError(500, "InternalError", "injected") for _ in range(3)]
    for _ in range(3):
        with pytest.raises(ApiError):
            await controller.sync(P1)
        await controller.runtime.events.drain(5)
    await controller.sync(P1)
    await controller.runtime.events.drain(5)
    assert len(client.writes("PATCH")) == 1 + 3  # one status PATCH, then three Event count updates
    assert [body["body"]["count"] for path, body in client.writes("PATCH") if "/events/" in path] == [2, 3, 4]
    assert len(client.writes("DELETE")) == 4


async def test_vanished_pod_is_done_without_metric() -> None:
    controller, client = make_controller(CLUSTER_1_37)
    await start(controller)
    fixture_f(controller, [TAINT])
    client.failures["DELETE"] = [ApiError(404, "NotFound", "gone")]
    before = deletions()
    await controller.sync(P1)
    await controller.sync(P1)
    assert deletions() == before
    assert len(client.writes("DELETE")) == 1


async def test_terminating_pod_counts_without_writes() -> None:
    controller, client = make_controller(CLUSTER_1_37)
    await start(controller)
    terminating = {**POD, "metadata": {**POD["metadata"], "deletionTimestamp": "2026-03-01T12:00:00Z"}}
    controller.upsert_slice(slice_body([TAINT]))
    controller.upsert_claim(CLAIM)
    controller.upsert_pod(terminating)
    before = deletions()
    await controller.sync(P1)
    assert client.calls == []
    assert deletions() == before + 1


async def test_future_eviction_is_retried_later() -> None:
    controller, client = make_controller(CLUSTER_1_37)
    await start(controller)
    far = {**TAINT, "timeAdded": "2999-01-01T00:00:00Z"}
    fixture_f(controller, [far])
    assert isinstance(await controller.sync(P1), Requeue)
    assert client.calls == []


async def test_cancelled_eviction_emits_an_event() -> None:
    controller, client = make_controller(CLUSTER_1_37)
    await start(controller)
    far = {**TAINT, "timeAdded": "2999-01-01T00:00:00Z"}
    fixture_f(controller, [far])
    controller.runtime.queue.open()
    controller.upsert_slice(slice_body([]))
    await asyncio.sleep(0)
    ((_, event),) = client.writes("POST")
    assert event["message"] == "Cancelling deletion"


async def test_no_cancel_event_during_the_initial_listing() -> None:
    """Before the listing is complete, an eviction 'scheduled' from a partial view (an older slice
    generation listed before the newer one) was never real: cancelling it emits nothing."""
    controller, client = make_controller(CLUSTER_1_37)
    await start(controller)
    far = {**TAINT, "timeAdded": "2999-01-01T00:00:00Z"}
    fixture_f(controller, [far])
    controller.upsert_slice(slice_body([]))
    await asyncio.sleep(0)
    assert client.writes("POST") == []


async def test_unparsable_objects_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    controller, client = make_controller(CLUSTER_1_37)
    await start(controller)
    controller.upsert_pod({"kind": "Pod", "metadata": {"namespace": "ns1"}, "spec": {"nodeName": 7}})
    controller.upsert_slice({"kind": "ResourceSlice", "metadata": {"name": "broken"}, "spec": {}})
    assert "skipping ResourceSlice broken that cannot be parsed" in caplog.text
    assert client.calls == []


# --- --eviction-mode=evict -----------------------------------------------------------------------------

# The Status kube-apiserver 1.37.2 answers when a budget allows no disruption (eviction.go).
BUDGET_REFUSAL: dict[str, Any] = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": "Cannot evict pod as it would violate the pod's disruption budget.",
    "reason": "TooManyRequests",
    "details": {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget keep-one needs 1 healthy pods and has 1 currently",
            }
        ]
    },
    "code": 429,
}


def budget_refusal(retry_after: float | None = None) -> ApiError:
    return ApiError(429, "TooManyRequests", BUDGET_REFUSAL["message"], retry_after, BUDGET_REFUSAL)


def evicting_controller() -> tuple[DeviceTaintController, FakeClient]:
    return make_controller(CLUSTER_1_37, Settings.model_validate({"eviction_mode": "evict"}))


async def test_evict_mode_asks_the_eviction_api_with_a_uid_precondition() -> None:
    controller, client = evicting_controller()
    await start(controller)
    fixture_f(controller, [TAINT])
    before = deletions()
    assert await controller.sync(P1) == Done()
    await controller.runtime.events.drain(5)
    (method, path, body), (_, event_path, event) = client.calls
    assert (method, path) == ("POST", "/api/v1/namespaces/ns1/pods/p1/eviction")
    assert body == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "p1", "namespace": "ns1"},
        "deleteOptions": {"preconditions": {"uid": "U1"}},
    }
    # No DisruptionTarget PATCH and no DELETE: the Eviction API does both.
    assert event_path == "/api/v1/namespaces/ns1/events"
    assert (event["type"], event["message"]) == ("Normal", "Marking for deletion")
    assert deletions() == before + 1


async def test_a_budget_refusal_is_retried_with_backoff_and_a_warning_naming_the_budget() -> None:
    controller, client = evicting_controller()
    await start(controller)
    fixture_f(controller, [TAINT])
    before = deletions()
    client.failures["POST"] = [budget_refusal(), budget_refusal(), budget_refusal(10.0)]
    delays = []
    for _ in range(3):
        result = await controller.sync(P1)
        assert isinstance(result, Requeue)
        delays.append(result.after)
    assert delays == [1.0, 2.0, 10.0]
    await controller.runtime.events.drain(5)
    events = [body for method, path, body in client.calls if method == "POST" and path.endswith("/events")]
    assert [(e["type"], e["message"]) for e in events] == [
        (
            "Warning",
            "Cannot evict pod: its PodDisruptionBudget keep-one allows no disruption now "
            "(The disruption budget keep-one needs 1 healthy pods and has 1 currently); retrying",
        )
    ], "one Event, then its count grows"
    assert deletions() == before, "a refused pod is not evicted"
    # Still scheduled, so the next attempt evicts it (and the rule still counts it as pending).
    assert isinstance(controller.cache.decide_pod(P1, datetime.now(UTC)), PodEvict)
    assert await controller.sync(P1) == Done()
    assert deletions() == before + 1


async def test_an_api_server_busy_429_is_an_error_not_a_budget() -> None:
    controller, client = evicting_controller()
    await start(controller)
    fixture_f(controller, [TAINT])
    client.failures["POST"] = [ApiError(429, "TooManyRequests", "storage is (re)initializing", 1.0, {})]
    with pytest.raises(ApiError):
        await controller.sync(P1)


def test_budget_refusals_and_their_backoff() -> None:
    assert blocking_budget(BUDGET_REFUSAL) == BudgetRefusal(
        "keep-one", "The disruption budget keep-one needs 1 healthy pods and has 1 currently"
    )
    assert blocking_budget({"details": {"causes": [{"reason": "FieldValueInvalid"}]}}) is None
    assert blocking_budget({}) is None
    assert [budget_retry_delay(n, None) for n in (1, 2, 3, 5, 6, 50)] == [1.0, 2.0, 4.0, 16.0, 30.0, 30.0]
    assert budget_retry_delay(1, 10.0) == 10.0


# --- Eviction pacing (dra-operators.io/evictions-per-minute) -------------------------------------------

P2 = Key(P1.kind, "ns1", "p2", "U2")


def paced_world(annotations: dict[str, str] | None) -> tuple[DeviceTaintController, FakeClient, list[float]]:
    """Fixture F with a second pod p2 on the same claim, tainted by rule R1 with ``annotations``;
    the returned list is the controller's monotonic clock."""
    controller, client = make_controller(CLUSTER_1_37)
    clock = [1000.0]
    controller.clock = lambda: clock[0]
    controller.upsert_slice(slice_body([]))
    reserved = [{"resource": "pods", "name": n, "uid": u} for n, u in (("p1", "U1"), ("p2", "U2"))]
    controller.upsert_claim({**CLAIM, "status": {**CLAIM["status"], "reservedFor": reserved}})
    controller.upsert_pod(POD)
    controller.upsert_pod({**POD, "metadata": {"name": "p2", "namespace": "ns1", "uid": "U2"}})
    metadata: dict[str, Any] = {"name": "example", "uid": "R1", "generation": 1}
    if annotations is not None:
        metadata["annotations"] = annotations
    selector = {"driver": "dra.example.com", "pool": "node-1", "device": "gpu-0"}
    controller.upsert_rule({"metadata": metadata, "spec": {"taint": TAINT, "deviceSelector": selector}})
    return controller, client, clock


def paced_pods() -> float:
    return REGISTRY.get_sample_value("dra_operators_devicetaint_paced_pods") or 0.0


async def test_a_paced_rule_evicts_one_pod_per_token_and_its_condition_reads_upstreams_message() -> None:
    controller, client, clock = paced_world({EVICTIONS_PER_MINUTE: "6"})
    assert await start(controller)
    assert await controller.sync(P1) == Done()
    held = await controller.sync(P2)
    assert isinstance(held, Requeue)
    assert held.after == pytest.approx(10.0)
    assert [path for path, _ in client.writes("DELETE")] == ["/api/v1/namespaces/ns1/pods/p1"]
    assert paced_pods() == 1
    # The watch shows p1 terminating; p2 still waits and counts as pending, in upstream's words.
    controller.upsert_pod(
        {**POD, "metadata": {**POD["metadata"], "deletionTimestamp": "2026-03-01T12:00:01Z"}}
    )
    await controller.sync(R1)
    ((_, apply),) = client.writes("APPLY")
    (condition,) = apply["body"]["status"]["conditions"]
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "True",
        "PodsPendingEviction",
        "1 pod needs to be evicted in 1 namespace. 1 pod evicted since starting the controller.",
    )
    clock[0] += 4.0
    again = await controller.sync(P2)
    assert isinstance(again, Requeue)
    assert again.after == pytest.approx(6.0)
    clock[0] += 6.0
    assert await controller.sync(P2) == Done()
    assert len(client.writes("DELETE")) == 2
    assert paced_pods() == 0


async def test_a_paced_pod_whose_delete_failed_keeps_its_token() -> None:
    controller, client, _ = paced_world({EVICTIONS_PER_MINUTE: "1"})
    assert await start(controller)
    client.failures["DELETE"] = [ApiError(500, "InternalError", "injected")]
    with pytest.raises(ApiError):
        await controller.sync(P1)
    assert await controller.sync(P1) == Done(), "no second token, no minute's wait"
    assert isinstance(await controller.sync(P2), Requeue)


@pytest.mark.parametrize("annotations", [None, {EVICTIONS_PER_MINUTE: "fast"}])
async def test_an_unannotated_or_malformed_rule_is_not_paced(annotations: dict[str, str] | None) -> None:
    controller, client, _ = paced_world(annotations)
    assert await start(controller)
    assert await controller.sync(P1) == Done()
    assert await controller.sync(P2) == Done()
    assert len(client.writes("DELETE")) == 2


async def test_a_malformed_pace_is_one_warning_event_on_the_rule(caplog: pytest.LogCaptureFixture) -> None:
    controller, client = make_controller(CLUSTER_1_37)
    assert await start(controller)
    body = {
        "metadata": {
            "name": "example",
            "uid": "R1",
            "generation": 1,
            "annotations": {EVICTIONS_PER_MINUTE: "0"},
        },
        "spec": {"taint": TAINT},
    }
    controller.upsert_rule(body)
    controller.upsert_rule(body)
    await controller.runtime.events.drain(5)
    events = [b for m, p, b in client.calls if m == "POST" and p.endswith("/events")]
    assert [(e["type"], e["reason"], e["involvedObject"]["kind"]) for e in events] == [
        ("Warning", "InvalidEvictionPacing", "DeviceTaintRule")
    ]
    assert caplog.text.count("is not a positive integer") == 1
