"""The controller's I/O decisions with a scripted API client: discovery, the status write and
its outcomes (spec sections 2.2, 7.1, 7.9, vectors 76, 79-81), and the TTL sweep (13, 16i)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from poolstatus_builders import REQUEST_RESOURCES, requests_served_on_both_surfaces, served_doc
from prometheus_client import REGISTRY
from runtime_support import unit_runtime

from operators.core.client import ApiError
from operators.core.keys import CLAIM, Key
from operators.core.models import tombstone
from operators.core.reconcile import Done, Requeue
from operators.core.runtime import Runtime
from operators.dra import taintrules
from operators.poolstatus import controller as controller_module
from operators.poolstatus import ttl
from operators.poolstatus.controller import DISCOVERY_KEY, TTL_KEY, PoolStatusController, request_key
from operators.poolstatus.operator import DEFINITION
from operators.poolstatus.settings import Settings
from operators.poolstatus.surfaces import BUILTIN, PROJECT, Surface

DRIVER = "gpu.example.com"
RV = "7"


@dataclass
class FakeClient:
    discovery: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {
            **requests_served_on_both_surfaces(),
            "/apis/resource.k8s.io/v1": served_doc("resourceslices", "devicetaintrules"),
        }
    )
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    patch_errors: list[ApiError] = field(default_factory=list)
    delete_errors: dict[str, ApiError] = field(default_factory=dict)
    calls: list[tuple[str, str, Any]] = field(default_factory=list)

    async def get(self, path: str, **_: str) -> Any:
        self.calls.append(("get", path, None))
        if path in self.discovery:
            return self.discovery[path]
        if path in self.objects:
            return self.objects[path]
        raise ApiError(404, "NotFound", f"{path} not found")

    async def patch(self, path: str, body: Any, content_type: str = "", **_: str) -> Any:
        self.calls.append(("patch", path, body))
        if self.patch_errors:
            raise self.patch_errors.pop(0)
        return {}

    async def delete(self, path: str, uid: str | None = None, **params: str) -> Any:
        self.calls.append(("delete", path, (uid, params)))
        if path in self.delete_errors:
            raise self.delete_errors[path]
        return {}

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "",
        want_reply: bool = True,
    ) -> Any:
        """The executor's way to patch and delete, recorded as the client's own calls."""
        if method == "PATCH":
            answer = await self.patch(path, body, content_type)
        else:
            assert method == "DELETE", method
            answer = await self.delete(path, (body.get("preconditions") or {}).get("uid"), **(params or {}))
        return answer if want_reply else None

    def writes(self) -> list[tuple[str, Any]]:
        return [(path, body) for verb, path, body in self.calls if verb == "patch"]


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def request_body(name: str, *, driver: str = DRIVER, **status: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": RV,
            "creationTimestamp": "2026-09-01T10:00:00Z",
        },
        "spec": {"driver": driver, "limit": 100},
    }
    if status:
        body["status"] = status
    return body


def slice_body(name: str, count: int = 1, generation: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": "pool-1", "generation": generation, "resourceSliceCount": count},
            "devices": [{"name": "device-0"}, {"name": "device-1"}],
        },
    }


@pytest.fixture
def client() -> FakeClient:
    return FakeClient()


def make(client: FakeClient, **settings: Any) -> tuple[PoolStatusController, Runtime]:
    """A controller on the runtime that discovers what ``client`` serves of the definition's kinds."""
    runtime = unit_runtime(client, "poolstatus", Settings(**settings), kinds=DEFINITION.kinds, events=False)
    runtime.controller = PoolStatusController(runtime)
    return runtime.controller, runtime


async def prepared(client: FakeClient, **settings: Any) -> tuple[PoolStatusController, Runtime]:
    controller, runtime = make(client, **settings)
    # What the runtime does before the watches: discovery, then prepare().
    assert await runtime.prepare()
    return controller, runtime


def key(surface: Surface, name: str) -> Key:
    return request_key((surface.group, name))


async def writes_then_settles(
    controller: PoolStatusController, client: FakeClient, request: Key, writes: int
) -> None:
    """The request's sync writes ``writes`` times; syncing it again writes nothing more."""
    await controller.sync(request)
    assert len(client.writes()) == writes
    await controller.sync(request)
    assert len(client.writes()) == writes


# -- discovery ---------------------------------------------------------------------------------


async def test_discovery_serves_what_is_available(client: FakeClient) -> None:
    del client.discovery["/apis/resource.k8s.io/v1alpha3"]
    controller, _ = await prepared(client)
    assert controller.served == (PROJECT,)
    assert controller.rules_in_use
    assert value("dra_operators_poolstatus_api_surface_enabled", group="resource.k8s.io") == 0
    assert value("dra_operators_poolstatus_api_surface_enabled", group="dra-operators.io") == 1


async def test_nothing_served_is_not_ready_without_exit(client: FakeClient) -> None:
    _, runtime = make(client, builtin_api="off", crd_api="off")
    assert not await runtime.prepare()
    assert not runtime._stop.is_set()


async def test_required_surface_missing_exits_2(client: FakeClient) -> None:
    client.discovery["/apis/dra-operators.io/v1alpha1"] = served_doc(
        "resourcepoolstatusrequests"
    )  # no status
    _, runtime = make(client, crd_api="on")
    assert not await runtime.prepare()
    assert runtime.exit_code == 2


async def test_availability_change_exits_3(client: FakeClient) -> None:
    del client.discovery["/apis/dra-operators.io/v1alpha1"]
    controller, runtime = await prepared(client)
    await controller.sync(DISCOVERY_KEY)
    assert not runtime._stop.is_set()
    client.discovery["/apis/dra-operators.io/v1alpha1"] = served_doc(*REQUEST_RESOURCES)
    await controller.sync(DISCOVERY_KEY)
    assert runtime.exit_code == 3


async def test_rules_off(client: FakeClient) -> None:
    controller, _ = await prepared(client, device_taint_rules="off")
    assert not controller.rules_in_use


# -- evaluation and the write ------------------------------------------------------------------


async def test_one_write_with_the_resource_version(client: FakeClient) -> None:
    controller, runtime = await prepared(client)
    before = value(
        "dra_operators_poolstatus_requests_processed_total", group="dra-operators.io", result="complete"
    )
    controller.upsert_slice(slice_body("s"))
    controller.upsert_request(PROJECT, request_body("r"))
    assert len(runtime.queue) == 2  # the TTL sweep and the request
    await controller.sync(key(PROJECT, "r"))
    [(path, body)] = client.writes()
    assert path == "/apis/dra-operators.io/v1alpha1/resourcepoolstatusrequests/r/status"
    assert body["metadata"] == {"resourceVersion": RV}
    assert body["status"]["pools"][0]["totalDevices"] == 2
    after = value(
        "dra_operators_poolstatus_requests_processed_total", group="dra-operators.io", result="complete"
    )
    assert after == before + 1
    # Until the watch shows the status, neither a slice event nor a re-sync writes again.
    controller.upsert_slice(slice_body("s"))
    await controller.sync(key(PROJECT, "r"))
    assert len(client.writes()) == 1
    controller.upsert_request(PROJECT, request_body("r", poolCount=1))
    assert controller.pending_counts() == {"resource.k8s.io": 0, "dra-operators.io": 0}


async def test_builtin_requests_are_ignored_when_off(client: FakeClient) -> None:
    controller, runtime = await prepared(client, builtin_api="off")
    controller.upsert_request(BUILTIN, request_body("r"))
    assert len(runtime.queue) == 1  # only the TTL sweep
    assert controller.pending_counts() == {"dra-operators.io": 0}


async def test_incomplete_pool_waits_then_completes(client: FakeClient) -> None:
    controller, runtime = await prepared(client)
    group = "dra-operators.io"
    before = value("dra_operators_poolstatus_grace_requeues_total", group=group)
    controller.upsert_slice(slice_body("s", count=2))
    controller.upsert_request(PROJECT, request_body("r"))
    retry = await controller.sync(key(PROJECT, "r"))
    assert isinstance(retry, Requeue)
    assert retry.after == pytest.approx(0.5, abs=0.05)
    assert value("dra_operators_poolstatus_grace_requeues_total", group=group) == before + 1
    assert client.writes() == []
    # A slice event for the driver re-evaluates the waiting request soon (coalesced).
    controller.upsert_slice(slice_body("s2", count=2))
    assert runtime.queue.waiting == 1 + 1  # the discovery re-check and this request
    await controller.sync(key(PROJECT, "r"))
    [(_, body)] = client.writes()
    assert body["status"]["pools"][0]["resourceSliceCount"] == 2


async def test_zero_grace_writes_pool_incomplete_at_once(client: FakeClient) -> None:
    controller, _ = await prepared(client, incomplete_grace_period=0)
    controller.upsert_slice(slice_body("s", count=3))
    controller.upsert_request(PROJECT, request_body("r"))
    await controller.sync(key(PROJECT, "r"))
    [(_, body)] = client.writes()
    assert body["status"]["pools"][0]["validationError"].startswith("PoolIncomplete: ")


async def test_deleted_during_the_wait_is_dropped(client: FakeClient) -> None:
    controller, _ = await prepared(client)
    controller.upsert_slice(slice_body("s", count=2))
    controller.upsert_request(PROJECT, request_body("r"))
    assert isinstance(await controller.sync(key(PROJECT, "r")), Requeue)
    assert controller.pending_counts()["dra-operators.io"] == 1
    controller.delete_request(PROJECT, request_body("r"))
    assert controller.pending_counts()["dra-operators.io"] == 0
    await controller.sync(key(PROJECT, "r"))
    assert client.writes() == []


async def test_lost_race_on_conflict(client: FakeClient) -> None:
    """Vector 81: another writer got there first; nothing is retried or overwritten."""
    controller, _ = await prepared(client)
    group = "resource.k8s.io"
    before = value(
        "dra_operators_poolstatus_status_write_conflicts_total", group=group, outcome="other_writer"
    )
    controller.upsert_request(BUILTIN, request_body("r"))
    client.patch_errors.append(ApiError(409, "Conflict", "changed"))
    client.objects[BUILTIN.path("r")] = request_body("r", poolCount=3)
    await writes_then_settles(controller, client, key(BUILTIN, "r"), writes=1)
    after = value(
        "dra_operators_poolstatus_status_write_conflicts_total", group=group, outcome="other_writer"
    )
    assert after == before + 1


async def test_conflict_without_status_retries_with_the_new_version(client: FakeClient) -> None:
    controller, _ = await prepared(client)
    controller.upsert_request(PROJECT, request_body("r"))
    client.patch_errors.append(ApiError(409, "Conflict", "changed"))
    fresh = request_body("r")
    fresh["metadata"]["resourceVersion"] = "8"
    client.objects[PROJECT.path("r")] = fresh
    retry = await controller.sync(key(PROJECT, "r"))
    assert isinstance(retry, Requeue)
    assert retry.after == 0
    await controller.sync(key(PROJECT, "r"))
    assert [body["metadata"]["resourceVersion"] for _, body in client.writes()] == [RV, "8"]


async def test_rejected_status_becomes_failed_once(client: FakeClient) -> None:
    """Vector 79 on the built-in surface: a 422 leads to one Failed status with its message."""
    controller, _ = await prepared(client)
    group = "resource.k8s.io"
    before = value("dra_operators_poolstatus_status_rejected_total", group=group, reason="invalid")
    controller.upsert_slice(slice_body("s", generation=0))
    controller.upsert_request(BUILTIN, request_body("r"))
    client.objects[BUILTIN.path("r")] = request_body("r")
    message = 'ResourcePoolStatusRequest "r" is invalid: status.pools[0].generation: Required value'
    client.patch_errors.append(ApiError(422, "Invalid", message))
    await controller.sync(key(BUILTIN, "r"))
    first, fallback = client.writes()
    assert first[1]["status"]["pools"][0]["generation"] == 0
    status = fallback[1]["status"]
    assert status["poolCount"] == 0
    assert "pools" not in status
    assert status["conditions"][0]["reason"] == "CalculationFailed"
    assert status["conditions"][0]["message"] == f"Failed to write status: {message}"
    assert (
        value("dra_operators_poolstatus_status_rejected_total", group=group, reason="invalid") == before + 1
    )


async def test_rejected_fallback_gives_up(client: FakeClient) -> None:
    controller, _ = await prepared(client)
    controller.upsert_request(BUILTIN, request_body("r"))
    client.objects[BUILTIN.path("r")] = request_body("r")
    client.patch_errors += [ApiError(422, "Invalid", "no"), ApiError(413, "TooLarge", "no")]
    await writes_then_settles(controller, client, key(BUILTIN, "r"), writes=2)


async def test_gone_and_transient_answers(client: FakeClient) -> None:
    controller, _ = await prepared(client)
    controller.upsert_request(PROJECT, request_body("gone"))
    client.patch_errors.append(ApiError(404, "NotFound", "gone"))
    await controller.sync(key(PROJECT, "gone"))
    controller.upsert_request(PROJECT, request_body("r"))
    client.patch_errors += [ApiError(503, "Unavailable", "busy"), ApiError(0, "ClientError", "reset")]
    delays = []
    for _ in range(2):
        retry = await controller.sync(key(PROJECT, "r"))
        assert isinstance(retry, Requeue)
        delays.append(retry.after)
    assert delays == [1.0, 2.0]
    await controller.sync(key(PROJECT, "r"))
    assert len(client.writes()) == 4


INTERRUPTIONS = [
    ApiError(503, "ServiceUnavailable", "busy"),
    ApiError(429, "TooManyRequests", "slow down"),
    ApiError(0, "ClientError", "reset"),
    ApiError(409, "Conflict", "changed"),
]


@pytest.mark.parametrize("interruption", INTERRUPTIONS, ids=lambda e: str(e.status))
@pytest.mark.parametrize("fallback_rejected", [False, True], ids=["accepted", "rejected"])
async def test_an_interrupted_failed_status_is_retried_as_failed(
    client: FakeClient, interruption: ApiError, fallback_rejected: bool
) -> None:
    """Spec 7.9: after a 422 only the Failed status is written, however often a transient error
    or a conflict interrupts it; only its own rejection gives up."""
    controller, _ = await prepared(client)
    group = "resource.k8s.io"
    rejected = value("dra_operators_poolstatus_status_rejected_total", group=group, reason="invalid")
    failed = value("dra_operators_poolstatus_requests_processed_total", group=group, result="failed")
    controller.upsert_slice(slice_body("s", generation=0))
    controller.upsert_request(BUILTIN, request_body("r"))
    client.objects[BUILTIN.path("r")] = request_body("r")
    message = "status.pools[0].generation: Required value"
    client.patch_errors += [ApiError(422, "Invalid", message), interruption]
    if fallback_rejected:
        client.patch_errors.append(ApiError(422, "Invalid", "no"))
    assert isinstance(await controller.sync(key(BUILTIN, "r")), Requeue)
    await writes_then_settles(controller, client, key(BUILTIN, "r"), writes=3)
    conditions = [body["status"]["conditions"][0] for _, body in client.writes()]
    assert [c["type"] for c in conditions] == ["Complete", "Failed", "Failed"]
    assert conditions[2]["message"] == f"Failed to write status: {message}"
    assert (
        value("dra_operators_poolstatus_status_rejected_total", group=group, reason="invalid") == rejected + 1
    )
    written = value("dra_operators_poolstatus_requests_processed_total", group=group, result="failed")
    assert written == failed + (0 if fallback_rejected else 1)


@pytest.mark.parametrize("code", [401, 403])
async def test_a_refused_write_is_not_retried(client: FakeClient, code: int) -> None:
    """Spec 7.9 retries only 429, 5xx and network errors: credentials or RBAC do not heal by
    retrying, so the request waits for its next event (or a restart)."""
    controller, runtime = await prepared(client)
    controller.upsert_slice(slice_body("s"))
    controller.upsert_request(PROJECT, request_body("r"))
    client.patch_errors.append(ApiError(code, "Forbidden", "may not patch"))
    assert isinstance(await controller.sync(key(PROJECT, "r")), Done)
    assert len(client.writes()) == 1
    controller.upsert_request(PROJECT, request_body("r"))
    assert key(PROJECT, "r") in runtime.queue._queue
    await writes_then_settles(controller, client, key(PROJECT, "r"), writes=2)


async def test_size_guard(client: FakeClient) -> None:
    """Vector 80."""
    controller, _ = await prepared(client, max_status_bytes=100)
    before = value(
        "dra_operators_poolstatus_status_rejected_total", group="dra-operators.io", reason="too_large"
    )
    controller.upsert_slice(slice_body("s"))
    controller.upsert_request(PROJECT, request_body("r"))
    await controller.sync(key(PROJECT, "r"))
    [(_, body)] = client.writes()
    assert body["status"]["conditions"][0]["message"].endswith(
        "above the limit of 100 bytes; lower spec.limit or set spec.poolName"
    )
    after = value(
        "dra_operators_poolstatus_status_rejected_total", group="dra-operators.io", reason="too_large"
    )
    assert after == before + 1


# -- bad input -----------------------------------------------------------------------------------


def claim_body(rv: str, allocated: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": "c", "namespace": "ns", "resourceVersion": rv}}
    if allocated:
        results = [{"driver": DRIVER, "pool": "pool-1", "device": "device-0"}]
        body["status"] = {"allocation": {"devices": {"results": results}}}
    return body


async def test_claims_follow_their_allocation_and_redeliveries_are_skipped(client: FakeClient) -> None:
    controller, _ = await prepared(client)
    controller.upsert_claim(claim_body("1", allocated=True))
    assert list(controller.cache.claims) == [Key(CLAIM, "ns", "c")]
    # The same version again (kopf's listing after ours) is not parsed: not even a broken copy.
    broken = claim_body("1", allocated=True)
    broken["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] = {"x": "?"}
    controller.upsert_claim(broken)
    assert list(controller.cache.claims) == [Key(CLAIM, "ns", "c")]
    controller.upsert_claim(claim_body("2", allocated=False))
    assert controller.cache.claims == {}
    controller.upsert_claim(claim_body("3", allocated=True))
    controller.delete_claim(claim_body("3", allocated=True))
    assert controller.cache.claims == {}


async def test_malformed_objects_are_skipped(client: FakeClient) -> None:
    controller, _ = await prepared(client)
    controller.upsert_slice(slice_body("s"))
    broken = slice_body("s")
    broken["spec"]["devices"][0]["capacity"] = {"memory": {"value": "lots"}}
    controller.upsert_slice(broken)
    assert controller.cache.slice_names() == set()
    controller.upsert_claim(
        {
            "metadata": {"name": "c", "namespace": "ns"},
            "status": {
                "allocation": {"devices": {"results": [{"device": "d", "consumedCapacity": {"x": "?"}}]}}
            },
        }
    )
    controller.upsert_rule({"metadata": {"name": "r"}, "spec": {"taint": {"effect": 3}}})
    controller.upsert_request(PROJECT, {"metadata": {"name": "no-spec"}})
    assert controller.cache.claims == {}
    assert controller.cache.rules == {}
    assert controller.cache.requests == {}


# -- TTL -----------------------------------------------------------------------------------------


def completed_at(moment: str) -> dict[str, Any]:
    """The status of a request answered (``Complete``) at ``moment``."""
    return {"conditions": [{"type": "Complete", "lastTransitionTime": moment}], "poolCount": 0}


async def test_ttl_sweep(client: FakeClient) -> None:
    """Vector 16: expired requests are deleted with their uid; 404 and 409 are not errors."""
    controller, runtime = await prepared(client, completed_ttl=60, pending_ttl=120)
    old = completed_at("2026-09-01T10:00:00Z")
    recent = completed_at("2999-01-01T00:00:00Z")
    controller.upsert_request(PROJECT, request_body("done-old", **old))
    controller.upsert_request(PROJECT, request_body("done-new", **recent))
    controller.upsert_request(PROJECT, request_body("pending-old"))
    controller.upsert_request(BUILTIN, request_body("reused", **old))
    controller.upsert_request(BUILTIN, request_body("broken", **old))
    client.delete_errors[BUILTIN.path("reused")] = ApiError(409, "Conflict", "uid precondition")
    client.delete_errors[BUILTIN.path("broken")] = ApiError(500, "InternalError", "etcd")
    errors = value("dra_operators_poolstatus_ttl_deletion_errors_total", group="resource.k8s.io")
    pending = value("dra_operators_poolstatus_ttl_deletions_total", group="dra-operators.io", state="pending")
    builtin = value(
        "dra_operators_poolstatus_ttl_deletions_total", group="resource.k8s.io", state="completed"
    )
    await controller.sync(TTL_KEY)
    deletes = {path: args for verb, path, args in client.calls if verb == "delete"}
    assert set(deletes) == {
        PROJECT.path("done-old"),
        PROJECT.path("pending-old"),
        BUILTIN.path("reused"),
        BUILTIN.path("broken"),
    }
    assert deletes[PROJECT.path("done-old")] == ("uid-done-old", {"propagationPolicy": "Background"})
    assert value("dra_operators_poolstatus_ttl_deletion_errors_total", group="resource.k8s.io") == errors + 1
    after = value("dra_operators_poolstatus_ttl_deletions_total", group="dra-operators.io", state="pending")
    assert after == pending + 1
    assert (
        value("dra_operators_poolstatus_ttl_deletions_total", group="resource.k8s.io", state="completed")
        == builtin
    ), "neither the name reused (409) nor the failure is a deletion"
    # The discovery re-check; the worker that runs the sweep re-arms it (WorkQueue.every).
    assert runtime.queue.waiting == 1


EXPIRED = completed_at("2026-09-01T10:00:00Z")


def swept(client: FakeClient) -> set[str]:
    return {path for verb, path, _ in client.calls if verb == "delete"}


async def test_a_request_completed_in_year_9999_is_kept_and_the_others_still_expire(
    client: FakeClient,
) -> None:
    controller, _ = await prepared(client, completed_ttl=60, pending_ttl=120)
    far = completed_at("9999-12-31T23:59:59Z")
    controller.upsert_request(PROJECT, request_body("year-9999", **far))
    controller.upsert_request(PROJECT, request_body("done-old", **EXPIRED))
    controller.upsert_request(BUILTIN, request_body("pending-old"))
    await controller.sync(TTL_KEY)
    assert swept(client) == {PROJECT.path("done-old"), BUILTIN.path("pending-old")}


async def test_a_request_the_sweep_cannot_handle_is_logged_and_skipped(
    client: FakeClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    controller, _ = await prepared(client, completed_ttl=60, pending_ttl=120)
    real = ttl.ttl_action

    def failing_for_one(request: Any, *args: Any) -> Any:
        if request.metadata.name == "unlucky":
            raise RuntimeError("a bug in the TTL rules")
        return real(request, *args)

    monkeypatch.setattr(controller_module, "ttl_action", failing_for_one)
    for name in ("unlucky", "done-old", "done-older"):
        controller.upsert_request(PROJECT, request_body(name, **EXPIRED))
    with caplog.at_level(logging.WARNING, logger=controller_module.__name__):
        await controller.sync(TTL_KEY)
    assert swept(client) == {PROJECT.path("done-old"), PROJECT.path("done-older")}
    (line,) = [r.getMessage() for r in caplog.records if "TTL check" in r.getMessage()]
    assert (
        line
        == "TTL check of dra-operators.io unlucky failed, skipped: RuntimeError('a bug in the TTL rules')"
    )


async def test_the_ttl_sweep_runs_at_start_and_discovery_after_one_interval_both_periodic() -> None:
    _, runtime = await prepared(FakeClient(), cleanup_interval=30.0, discovery_interval=90.0)
    assert runtime.queue._periodic[TTL_KEY][0] == 30.0
    assert runtime.queue._periodic[DISCOVERY_KEY][0] == 90.0
    assert list(runtime.queue._queue) == [TTL_KEY], "queued at once: it runs when the queue opens"
    assert 89 < runtime.queue._waiting[DISCOVERY_KEY] - time.monotonic() <= 90


# -- DeviceTaintRules in whichever version is served -------------------------------------------


async def test_rules_served_only_as_v1beta2_are_counted(client: FakeClient) -> None:
    """A 1.36 cluster with the beta API on: rules in v1beta2 only, watched there (see .operator)."""
    client.discovery["/apis/resource.k8s.io/v1"] = served_doc("resourceslices")
    client.discovery["/apis/resource.k8s.io/v1beta2"] = served_doc("devicetaintrules")
    controller, _ = await prepared(client)
    assert controller.rules_in_use
    (rules,) = [watch for watch in DEFINITION.watches if watch.plural == "devicetaintrules"]
    assert rules.versions == taintrules.VERSIONS
    assert rules.when is not None
    assert rules.when(controller)


async def test_rules_not_served_in_any_version_are_not_watched(client: FakeClient) -> None:
    client.discovery["/apis/resource.k8s.io/v1"] = served_doc("resourceslices")
    controller, runtime = await prepared(client)
    assert not controller.rules_in_use
    (rules,) = [watch for watch in DEFINITION.watches if watch.plural == "devicetaintrules"]
    assert rules.when is not None
    assert not rules.when(controller)
    client.discovery["/apis/resource.k8s.io/v1alpha3"] = served_doc(*REQUEST_RESOURCES, "devicetaintrules")
    await controller.sync(DISCOVERY_KEY)
    assert runtime.exit_code == 3, "rules served as v1alpha3 at last: restart to watch them"


# -- deletions, as the watch saw them or as tombstones after a gap -------------------------------


def slice_in_pool_2(uid: str) -> dict[str, Any]:
    body = slice_body("s2")
    body["metadata"]["uid"] = uid
    body["spec"]["pool"]["name"] = "pool-2"
    return body


def claim_on_device_0(uid: str) -> dict[str, Any]:
    body = claim_body(rv=uid, allocated=True)
    body["metadata"]["uid"] = uid
    return body


def rule_tainting_pool_1(uid: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "taint-pool-1", "uid": uid},
        "spec": {
            "deviceSelector": {"driver": DRIVER, "pool": "pool-1"},
            "taint": {"key": "example.com/bad", "effect": "NoSchedule"},
        },
    }


@dataclass(frozen=True)
class Watched:
    """A watched kind: its handlers, one object of it by UID, and whether a status counts it."""

    upsert: Callable[[PoolStatusController, dict[str, Any]], None]
    delete: Callable[[PoolStatusController, dict[str, Any]], None]
    body: Callable[[str], dict[str, Any]]
    counted: Callable[[dict[str, Any]], bool]


WATCHED = {
    "slice": Watched(
        PoolStatusController.upsert_slice,
        PoolStatusController.delete_slice,
        slice_in_pool_2,
        lambda status: status["poolCount"] == 2,
    ),
    "claim": Watched(
        PoolStatusController.upsert_claim,
        PoolStatusController.delete_claim,
        claim_on_device_0,
        lambda status: status["pools"][0]["allocatedDevices"] == 1,
    ),
    "rule": Watched(
        PoolStatusController.upsert_rule,
        PoolStatusController.delete_rule,
        rule_tainting_pool_1,
        lambda status: status["pools"][0]["unavailableDevices"] == 2,
    ),
}


async def written_status(controller: PoolStatusController, client: FakeClient, name: str) -> dict[str, Any]:
    """The status a new request ``name`` gets now."""
    controller.upsert_request(PROJECT, request_body(name))
    await controller.sync(key(PROJECT, name))
    path, body = client.writes()[-1]
    assert path == PROJECT.path(name, subresource="status")
    status: dict[str, Any] = body["status"]
    return status


@pytest.mark.parametrize("kind", WATCHED.values(), ids=WATCHED.keys())
@pytest.mark.parametrize("as_tombstone", [False, True], ids=["full body", "tombstone"])
async def test_a_deleted_object_stops_counting(client: FakeClient, kind: Watched, as_tombstone: bool) -> None:
    controller, _ = await prepared(client)
    controller.upsert_slice(slice_body("s"))
    body = kind.body("uid-1")
    kind.upsert(controller, body)
    assert kind.counted(await written_status(controller, client, "before"))
    kind.delete(controller, tombstone(body) if as_tombstone else body)
    assert not kind.counted(await written_status(controller, client, "after"))


@pytest.mark.parametrize("kind", WATCHED.values(), ids=WATCHED.keys())
async def test_a_tombstone_leaves_the_object_that_took_its_name(client: FakeClient, kind: Watched) -> None:
    """A re-list after a watch gap hands over what it found before the deletions it inferred: the
    tombstone of an object deleted and created again in the gap comes after its successor."""
    controller, _ = await prepared(client)
    controller.upsert_slice(slice_body("s"))
    kind.upsert(controller, kind.body("uid-1"))
    kind.upsert(controller, kind.body("uid-2"))
    kind.delete(controller, tombstone(kind.body("uid-1")))
    assert kind.counted(await written_status(controller, client, "after"))


def request_with_uid(uid: str) -> dict[str, Any]:
    body = request_body("r")
    body["metadata"]["uid"] = uid
    return body


@pytest.mark.parametrize("surface", [BUILTIN, PROJECT], ids=lambda s: s.group)
@pytest.mark.parametrize("as_tombstone", [False, True], ids=["full body", "tombstone"])
async def test_a_deleted_request_is_not_answered(
    client: FakeClient, surface: Surface, as_tombstone: bool
) -> None:
    controller, _ = await prepared(client)
    body = request_with_uid("uid-1")
    controller.upsert_request(surface, body)
    controller.delete_request(surface, tombstone(body) if as_tombstone else body)
    assert controller.pending_counts()[surface.group] == 0
    await controller.sync(key(surface, "r"))
    assert client.writes() == []


@pytest.mark.parametrize("surface", [BUILTIN, PROJECT], ids=lambda s: s.group)
async def test_a_request_tombstone_leaves_the_request_that_took_its_name(
    client: FakeClient, surface: Surface
) -> None:
    controller, _ = await prepared(client)
    controller.upsert_request(surface, request_with_uid("uid-1"))
    controller.upsert_request(surface, request_with_uid("uid-2"))
    controller.delete_request(surface, tombstone(request_with_uid("uid-1")))
    assert controller.pending_counts()[surface.group] == 1
    await controller.sync(key(surface, "r"))
    [(path, _)] = client.writes()
    assert path == surface.path("r", subresource="status")


@pytest.mark.parametrize(
    "refusal",
    [ApiError(409, "Conflict", "changed"), ApiError(422, "Invalid", "no")],
    ids=lambda e: str(e.status),
)
async def test_a_request_deleted_while_it_is_read_back_stays_deleted(
    client: FakeClient, refusal: ApiError
) -> None:
    """After a refused write the request is read back; its deletion can reach the watch while
    that read is on the way, with the copy read before it. The copy must not bring back what
    the watch removed: the request would stay pending in the cache for the life of the process,
    written to (404) and, after its pending TTL, deleted again at every sweep."""
    controller, _ = await prepared(client)
    controller.upsert_request(PROJECT, request_body("r"))
    client.patch_errors.append(refusal)
    read_before_deletion = request_body("r")

    async def get(path: str, **_: str) -> Any:
        client.calls.append(("get", path, None))
        controller.delete_request(PROJECT, request_body("r"))
        return read_before_deletion

    client.get = get  # type: ignore[method-assign]
    await controller.sync(key(PROJECT, "r"))
    assert controller.pending_counts()["dra-operators.io"] == 0
    assert (PROJECT.group, "r") not in controller.cache.requests
    writes = len(client.writes())
    await controller.sync(key(PROJECT, "r"))
    assert len(client.writes()) == writes
