"""The attacher's writes as plans: which requests, with which bodies and preconditions, and which
answers end a plan with which Result. The executor itself is tested in ``test_core_plan.py``."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from bindingattacher_builders import FABRIC, Writes, claim, record, result

from operators.bindingattacher import ledger, policy
from operators.bindingattacher.decide import event_plan, refusal_events
from operators.bindingattacher.devicestatus import WriteError, apply_body, status_plan
from operators.bindingattacher.kube import (
    EXPIRES_ANNOTATION,
    LedgerWriter,
    expired_rules,
    mirror_plan,
    rule_body,
    taint_plan,
)
from operators.bindingattacher.ledger import LedgerIndex
from operators.bindingattacher.models import DeviceAttachment
from operators.bindingattacher.statemachine import Event
from operators.core.client import ApiError, KubeClient
from operators.core.conditions import FALSE, TRUE, Condition, format_time
from operators.core.discovery import ServedResource
from operators.core.events import NORMAL, WARNING, EventRecorder, ObjectRef
from operators.core.plan import Apply, Create, Delete, Patch, Plan, RecordEvent, Replace
from operators.core.reconcile import Done, Requeue
from operators.dra.attachments import RECORD_FINALIZER
from operators.dra.pools import DeviceId

RECORDS = "/apis/dra-operators.io/v1alpha1/namespaces/dra-operators/deviceattachments"
CONFLICT = ApiError(409, "Conflict", "the object has been modified")
GONE = ApiError(404, "NotFound", "not found")
BROKEN = ApiError(500, "InternalError", "etcd is down")


def stored(finalizers: tuple[str, ...] = (RECORD_FINALIZER,)) -> DeviceAttachment:
    """A record as the API server keeps it: with a UID and a resourceVersion."""
    fresh = record()
    meta = fresh.metadata.model_copy(
        update={"uid": "rec-uid", "resource_version": "41", "finalizers": finalizers}
    )
    return fresh.model_copy(update={"metadata": meta})


def test_a_record_is_created_with_its_first_phase_and_a_namesake_is_stale() -> None:
    rec = record()
    (create,) = ledger.create_plan(rec, "dra-operators").steps
    assert isinstance(create, Create)
    assert create.path == RECORDS
    assert create.body == ledger.manifest(rec)
    assert create.field_manager
    assert callable(create.ends)
    stale = create.ends(ApiError(409, "AlreadyExists", "exists"))
    assert stale == Requeue(0.0, f"record {rec.metadata.name}: exists already (AlreadyExists)")
    assert create.ends(BROKEN) is None, "any other refusal is raised"


def test_an_update_replaces_the_version_it_was_decided_on() -> None:
    rec = stored()
    (update,) = ledger.update_plan(rec, "dra-operators").steps
    assert isinstance(update, Replace)
    assert update.path == f"{RECORDS}/{rec.metadata.name}"
    meta = update.body["metadata"]
    assert (meta["uid"], meta["resourceVersion"], meta["finalizers"]) == ("rec-uid", "41", [RECORD_FINALIZER])
    assert update.body["status"] == ledger.status_body(rec.status)
    assert callable(update.ends)
    for answer in (CONFLICT, GONE):
        assert update.ends(answer) == Requeue(
            0.0, f"record {rec.metadata.name}: changed meanwhile ({answer.reason})"
        )
    assert update.ends(BROKEN) is None


def test_finishing_a_record_releases_our_finalizer_then_deletes_it_by_uid() -> None:
    rec = stored(finalizers=(RECORD_FINALIZER, "someone-else"))
    release = ledger.release_plan(rec, "dra-operators")
    assert release is not None
    (put,) = release.steps
    assert isinstance(put, Replace)
    assert put.body["metadata"]["finalizers"] == ["someone-else"]
    assert 404 in put.tolerate, "a record gone already is finished"
    assert callable(put.ends)
    assert put.ends(CONFLICT) == Requeue(0.0, f"record {rec.metadata.name}: changed meanwhile (Conflict)")
    assert put.ends(GONE) is None
    assert ledger.delete_plan(rec, "dra-operators") == Plan(
        (Delete(f"{RECORDS}/{rec.metadata.name}", "rec-uid"),)
    )


def test_a_record_without_our_finalizer_or_never_stored_is_only_deleted() -> None:
    assert ledger.release_plan(stored(finalizers=()), "dra-operators") is None
    assert ledger.release_plan(record(), "dra-operators") is None, "no resourceVersion to release from"


def test_a_claim_status_write_is_one_apply_whose_every_refusal_is_classified() -> None:
    the_claim = claim([result("f0")])
    entries = [{"driver": FABRIC, "pool": "pool-a", "device": "f0", "conditions": []}]
    (apply,) = status_plan(the_claim, FABRIC, entries).steps
    assert isinstance(apply, Apply)
    assert apply.manager == f"dra-operators.io/binding-attacher/{FABRIC}", "one field manager per driver"
    meta = the_claim.metadata
    assert (
        apply.path
        == f"/apis/resource.k8s.io/v1/namespaces/{meta.namespace}/resourceclaims/{meta.name}/status"
    )
    assert apply.body == apply_body(the_claim, entries)
    assert apply.tolerate == frozenset(), "a claim gone (404) is a refusal like the others"


def test_the_policy_finalizer_is_patched_on_the_version_read() -> None:
    (patch,) = policy.finalizer_plan("fabric", "12", ("dra-operators.io/attachments",)).steps
    assert patch == Patch(
        "/apis/dra-operators.io/v1alpha1/deviceattachpolicies/fabric",
        {"metadata": {"finalizers": ["dra-operators.io/attachments"], "resourceVersion": "12"}},
        ends={409: Requeue(0.5, "policy fabric changed while setting its finalizer")},
    )
    assert 404 in patch.tolerate, "a policy gone is done"


POLICY_REF = ObjectRef("dra-operators.io/v1alpha1", "DeviceAttachPolicy", "fabric", None, "policy-uid")
NOW = "2026-01-01T00:00:00Z"


def accepted(status: str = TRUE, reason: str = "Valid", message: str = "") -> Condition:
    return Condition(
        type=policy.ACCEPTED, status=status, reason=reason, message=message, observed_generation=2
    )


def test_a_policy_status_is_applied_with_the_event_of_its_acceptance() -> None:
    plan = policy.status_plan(POLICY_REF, {}, 2, (accepted(),), {"attached": 1}, NOW)
    apply, event = plan.steps
    assert isinstance(apply, Apply)
    assert apply.path == "/apis/dra-operators.io/v1alpha1/deviceattachpolicies/fabric/status"
    assert apply.body["metadata"] == {"name": "fabric", "uid": "policy-uid"}, "only the policy read"
    assert apply.uid == "policy-uid"
    status = apply.body["status"]
    assert (status["observedGeneration"], status["records"]) == (2, {"attached": 1})
    assert [c["type"] for c in status["conditions"]] == [policy.ACCEPTED]
    assert apply.ends == {404: Done("the policy is gone")}, "no Event about a policy that is gone"
    assert event == RecordEvent(POLICY_REF, NORMAL, "PolicyAccepted", "the policy was accepted")


def test_a_policy_status_that_would_change_only_its_timestamps_is_not_written() -> None:
    first = policy.status_plan(POLICY_REF, {}, 2, (accepted(),), {}, NOW)
    apply = first.steps[0]
    assert isinstance(apply, Apply)
    written = apply.body["status"]
    assert policy.status_plan(POLICY_REF, written, 2, (accepted(),), {}, "2026-01-02T00:00:00Z") == Plan()
    (again,) = policy.status_plan(POLICY_REF, written, 3, (accepted(),), {}, NOW).steps
    assert isinstance(again, Apply), "a new generation is written, without a second Event"


def test_a_change_of_acceptance_is_told_once_per_status_and_reason() -> None:
    was = accepted().to_dict()
    assert policy.accepted_event(POLICY_REF, was, accepted(message="other words")) is None
    rejected = accepted(FALSE, "InvalidSpec", "spec.bindingTimeout: too long")
    assert policy.accepted_event(POLICY_REF, was, rejected) == RecordEvent(
        POLICY_REF, WARNING, "PolicyRejected", "InvalidSpec: spec.bindingTimeout: too long"
    )


def test_the_events_of_a_sync_go_to_each_target() -> None:
    the_claim = claim([result("f0")])
    rec = record(the_claim)
    # Whole: the recorder cuts every operator's Event messages to the API limit.
    plan = event_plan([(Event.ATTACH_FAILED, rec, "x" * 2000)], the_claim, max_pod_events=0)
    (event,) = plan.steps
    assert isinstance(event, RecordEvent)
    assert (event.ref.kind, event.type, event.reason) == ("ResourceClaim", WARNING, "AttachFailed")
    assert "x" * 2000 in event.message
    (on_record,) = event_plan([(Event.DETACHED, rec, "")], None, max_pod_events=0).steps
    assert isinstance(on_record, RecordEvent)
    assert on_record.ref.kind == "DeviceAttachment", "an Event about a claim that is gone goes to the record"


def test_a_refused_status_write_is_told_on_the_claim_and_a_missing_grant_on_the_policy() -> None:
    the_claim = claim([result("f0")])
    forbidden = ApiError(403, "Forbidden", "no")
    claim_event, policy_event = refusal_events(the_claim, FABRIC, WriteError.FORBIDDEN, forbidden, POLICY_REF)
    assert claim_event.reason == policy_event.reason == "StatusWriteForbidden"
    assert claim_event.message == f"status.devices entries of driver {FABRIC} were refused (403): no"
    assert policy_event.ref == POLICY_REF
    assert len(refusal_events(the_claim, FABRIC, WriteError.FORBIDDEN, forbidden, None)) == 1
    (invalid,) = refusal_events(the_claim, FABRIC, WriteError.INVALID, ApiError(422, "Invalid", "bad"), None)
    assert (invalid.type, invalid.reason, invalid.message) == (WARNING, "StatusWriteInvalid", "bad")
    assert refusal_events(the_claim, FABRIC, WriteError.CONFLICT, CONFLICT, POLICY_REF) == ()


RULES = ServedResource("resource.k8s.io", "v1", "devicetaintrules", namespaced=False, kind="DeviceTaintRule")


def test_a_failure_taint_is_created_once() -> None:
    device = DeviceId(FABRIC, "pool-a", "f0")
    expires = datetime(2026, 1, 1, tzinfo=UTC)
    (create,) = taint_plan(RULES, device, "AttachFailed", "fabric", expires).steps
    assert create == Create(
        "/apis/resource.k8s.io/v1/devicetaintrules",
        rule_body("resource.k8s.io/v1", device, "AttachFailed", "fabric", expires),
        field_manager=True,
    )
    assert 409 in create.tolerate, "a rule that exists already taints the device"


def test_the_sweep_deletes_only_expired_rules_each_by_uid() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)

    def rule(name: str, expires: datetime) -> dict[str, object]:
        annotations = {EXPIRES_ANNOTATION: format_time(expires)}
        return {"metadata": {"name": name, "uid": f"uid-{name}", "annotations": annotations}}

    listing = {"items": [rule("old", now - timedelta(seconds=1)), rule("new", now + timedelta(hours=1))]}
    assert expired_rules(listing, RULES, now) == [
        Delete("/apis/resource.k8s.io/v1/devicetaintrules/old", "uid-old")
    ]


def test_the_inventory_mirror_applies_the_whole_data_and_retries_every_refusal() -> None:
    path = "/api/v1/namespaces/dra-operators/configmaps/inv"
    (apply,) = mirror_plan(path, "inv", "dra-operators", {"da-1": "a"}).steps
    assert isinstance(apply, Apply)
    assert apply.body == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "inv", "namespace": "dra-operators"},
        "data": {"da-1": "a"},
    }
    assert apply.tolerate == frozenset()


class LedgerServer:
    """One stored record; ``refuse`` answers the next PUT with an error."""

    def __init__(self, body: dict[str, Any] | None) -> None:
        self.body = body
        self.refuse: ApiError | None = None
        self.sent: list[tuple[str, str, dict[str, str]]] = []

    async def get(self, path: str, **params: str) -> Any:
        self.sent.append(("GET", path, params))
        if self.body is None:
            raise GONE
        return copy.deepcopy(self.body)

    async def replace(self, path: str, body: dict[str, Any], **params: str) -> Any:
        self.sent.append(("PUT", path, params))
        if self.refuse is not None:
            raise self.refuse
        self.body = {**copy.deepcopy(body), "metadata": {**body["metadata"], "resourceVersion": "42"}}
        return copy.deepcopy(self.body)

    async def request(self, method: str, path: str, *, body: Any = None, **params: Any) -> Any:
        assert method == "DELETE"
        self.sent.append(("DELETE", path, body["preconditions"]))
        self.body = None
        return None


def ledger_writer(server: LedgerServer) -> tuple[LedgerWriter, LedgerIndex]:
    index = LedgerIndex()
    writes = Writes(cast(KubeClient, server), cast(EventRecorder, None), "dra-operators-bindingattacher")
    return LedgerWriter(writes, index, "dra-operators"), index


async def test_finishing_releases_then_deletes_and_a_record_gone_already_is_not_deleted() -> None:
    rec = stored()
    path = f"{RECORDS}/{rec.metadata.name}"
    server = LedgerServer(ledger.stored_body(rec, rec.metadata.finalizers))
    writer, index = ledger_writer(server)
    index.put(rec)
    assert await writer.finish(rec) is None
    assert server.sent == [
        ("PUT", path, {"fieldManager": "dra-operators-bindingattacher"}),
        ("DELETE", path, {"uid": "rec-uid"}),
    ]
    assert index.get(rec.metadata.name) is None
    server.refuse, server.sent = GONE, []
    index.put(rec)
    assert await writer.finish(rec) is None
    assert [method for method, _, _ in server.sent] == ["PUT"]
    assert index.get(rec.metadata.name) is None


async def test_a_write_on_a_stale_record_rereads_it_and_requeues() -> None:
    rec = stored()
    server = LedgerServer(ledger.stored_body(rec, rec.metadata.finalizers))
    writer, index = ledger_writer(server)
    server.refuse = CONFLICT
    answer = await writer.update(rec)
    assert answer == Requeue(0.0, f"record {rec.metadata.name}: changed meanwhile (Conflict)")
    assert [method for method, _, _ in server.sent] == ["PUT", "GET"]
    assert index.get(rec.metadata.name) is not None, "the re-read record is in the index"
    server.body = None
    assert await writer.finish(rec) == Requeue(
        0.0, f"record {rec.metadata.name}: changed meanwhile (Conflict)"
    )
    assert index.get(rec.metadata.name) is None, "a record found gone on the re-read leaves the index"
