"""The resourceclaim I/O layer with a recording fake client: which requests a sync sends,
how sync outcomes reach the work queue, and that every request is in ``API_CALLS``."""

from __future__ import annotations

import copy
from typing import Any, cast

import pytest
from prometheus_client import generate_latest
from resourceclaim_builders import (
    NS,
    FakeClock,
    claim_body,
    named_entry,
    pod_body,
    pod_consumer,
    pod_group_body,
    pod_group_consumer,
    pod_group_owner,
    template_body,
    template_entry,
)

from operators.core.client import ApiError
from operators.core.events import ObjectRef
from operators.core.health import Health
from operators.core.keys import CLAIM, POD, Key
from operators.core.models import tombstone
from operators.core.reconcile import Retry
from operators.core.runtime import Runtime, Watch
from operators.core.settings import OperatorSettings
from operators.dra.podgroups import WORKLOAD_CLAIMS_NOT_SERVED
from operators.resourceclaim import metrics
from operators.resourceclaim.cache import ClusterCache
from operators.resourceclaim.controller import CONFIRM_KEY, ResourceClaimController
from operators.resourceclaim.models import ResourceClaim
from operators.resourceclaim.operator import API_CALLS, DEFINITION
from operators.resourceclaim.resolution import POD_GROUP
from operators.resourceclaim.settings import Settings

CLAIMS = "/apis/resource.k8s.io/v1/namespaces/demo/resourceclaims"
MANAGER = "dra-operators-resourceclaim"


class FakeClient:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, str], Any]] = []
        self.errors: dict[str, ApiError] = {}
        self.objects: dict[str, dict[str, Any]] = {}

    def _record(self, method: str, path: str, params: dict[str, str], body: Any) -> None:
        self.calls.append((method, path, params, copy.deepcopy(body)))
        error = self.errors.pop(method, None)
        if error is not None:
            raise error

    async def create(self, path: str, body: dict[str, Any], **params: str) -> Any:
        self._record("POST", path, params, body)
        created = copy.deepcopy(body)
        created["metadata"].update(
            name=created["metadata"]["generateName"] + "bcdfg", uid="new-uid", resourceVersion="1"
        )
        return created

    async def apply(
        self, path: str, body: dict[str, Any], field_manager: str, force: bool = True, want_reply: bool = True
    ) -> Any:
        self._record("APPLY", path, {"fieldManager": field_manager, "force": str(force)}, body)
        return body if want_reply else None

    async def replace(self, path: str, body: dict[str, Any], **params: str) -> Any:
        self._record("PUT", path, params, body)
        return copy.deepcopy(body)

    async def delete(self, path: str, uid: str | None = None, **params: str) -> Any:
        self._record("DELETE", path, {"uid": uid or ""}, None)
        return {}

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Any:
        """The executor's DELETE: its body is the DeleteOptions that carry the UID precondition."""
        assert method == "DELETE", method
        assert body["kind"] == "DeleteOptions", body
        return await self.delete(path, uid=body["preconditions"]["uid"])

    async def get(self, path: str, **params: str) -> Any:
        self._record("GET", path, params, None)
        if path in self.objects:
            return self.objects[path]
        raise ApiError(404, "NotFound", "not found")


class FakeEvents:
    def __init__(self) -> None:
        self.recorded: list[tuple[ObjectRef, str, str, str]] = []

    def record(self, obj: ObjectRef, type_: str, reason: str, message: str) -> None:
        self.recorded.append((obj, type_, reason, message))


class FakeQueue:
    def __init__(self) -> None:
        self.added: list[Key] = []
        self.delayed: list[tuple[Key, float]] = []
        self.periodic: dict[Key, tuple[float, dict[str, Any]]] = {}

    def add(self, key: Key) -> None:
        self.added.append(key)

    def add_after(self, key: Key, delay: float) -> None:
        self.delayed.append((key, delay))

    def every(self, key: Key, interval: float, **kwargs: Any) -> None:
        self.periodic[key] = (interval, kwargs)


class Harness:
    def __init__(self, settings: OperatorSettings | None = None) -> None:
        self.client = FakeClient()
        self.events = FakeEvents()
        self.queue = FakeQueue()
        runtime = Runtime(
            name="resourceclaim",
            settings=settings or Settings(),
            client=cast(Any, self.client),
            reader=cast(Any, self.client),
            events=cast(Any, self.events),
            health=Health(),
            queue=cast(Any, self.queue),
            field_manager=MANAGER,
            kinds=DEFINITION.kinds,
        )
        self.runtime = runtime
        self.controller = runtime.controller = ResourceClaimController(runtime)
        self.clock = FakeClock()
        self.controller.cache = ClusterCache(clock=self.clock)
        metrics.state.observe(self.controller.cache)


def _creates(status: str, admin: str) -> float:
    value = metrics.creates.labels(
        status=status, admin_access=admin, owner_api_group="", owner_api_kind="Pod"
    )._value.get()
    return float(value)


async def test_template_pod_gets_a_claim_and_an_applied_status() -> None:
    h = Harness()
    h.controller.upsert_template(template_body())
    h.controller.upsert_pod(pod_body(claims=[template_entry("gpu", "gpu-tmpl")]))
    assert h.queue.added == [Key(POD, "demo", "my-pod")]
    before = _creates("success", "false")

    await h.controller.sync(Key(POD, "demo", "my-pod"))

    post, apply = h.client.calls
    assert post[:3] == ("POST", CLAIMS, {"fieldManager": MANAGER})
    assert post[3]["metadata"]["generateName"] == "my-pod-gpu-"
    assert apply[:3] == (
        "APPLY",
        "/api/v1/namespaces/demo/pods/my-pod/status",
        {"fieldManager": MANAGER, "force": "True"},
    )
    assert apply[3]["metadata"]["uid"] == "U"
    assert apply[3]["status"] == {
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "my-pod-gpu-bcdfg"}]
    }
    assert _creates("success", "false") == before + 1
    assert (CONFIRM_KEY, 60.0) in h.queue.delayed
    assert h.events.recorded == []


async def test_each_created_claim_is_logged_at_debug_only(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness()
    h.controller.upsert_template(template_body())
    h.controller.upsert_pod(pod_body(claims=[template_entry("gpu", "gpu-tmpl")]))
    caplog.set_level("INFO", logger="operators.resourceclaim")
    await h.controller.sync(Key(POD, "demo", "my-pod"))
    assert "Created ResourceClaim" not in caplog.text, "upstream logs it at verbosity 4"

    h.controller.upsert_pod(pod_body(name="other", uid="U2", claims=[template_entry("gpu", "gpu-tmpl")]))
    caplog.set_level("DEBUG", logger="operators.resourceclaim")
    await h.controller.sync(Key(POD, "demo", "other"))
    assert "Created ResourceClaim pod=demo/other claim=other-gpu-bcdfg" in caplog.text


async def test_a_retry_result_carries_the_retry_after_and_the_event_is_emitted() -> None:
    h = Harness()
    h.controller.upsert_template(template_body())
    h.controller.upsert_pod(pod_body(claims=[template_entry("gpu", "gpu-tmpl")]))
    h.client.errors["POST"] = ApiError(429, "TooManyRequests", "slow down", retry_after=7.0)
    before = _creates("failure", "false")

    result = await h.controller.sync(Key(POD, "demo", "my-pod"))

    assert isinstance(result, Retry)
    assert result.after == 7.0
    assert _creates("failure", "false") == before + 1
    ((ref, type_, reason, message),) = h.events.recorded
    assert ref == ObjectRef("v1", "Pod", "my-pod", "demo", "U")
    assert (type_, reason, message) == (
        "Warning",
        "FailedResourceClaimCreation",
        "PodResourceClaim gpu: create ResourceClaim : slow down",
    )


async def test_input_that_cannot_change_by_itself_is_not_retried() -> None:
    h = Harness()
    h.controller.upsert_pod(pod_body(claims=[{"name": "gpu"}]))
    await h.controller.sync(Key(POD, "demo", "my-pod"))
    assert [message for *_, message in h.events.recorded] == [
        'PodResourceClaim gpu: checking for claim before creating it: pod "demo/my-pod", '
        'spec.resourceClaim "gpu": none of the supported fields are set'
    ]
    assert h.client.calls == []


async def test_claim_writes_are_full_puts_and_a_uid_guarded_delete() -> None:
    h = Harness()
    pod = pod_body(claims=[template_entry("gpu", "gpu-tmpl")], phase="Succeeded")
    pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "my-pod-gpu-abcde"}]
    claim = claim_body(
        "my-pod-gpu-abcde",
        "C",
        owner=("my-pod", "U"),
        entry="gpu",
        finalizers=["resource.kubernetes.io/delete-protection"],
        allocated=True,
        reserved_for=[pod_consumer("my-pod", "U")],
    )
    h.controller.upsert_claim(claim)
    h.controller.upsert_pod(pod)

    await h.controller.sync(Key(CLAIM, "demo", "my-pod-gpu-abcde"))

    path = f"{CLAIMS}/my-pod-gpu-abcde"
    status_put, finalizer_put, delete = h.client.calls
    assert status_put[:3] == ("PUT", f"{path}/status", {"fieldManager": MANAGER})
    assert status_put[3]["metadata"]["resourceVersion"] == "42"
    assert "managedFields" not in status_put[3]["metadata"]
    assert status_put[3]["status"] == {"reservedFor": []}
    assert finalizer_put[:3] == ("PUT", path, {"fieldManager": MANAGER})
    assert finalizer_put[3]["metadata"]["finalizers"] == []
    assert delete[:3] == ("DELETE", path, {"uid": "C"})


async def test_unconfirmed_created_claims_are_checked_with_a_live_get() -> None:
    h = Harness()
    h.controller.upsert_template(template_body())
    h.controller.upsert_pod(pod_body(claims=[template_entry("gpu", "gpu-tmpl")]))
    await h.controller.sync(Key(POD, "demo", "my-pod"))
    assert h.controller.cache.just_created_count() == 1

    h.clock.now += 61
    await h.controller.sync(CONFIRM_KEY)
    assert h.client.calls[-1][:2] == ("GET", f"{CLAIMS}/my-pod-gpu-bcdfg")
    assert h.controller.cache.just_created_count() == 0, "a 404 ends the record"


def test_unparsable_objects_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness()
    h.controller.upsert_pod(
        {
            "metadata": {"name": "broken", "namespace": "demo"},
            "spec": {"nodeName": 5, "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]},
        },
    )
    h.controller.delete_claim({"metadata": "nonsense"})
    assert h.queue.added == []
    assert "skipping Pod demo/broken that cannot be parsed" in caplog.text
    assert "skipping ResourceClaim (no metadata) that cannot be parsed" in caplog.text


def test_claims_gauge_is_computed_from_the_cache() -> None:
    h = Harness()
    h.controller.upsert_claim(claim_body("a", owner=("my-pod", "U"), entry="gpu", allocated=True))
    h.controller.upsert_claim(claim_body("b"))
    text = generate_latest().decode()
    prefix = "dra_operators_resourceclaim_resource_claims"
    assert f'{prefix}{{admin_access="false",allocated="true",source="resource_claim_template"}} 1.0' in text
    assert f'{prefix}{{admin_access="false",allocated="false",source=""}} 1.0' in text


def _api_call(method: str, path: str) -> tuple[str, str, str]:
    parts = path.strip("/").split("/")
    group = "" if parts[0] == "api" else parts[1]
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    # namespaces/<ns>/<resource>[/<name>[/<subresource>]]
    resource = rest[2] + (f"/{rest[4]}" if len(rest) > 4 else "")
    verb = {"POST": "create", "PUT": "update", "APPLY": "patch", "DELETE": "delete", "GET": "get"}[method]
    return group, resource, verb


def assert_api_calls(h: Harness, expected: set[tuple[str, str, str]]) -> None:
    """The harness's client made exactly the ``expected`` API calls, each one declared in API_CALLS."""
    used = {_api_call(method, path) for method, path, _, _ in h.client.calls}
    assert used == expected
    assert used <= set(API_CALLS)


async def test_every_request_is_a_declared_api_call() -> None:
    h = Harness()
    h.controller.upsert_template(template_body())
    h.controller.upsert_pod(pod_body(claims=[template_entry("gpu", "gpu-tmpl")]))
    await h.controller.sync(Key(POD, "demo", "my-pod"))
    pod = pod_body("p2", "U2", claims=[template_entry("gpu", "gpu-tmpl")], phase="Failed")
    pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "p2-gpu-abcde"}]
    claim = claim_body(
        "p2-gpu-abcde",
        owner=("p2", "U2"),
        entry="gpu",
        finalizers=["resource.kubernetes.io/delete-protection"],
        allocated=True,
        reserved_for=[pod_consumer("p2", "U2"), pod_consumer("ghost", "G")],
    )
    h.controller.upsert_claim(claim)
    h.controller.upsert_pod(pod)
    await h.controller.sync(Key(CLAIM, "demo", "p2-gpu-abcde"))
    h.clock.now += 61
    await h.controller.sync(CONFIRM_KEY)

    assert_api_calls(
        h,
        {
            ("resource.k8s.io", "resourceclaims", "create"),
            ("", "pods/status", "patch"),
            ("", "pods", "get"),
            ("resource.k8s.io", "resourceclaims/status", "update"),
            ("resource.k8s.io", "resourceclaims", "update"),
            ("resource.k8s.io", "resourceclaims", "delete"),
            ("resource.k8s.io", "resourceclaims", "get"),
        },
    )


def test_a_claim_version_already_held_is_not_parsed_again() -> None:
    h = Harness()
    body = claim_body("a", owner=("my-pod", "U"), entry="gpu")
    h.controller.upsert_claim(body)
    held = h.controller.cache.claim(NS, "a")
    assert held is not None

    # The same UID and resourceVersion: kopf's listing after ours delivers the same object.
    h.controller.upsert_claim(body)
    assert h.controller.cache.claim(NS, "a") is held

    changed = claim_body("a", owner=("my-pod", "U"), entry="gpu", allocated=True)
    changed["metadata"]["resourceVersion"] = "43"
    h.controller.upsert_claim(changed)
    updated = h.controller.cache.claim(NS, "a")
    assert updated is not None
    assert updated.is_allocated


CLAIMS_AND_TEMPLATES = {"resources": [{"name": "resourceclaims"}, {"name": "resourceclaimtemplates"}]}


PODGROUPS = {"resources": [{"name": "podgroups", "kind": "PodGroup", "namespaced": True}]}
"""The discovery document of a scheduling.k8s.io version that serves PodGroups."""


async def test_not_ready_until_claims_and_templates_are_served(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness()
    h.client.objects["/apis/resource.k8s.io/v1"] = {"resources": [{"name": "resourceclaims"}]}
    assert not await h.runtime.prepare()
    assert (
        "required APIs are not served: resourceclaimtemplates in resource.k8s.io/v1; not ready" in caplog.text
    )
    assert WORKLOAD_CLAIMS_NOT_SERVED not in caplog.text
    h.client.objects["/apis/resource.k8s.io/v1"] = CLAIMS_AND_TEMPLATES
    assert await h.runtime.prepare()
    # One discovery request per group version, each time: claims and templates share theirs.
    asked = [path for method, path, _, _ in h.client.calls if method == "GET"]
    assert asked.count("/apis/resource.k8s.io/v1") == 2


@pytest.mark.parametrize(
    ("mode", "served", "ready", "enabled"),
    [
        ("auto", True, True, True),
        ("auto", False, True, False),
        ("on", True, True, True),
        ("on", False, False, False),
        ("off", True, True, False),
    ],
)
async def test_podgroup_claims_follow_the_option_and_discovery(
    mode: str, served: bool, ready: bool, enabled: bool, caplog: pytest.LogCaptureFixture
) -> None:
    h = Harness(Settings.model_validate({"workload_claims": mode}))
    h.client.objects["/apis/resource.k8s.io/v1"] = CLAIMS_AND_TEMPLATES
    if served:
        h.client.objects["/apis/scheduling.k8s.io/v1beta1"] = PODGROUPS
    assert await h.runtime.prepare() is ready
    assert h.controller.cache.workload_claims is enabled
    # The words devicetaint logs too, in the same case.
    assert (WORKLOAD_CLAIMS_NOT_SERVED in caplog.messages) is not ready
    # "off" does not even watch them; "auto" and "on" do wherever they are served.
    assert h.controller.watches_pod_groups() is (mode != "off")


def test_the_not_ready_message_names_the_option_and_the_versions_looked_for() -> None:
    assert WORKLOAD_CLAIMS_NOT_SERVED == (
        "--workload-claims=on, but scheduling.k8s.io serves podgroups in none of v1beta1, v1alpha2; not ready"
    )


async def test_a_podgroup_claim_is_created_applied_and_its_event_names_the_group() -> None:
    h = Harness()
    h.controller.cache.workload_claims = True
    h.controller.upsert_template(template_body())
    h.controller.upsert_pod_group(pod_group_body(claims=[template_entry("gpu", "gpu-tmpl")]))
    assert h.queue.added == [Key(POD_GROUP, "demo", "pg")]
    before = metrics.creates.labels(
        status="success", admin_access="false", owner_api_group="scheduling.k8s.io", owner_api_kind="PodGroup"
    )._value.get()

    await h.controller.sync(Key(POD_GROUP, "demo", "pg"))

    post, apply = h.client.calls
    assert post[3]["metadata"]["ownerReferences"] == [pod_group_owner()]
    assert apply[:3] == (
        "APPLY",
        "/apis/scheduling.k8s.io/v1beta1/namespaces/demo/podgroups/pg/status",
        {"fieldManager": MANAGER, "force": "True"},
    )
    after = metrics.creates.labels(
        status="success", admin_access="false", owner_api_group="scheduling.k8s.io", owner_api_kind="PodGroup"
    )._value.get()
    assert after == before + 1

    h.controller.upsert_pod_group(pod_group_body("late", "L", claims=[template_entry("gpu", "late-tmpl")]))
    await h.controller.sync(Key(POD_GROUP, "demo", "late"))
    [(ref, type_, reason, message)] = h.events.recorded
    assert (ref.api_version, ref.kind, ref.name, ref.namespace, ref.uid) == (
        "scheduling.k8s.io/v1beta1",
        "PodGroup",
        "late",
        NS,
        "L",
    )
    assert (type_, reason) == ("Warning", "FailedResourceClaimCreation")
    assert message.startswith("PodGroupResourceClaim gpu: resource claim template")


async def test_every_podgroup_request_is_a_declared_api_call() -> None:
    h = Harness()
    h.controller.cache.workload_claims = True
    h.controller.upsert_template(template_body())
    h.controller.upsert_pod_group(pod_group_body(claims=[template_entry("gpu", "gpu-tmpl")]))
    await h.controller.sync(Key(POD_GROUP, "demo", "pg"))
    reserved = claim_body(
        "shared", allocated=True, reserved_for=[pod_group_consumer("gone", "X")], owner_ref=pod_group_owner()
    )
    h.controller.upsert_claim(reserved)
    await h.controller.sync(Key(CLAIM, "demo", "shared"))

    assert_api_calls(
        h,
        {
            ("resource.k8s.io", "resourceclaims", "create"),
            ("scheduling.k8s.io", "podgroups/status", "patch"),
            ("scheduling.k8s.io", "podgroups", "get"),
            ("resource.k8s.io", "resourceclaims/status", "update"),
        },
    )


def test_podgroups_are_discovered_newest_first_and_never_as_v1alpha1() -> None:
    from operators.resourceclaim.operator import DEFINITION

    [watch] = [w for w in DEFINITION.watches if w.plural == "podgroups"]
    # 1.37 serves v1beta1, 1.36 v1alpha2; 1.35's v1alpha1 PodGroup has no claims.
    assert watch.versions == ("v1beta1", "v1alpha2")


async def test_podgroups_served_as_v1alpha2_are_read_and_written_in_it() -> None:
    h = Harness()
    h.client.objects["/apis/resource.k8s.io/v1"] = CLAIMS_AND_TEMPLATES
    h.client.objects["/apis/scheduling.k8s.io/v1alpha2"] = PODGROUPS
    assert await h.runtime.prepare()
    assert h.controller.cache.workload_claims
    h.client.calls.clear()
    h.controller.upsert_template(template_body())
    group = pod_group_body(claims=[template_entry("gpu", "gpu-tmpl")])
    group["apiVersion"] = "scheduling.k8s.io/v1alpha2"
    h.controller.upsert_pod_group(group)
    await h.controller.sync(Key(POD_GROUP, "demo", "pg"))
    post, apply = h.client.calls
    assert post[3]["metadata"]["ownerReferences"] == [
        {**pod_group_owner(), "apiVersion": "scheduling.k8s.io/v1alpha2"}
    ]
    assert apply[1] == "/apis/scheduling.k8s.io/v1alpha2/namespaces/demo/podgroups/pg/status"
    assert apply[3]["apiVersion"] == "scheduling.k8s.io/v1alpha2"

    reserved = claim_body("shared", allocated=True, reserved_for=[pod_group_consumer("gone", "X")])
    h.controller.upsert_claim(reserved)
    await h.controller.sync(Key(CLAIM, "demo", "shared"))
    assert ("GET", "/apis/scheduling.k8s.io/v1alpha2/namespaces/demo/podgroups/gone") in {
        (method, path) for method, path, _, _ in h.client.calls
    }


async def test_the_confirmation_is_periodic_while_created_claims_wait_for_their_watch() -> None:
    h = Harness()
    interval, options = h.queue.periodic[CONFIRM_KEY]
    assert interval == 60.0
    assert options["first"] is None, "armed by a create, not at start"
    repeat_while = options["repeat_while"]
    assert not repeat_while()
    h.controller.upsert_template(template_body())
    h.controller.upsert_pod(pod_body(claims=[template_entry("gpu", "gpu-tmpl")]))
    await h.controller.sync(Key(POD, "demo", "my-pod"))
    assert (CONFIRM_KEY, 60.0) in h.queue.delayed
    assert repeat_while(), "re-armed while a created claim waits"


# -- deletions seen only as tombstones -----------------------------------------------------------

GPU_CLAIM = "my-pod-gpu-abcde"
GROUP_CLAIM = "pg-gpu-abcde"
CLAIM_NAMES = ("shared", GPU_CLAIM, GROUP_CLAIM)


def watched_world() -> dict[str, list[dict[str, Any]]]:
    """Bodies by plural, in the order they are upserted; the first of each kind is the one deleted.

    A running pod with a claim reserved for it and one generated from a template; a PodGroup with
    the claim generated for it, and a member that records it."""
    gpu = template_entry("gpu", "gpu-tmpl")
    return {
        "resourceclaimtemplates": [template_body()],
        "podgroups": [pod_group_body(claims=[gpu], statuses=[named_entry("gpu", GROUP_CLAIM)])],
        "resourceclaims": [
            claim_body(GPU_CLAIM, owner=("my-pod", "U"), entry="gpu"),
            claim_body("shared", allocated=True, reserved_for=[pod_consumer("my-pod", "U")]),
            claim_body(GROUP_CLAIM, owner_ref=pod_group_owner(), entry="gpu"),
        ],
        "pods": [
            pod_body(
                claims=[named_entry("nic", "shared"), gpu],
                statuses=[named_entry("gpu", GPU_CLAIM)],
                node_name="node-1",
                phase="Running",
            ),
            pod_body(
                "m1",
                "M1",
                claims=[gpu],
                statuses=[named_entry("gpu", GROUP_CLAIM)],
                pod_group="pg",
                node_name="node-1",
                phase="Running",
            ),
        ],
    }


EXPECTED_DELETION: dict[str, tuple[list[Key], set[str]]] = {
    "pods": ([Key(CLAIM, NS, "shared"), Key(CLAIM, NS, GPU_CLAIM)], {"U"}),
    "resourceclaims": ([Key(POD, NS, "my-pod")], set()),
    "resourceclaimtemplates": ([], set()),
    "podgroups": ([Key(CLAIM, NS, GROUP_CLAIM)], {"G"}),
}
"""Per deleted kind: the keys its deletion queues, and the consumer UIDs then remembered as deleted."""


def cache_view(cache: ClusterCache) -> tuple[object, ...]:
    """Everything the cache's readers can tell about the objects of :func:`watched_world`."""
    return (
        cache.cached_objects(),
        [cache.pod(NS, name) for name in ("my-pod", "m1")],
        [cache.claim(NS, name) for name in CLAIM_NAMES],
        [cache.pods_using_claim(NS, name) for name in CLAIM_NAMES],
        cache.template(NS, "gpu-tmpl"),
        cache.pods_using_template(NS, "gpu-tmpl"),
        cache.pod_group(NS, "pg"),
        [cache.find_generated_claim(NS, owner_uid, "gpu") for owner_uid in ("U", "G")],
        {uid for uid in ("U", "M1", "G") if cache.is_deleted_consumer(uid)},
    )


def deletion_outcome(
    deleted: Watch[ResourceClaimController], body: dict[str, Any]
) -> tuple[list[Key], tuple[object, ...]]:
    """The keys queued by ``deleted.delete(body)`` once the whole world was upserted, and the cache after."""
    h = Harness()
    h.controller.cache.workload_claims = True
    watches = {watch.plural: watch for watch in DEFINITION.watches}
    for plural, bodies in watched_world().items():
        for upserted in bodies:
            watches[plural].upsert(h.controller, upserted)
    h.queue.added.clear()
    deleted.delete(h.controller, body)
    return h.queue.added, cache_view(h.controller.cache)


@pytest.mark.parametrize("watch", DEFINITION.watches, ids=lambda watch: watch.plural)
def test_a_deletion_seen_as_a_tombstone_has_the_outcome_of_its_final_state(
    watch: Watch[ResourceClaimController],
) -> None:
    world = watched_world()
    final_state = world[watch.plural][0]
    keys, view = deletion_outcome(watch, final_state)
    assert (keys, view[-1]) == EXPECTED_DELETION[watch.plural]
    counts = view[0]
    assert isinstance(counts, dict)
    assert counts[watch.plural] == len(world[watch.plural]) - 1, "the deleted object is forgotten"

    assert deletion_outcome(watch, tombstone(final_state)) == (keys, view)


def test_the_tombstone_of_a_pod_replaced_while_unwatched_keeps_its_successor() -> None:
    h = Harness()
    old = pod_body("web-0", "U1", claims=[named_entry("gpu", "shared")])
    new = pod_body("web-0", "U2", claims=[named_entry("gpu", "other")])
    h.controller.upsert_pod(old)
    h.queue.added.clear()

    # After a watch gap the re-list delivers the successor before the predecessor's tombstone.
    h.controller.upsert_pod(new)
    h.controller.delete_pod(tombstone(old))

    assert Key(CLAIM, NS, "shared") in h.queue.added, "the predecessor's claim is released"
    assert h.controller.cache.is_deleted_consumer("U1")
    kept = h.controller.cache.pod(NS, "web-0")
    assert kept is not None
    assert kept.uid == "U2"
    assert h.controller.cache.pods_using_claim(NS, "other") == {f"{NS}/web-0"}


def test_the_tombstone_of_a_podgroup_replaced_while_unwatched_keeps_its_successor() -> None:
    h = Harness()
    h.controller.cache.workload_claims = True
    old = pod_group_body(claims=[named_entry("gpu", "shared")])
    new = pod_group_body(uid="G2", claims=[named_entry("gpu", "other")])
    h.controller.upsert_pod_group(old)
    h.queue.added.clear()

    h.controller.upsert_pod_group(new)
    h.controller.delete_pod_group(tombstone(old))

    assert h.queue.added == [Key(CLAIM, NS, "shared")], "the predecessor's claim is released"
    assert h.controller.cache.is_deleted_consumer("G")
    kept = h.controller.cache.pod_group(NS, "pg")
    assert kept is not None
    assert kept.uid == "G2"


def test_the_tombstone_of_a_template_replaced_while_unwatched_keeps_its_successor() -> None:
    h = Harness()
    h.controller.upsert_template(template_body(uid="T1"))
    h.controller.upsert_template(template_body(uid="T2"))
    h.controller.delete_template(tombstone(template_body(uid="T1")))
    kept = h.controller.cache.template(NS, "gpu-tmpl")
    assert kept is not None
    assert kept.metadata.uid == "T2"


def test_the_tombstone_of_a_claim_known_only_from_its_create_ends_the_record() -> None:
    h = Harness()
    created = claim_body(GPU_CLAIM, owner=("my-pod", "U"), entry="gpu")
    h.controller.cache.record_created(ResourceClaim.from_body(created))
    h.controller.delete_claim(tombstone(created))
    assert h.controller.cache.just_created_count() == 0
    assert h.controller.cache.find_generated_claim(NS, "U", "gpu") is None
