"""The coexistence guard: the in-tree controllers' signatures, and what tripping it does."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client
from prometheus_client import REGISTRY

from operators.core.client import ApiError, KubeClient
from operators.core.coexistence import ASK_AGAIN_SECONDS, Evidence, Guard, InTreeController, find_evidence
from operators.core.events import EventRecorder
from operators.core.health import Health
from operators.core.keys import POD, Key
from operators.core.runtime import OperatorDefinition, Runtime, _ask_again, _in_tree_controller_acts
from operators.core.settings import InTreeReplacementSettings
from operators.core.workqueue import WorkQueue
from operators.devicetaint.operator import IN_TREE as DEVICETAINT
from operators.poolstatus.operator import IN_TREE as POOLSTATUS
from operators.resourceclaim.operator import IN_TREE as RESOURCECLAIM

pytestmark = pytest.mark.unit

STARTED = datetime(2026, 12, 2, 15, 0, 0, tzinfo=UTC)
AFTER = "2026-12-02T15:00:07Z"
BEFORE = "2026-12-01T09:30:00Z"


def _entry(
    manager: str, operation: str, fields: dict[str, Any], subresource: str = "", time: str = AFTER
) -> dict[str, Any]:
    entry = {
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "time": time,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _object(api_version: str, kind: str, *entries: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "x", "namespace": "ns", "uid": "u-1", "managedFields": list(entries)},
        **extra,
    }


CLAIM_STATUSES: dict[str, Any] = {
    "f:status": {"f:resourceClaimStatuses": {'k:{"name":"gpu"}': {".": {}, "f:name": {}}}}
}
CREATED_CLAIM: dict[str, Any] = {
    "f:metadata": {
        "f:annotations": {".": {}, "f:resource.kubernetes.io/pod-claim-name": {}},
        "f:generateName": {},
        "f:ownerReferences": {},
    },
    "f:spec": {"f:devices": {}},
}
RULE_CONDITIONS: dict[str, Any] = {"f:status": {"f:conditions": {'k:{"type":"EvictionInProgress"}': {}}}}
DISRUPTION: dict[str, Any] = {
    "f:status": {"f:conditions": {'k:{"type":"DisruptionTarget"}': {".": {}, "f:reason": {}}}}
}
REQUEST_STATUS: dict[str, Any] = {"f:status": {".": {}, "f:conditions": {}, "f:poolCount": {}}}


def _disrupted(reason: str) -> dict[str, Any]:
    return {"conditions": [{"type": "DisruptionTarget", "status": "True", "reason": reason}]}


def _pod_disrupted_by(manager: str, reason: str) -> dict[str, Any]:
    """A pod whose DisruptionTarget condition ``manager`` set with ``reason``."""
    return _object("v1", "Pod", _entry(manager, "Update", DISRUPTION, "status"), status=_disrupted(reason))


def _pod_claim_statuses_by(manager: str, operation: str) -> dict[str, Any]:
    """A pod whose claim statuses ``manager`` wrote with ``operation``."""
    return _object("v1", "Pod", _entry(manager, operation, CLAIM_STATUSES, "status"))


def _claim_written_by(manager: str, fields: dict[str, Any]) -> dict[str, Any]:
    """A ResourceClaim with one update by ``manager`` of ``fields``."""
    return _object("resource.k8s.io/v1", "ResourceClaim", _entry(manager, "Update", fields))


def _request_status_written_by(api_version: str, manager: str) -> dict[str, Any]:
    """A ResourcePoolStatusRequest of ``api_version`` whose status ``manager`` updated."""
    return _object(
        api_version, "ResourcePoolStatusRequest", _entry(manager, "Update", REQUEST_STATUS, "status")
    )


IN_TREE_WRITES = [
    (RESOURCECLAIM, "pods", _pod_claim_statuses_by("ResourceClaimController", "Apply")),
    (
        DEVICETAINT,
        "devicetaintrules",
        _object(
            "resource.k8s.io/v1",
            "DeviceTaintRule",
            _entry("device-taint-eviction-controller", "Apply", RULE_CONDITIONS, "status"),
        ),
    ),
    (DEVICETAINT, "pods", _pod_disrupted_by("kube-controller-manager", "DeletionByDeviceTaintManager")),
    (
        POOLSTATUS,
        "resourcepoolstatusrequests",
        _request_status_written_by("resource.k8s.io/v1alpha3", "kube-controller-manager"),
    ),
    (
        RESOURCECLAIM,
        "podgroups",
        _object(
            "scheduling.k8s.io/v1beta1",
            "PodGroup",
            _entry("ResourceClaimController", "Apply", CLAIM_STATUSES, "status"),
        ),
    ),
]


@pytest.mark.parametrize(("controller", "plural", "body"), IN_TREE_WRITES)
def test_each_in_tree_write_is_evidence(
    controller: InTreeController, plural: str, body: dict[str, Any]
) -> None:
    found = find_evidence(controller, plural, body, STARTED)
    assert found is not None
    assert (found.kind, found.namespace, found.name, found.uid, found.time) == (
        body["kind"],
        "ns",
        "x",
        "u-1",
        AFTER,
    )
    message = found.message(allowed=False)
    assert f"--controllers=*,-{controller.name}" in message
    assert "stopped writing" in message


@pytest.mark.parametrize(("controller", "plural", "body"), IN_TREE_WRITES)
def test_an_in_tree_write_older_than_the_operator_is_no_evidence(
    controller: InTreeController, plural: str, body: dict[str, Any]
) -> None:
    """What an in-tree controller wrote before it was switched off (a migration) stays on the
    objects; only what it writes while this operator runs counts."""
    body = copy.deepcopy(body)
    for entry in body["metadata"]["managedFields"]:
        entry["time"] = BEFORE
    assert find_evidence(controller, plural, body, STARTED) is None


@pytest.mark.parametrize(
    ("controller", "plural", "body"),
    [
        # A user's server-side apply of the same fields, with kubectl's manager.
        (RESOURCECLAIM, "pods", _pod_claim_statuses_by("kubectl", "Apply")),
        # Our own writes.
        (RESOURCECLAIM, "pods", _pod_claim_statuses_by("dra-operators-resourceclaim", "Apply")),
        (RESOURCECLAIM, "resourceclaims", _claim_written_by("dra-operators-resourceclaim", CREATED_CLAIM)),
        # A claim created under kube-controller-manager's own field manager: a tenant allowed to
        # create claims can choose any manager (issue #38), so a claim alone is never evidence.
        (RESOURCECLAIM, "resourceclaims", _claim_written_by("kube-controller-manager", CREATED_CLAIM)),
        # A claim a user created with kubectl, even one carrying the annotation.
        (RESOURCECLAIM, "resourceclaims", _claim_written_by("kubectl-create", CREATED_CLAIM)),
        # kube-controller-manager's garbage collector touching a claim's metadata, not creating it.
        (
            RESOURCECLAIM,
            "resourceclaims",
            _claim_written_by("kube-controller-manager", {"f:metadata": {"f:finalizers": {}}}),
        ),
        # The right manager and fields, but a status update, not an apply.
        (RESOURCECLAIM, "pods", _pod_claim_statuses_by("ResourceClaimController", "Update")),
        # The node-taint eviction and pod GC write DisruptionTarget under the same manager.
        (DEVICETAINT, "pods", _pod_disrupted_by("kube-controller-manager", "DeletionByTaintManager")),
        (DEVICETAINT, "pods", _pod_disrupted_by("kube-controller-manager", "DeletionByPodGC")),
        # Our eviction: the same reason, our manager.
        (DEVICETAINT, "pods", _pod_disrupted_by("dra-operators-devicetaint", "DeletionByDeviceTaintManager")),
        # The project CRD shares the plural; kube-controller-manager never writes it.
        (
            POOLSTATUS,
            "resourcepoolstatusrequests",
            _request_status_written_by("dra-operators.io/v1alpha1", "kube-controller-manager"),
        ),
        # A watched kind without a signature.
        (
            DEVICETAINT,
            "resourceslices",
            _object("resource.k8s.io/v1", "ResourceSlice", _entry("kube-controller-manager", "Update", {})),
        ),
    ],
)
def test_ordinary_writes_are_no_evidence(
    controller: InTreeController, plural: str, body: dict[str, Any]
) -> None:
    assert find_evidence(controller, plural, body, STARTED) is None


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"metadata": None},
        {"metadata": {"managedFields": None}},
        {"metadata": {"managedFields": ["odd", None, {"manager": "ResourceClaimController"}]}},
        _object(
            "v1",
            "Pod",
            _entry("ResourceClaimController", "Apply", CLAIM_STATUSES, "status", time="yesterday"),
        ),
        _object(
            "v1",
            "Pod",
            _entry("ResourceClaimController", "Apply", CLAIM_STATUSES, "status", time="2026-12-02T15:00:07"),
        ),
        _object(
            "v1",
            "Pod",
            _entry("ResourceClaimController", "Apply", CLAIM_STATUSES, "status", time="0001-01-01T00:00:00Z"),
        ),
        _object("v1", "Pod", {**_entry("ResourceClaimController", "Apply", {}, "status"), "fieldsV1": "odd"}),
    ],
)
def test_odd_objects_are_no_evidence_and_raise_nothing(body: dict[str, Any]) -> None:
    assert find_evidence(RESOURCECLAIM, "pods", body, STARTED) is None


def test_the_guard_reports_the_first_evidence_once() -> None:
    reported: list[Evidence] = []
    guard = Guard(DEVICETAINT, STARTED.replace(microsecond=123), reported.append)
    (_, _, rule) = IN_TREE_WRITES[1]
    guard.observe("resourcetemplates", rule)
    assert reported == [], "only the kinds of its signatures are looked at"
    guard.observe("devicetaintrules", rule)
    guard.observe("devicetaintrules", rule)
    assert [e.kind for e in reported] == ["DeviceTaintRule"]
    assert guard.evidence is reported[0]


FORGEABLE = [(c, p, b) for c, p, b in IN_TREE_WRITES if p in ("pods", "podgroups")]


@pytest.mark.parametrize(("controller", "plural", "body"), FORGEABLE)
def test_a_signature_a_tenant_can_write_is_a_question_not_a_verdict(
    controller: InTreeController, plural: str, body: dict[str, Any]
) -> None:
    """kube-apiserver keeps the managedFields a client sends with a pod or PodGroup of its own,
    entry and time included: any tenant could stop the operator with one pod. The operator asks its
    own question instead, at most once a minute however many such objects come."""
    reported: list[Evidence] = []
    asked: list[Evidence] = []
    now = [0.0]
    guard = Guard(controller, STARTED, reported.append, suspect=asked.append, clock=lambda: now[0])
    guard.observe(plural, body)
    guard.observe(plural, body)
    assert (reported, [e.kind for e in asked]) == ([], [body["kind"]])
    now[0] = ASK_AGAIN_SECONDS
    guard.observe(plural, body)
    assert len(asked) == 2
    guard.found(asked[-1])
    assert reported == [asked[-1]], "the answer to the question is the verdict"


@pytest.mark.parametrize(("controller", "plural", "body"), FORGEABLE)
def test_without_a_question_to_ask_a_forgeable_signature_is_only_logged(
    controller: InTreeController, plural: str, body: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    reported: list[Evidence] = []
    guard = Guard(controller, STARTED, reported.append)
    guard.observe(plural, body)
    assert reported == []
    assert guard.evidence is None
    assert "which any client may write on this kind; not taken as evidence" in caplog.text


def test_only_the_kinds_tenants_write_are_forgeable() -> None:
    forgeable = {
        (controller.name, signature.plural)
        for controller in (RESOURCECLAIM, DEVICETAINT, POOLSTATUS)
        for signature in controller.signatures
        if signature.forgeable
    }
    assert forgeable == {
        ("resourceclaim-controller", "pods"),
        ("resourceclaim-controller", "podgroups"),
        ("device-taint-eviction-controller", "pods"),
    }


def test_a_guard_without_an_in_tree_counterpart_never_reports() -> None:
    reported: list[Evidence] = []
    guard = Guard(None, STARTED, reported.append)
    for _, plural, body in IN_TREE_WRITES:
        guard.observe(plural, body)
    assert reported == []


# -- what tripping does -----------------------------------------------------------------------


class Controller:
    def __init__(self) -> None:
        self.synced: list[Key] = []

    async def prepare(self) -> bool:
        return True

    async def sync(self, key: Key) -> None:
        self.synced.append(key)


def _runtime(client: KubeClient, allowed: bool) -> Runtime:
    return Runtime(
        name="resourceclaim",
        settings=InTreeReplacementSettings(allow_in_tree_controller=allowed),
        client=client,
        reader=client.sibling(),
        events=EventRecorder(client.sibling(own_fence=True), "dra-operators-resourceclaim"),
        health=Health(),
        queue=WorkQueue("test-coexistence"),
        controller=Controller(),
    )


def _in_tree_write_seen(runtime: Runtime, write: tuple[InTreeController, str, dict[str, Any]]) -> Evidence:
    """Has ``runtime`` act on the evidence of one of ``IN_TREE_WRITES``, and returns that evidence."""
    (controller, plural, body) = write
    evidence = find_evidence(controller, plural, body, STARTED)
    assert evidence is not None
    _in_tree_controller_acts(runtime, evidence)
    return evidence


def _detected(controller: str) -> float | None:
    return REGISTRY.get_sample_value("dra_operators_in_tree_controller_detected", {"controller": controller})


async def _refused(client: KubeClient, method: str) -> bool:
    try:
        await client.request(method, "/api/v1/namespaces/ns/pods/x")
    except ApiError as err:
        return err.reason == "WriteRefused"
    raise AssertionError("port 9 answers nothing")


@pytest.fixture
async def offline_client() -> AsyncIterator[KubeClient]:
    """A client of an address where nothing answers: a write refused by the fence fails with
    WriteRefused, one that is sent fails in the transport."""
    configuration = k8s_client.Configuration()
    configuration.host = "https://127.0.0.1:9"
    client = KubeClient(configuration)
    yield client
    await client.close()


async def test_evidence_stops_writes_and_readiness_but_not_reads_events_or_liveness(
    offline_client: KubeClient,
) -> None:
    client = offline_client  # the fence's client, named as in the checks below
    runtime = _runtime(client, allowed=False)
    _in_tree_write_seen(runtime, IN_TREE_WRITES[0])

    ready, why = runtime.health.ready()
    assert not ready
    assert why.startswith("in-tree controller: kube-controller-manager's resourceclaim-controller acts")
    assert "--controllers=*,-resourceclaim-controller" in why
    assert runtime.health.alive()[0], "live: a restart would only come back to the same state"
    assert _detected("resourceclaim-controller") == 1
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert await _refused(client, method), method
        assert await _refused(client.sibling(), method), "the siblings share the fence"
    assert not await _refused(client, "GET"), "reads go on"
    assert not await _refused(runtime.events.client, "POST"), "Events go on"

    await runtime.sync(Key(POD, "ns", "x"))
    assert runtime.controller.synced == [], "queued keys are dropped"
    await runtime.events.drain(5)


async def test_allowed_evidence_is_reported_and_the_operator_acts(offline_client: KubeClient) -> None:
    client = offline_client  # the fence's client, named as in the checks below
    runtime = _runtime(client, allowed=True)
    evidence = _in_tree_write_seen(runtime, IN_TREE_WRITES[2])
    assert "acting anyway" in evidence.message(allowed=True)
    assert runtime.health.refused == ""
    assert _detected("device-taint-eviction-controller") == 1
    assert not await _refused(client, "POST")
    await runtime.sync(Key(POD, "ns", "x"))
    assert runtime.controller.synced == [Key(POD, "ns", "x")]
    await runtime.events.drain(5)


@pytest.mark.parametrize("answer", [True, False])
async def test_a_question_asked_again_trips_the_guard_on_its_answer_alone(
    offline_client: KubeClient, answer: bool
) -> None:
    """The runtime's ``suspect``: the operator's probe (in a namespace tenants cannot write) is
    asked again, and only its evidence is a verdict."""
    runtime = _runtime(offline_client, allowed=False)
    (controller, plural, pod) = IN_TREE_WRITES[0]
    probe_answer = find_evidence(controller, plural, pod, STARTED)
    asked: list[InTreeController] = []

    async def ask(_runtime: Runtime, in_tree: InTreeController) -> Evidence | None:
        asked.append(in_tree)
        return probe_answer if answer else None

    definition = OperatorDefinition(
        name="resourceclaim",
        settings_class=InTreeReplacementSettings,
        default_workers=1,
        make_controller=lambda _: Controller(),
        watches=(),
        in_tree=controller,
        ask_in_tree=ask,
    )
    runtime.guard = Guard(
        controller,
        STARTED,
        lambda evidence: _in_tree_controller_acts(runtime, evidence),
        suspect=lambda _: _ask_again(runtime, definition),
    )
    runtime.guard.observe(plural, pod)
    assert runtime.health.refused == "", "the pod alone is no verdict"
    await asyncio.wait_for(asyncio.gather(*runtime._background), 5)
    assert asked == [controller]
    assert (runtime.guard.evidence is probe_answer) is answer
    assert bool(runtime.health.refused) is answer
    await runtime.events.drain(5)
