"""One claim's sync as one pipeline: what it writes, in which order, and the result it returns.

The pipeline runs against an in-memory API server that keeps the claim and the ledger records,
with the real API layer (``kube``) and the Noop action, so these tests see the requests a sync
makes, not the internals that make them.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from bindingattacher_builders import ATTACHED, FABRIC, Writes, attacher, claim_body, result, spawn
from runtime_support import drain

from operators.bindingattacher import pipeline as pipeline_module
from operators.bindingattacher import policy
from operators.bindingattacher.actions import AttachResult, CallOutcome, Operation, Outcome
from operators.bindingattacher.actions.factory import NoopAction
from operators.bindingattacher.cache import POLICY as POLICY_KIND
from operators.bindingattacher.cache import ClusterCache, project_claim, put_record
from operators.bindingattacher.calls import CallTracker
from operators.bindingattacher.collaborators import Collaborators
from operators.bindingattacher.decide import record_step
from operators.bindingattacher.kube import (
    InventoryMirror,
    Kube,
    LedgerWriter,
    Lookups,
    StatusWriter,
    TaintRules,
)
from operators.bindingattacher.models import DeviceAttachment, DeviceAttachPolicy, Phase, Reported
from operators.bindingattacher.pipeline import FORBIDDEN_RETRY_SECONDS, ClaimPipeline
from operators.bindingattacher.settings import Settings
from operators.bindingattacher.statemachine import CallResult, MachineSettings, Observation
from operators.core.client import ApiError, KubeClient
from operators.core.conditions import now_rfc3339
from operators.core.events import EventRecorder, ObjectRef
from operators.core.keys import CLAIM, Key
from operators.core.namespace import Presence
from operators.core.reconcile import Done, Requeue
from operators.core.workqueue import WorkQueue

POLICY = {
    "metadata": {"name": "fabric", "uid": "policy-uid", "generation": 1, "resourceVersion": "1"},
    "spec": {"driver": FABRIC, "action": {"kind": "Noop"}},
}


class Server:
    """The few API paths a claim sync uses: the claim (GET, status apply) and the ledger."""

    def __init__(self, claim: dict[str, Any]) -> None:
        self.claim = claim
        self.records: dict[str, dict[str, Any]] = {}
        self.writes: list[tuple[str, str]] = []
        self.refuse_apply: ApiError | None = None
        self.refuse_create: ApiError | None = None
        self._versions = itertools.count(50000)  # above the claim's

    def _version(self) -> str:
        return str(next(self._versions))

    async def get(self, path: str, **params: str) -> Any:
        name = path.rsplit("/", 1)[-1]
        if path.endswith("/resourceslices"):
            return {"items": []}
        if "/deviceattachments/" in path and name in self.records:
            return copy.deepcopy(self.records[name])
        if path.endswith(f"/resourceclaims/{self.claim['metadata']['name']}"):
            return copy.deepcopy(self.claim)
        raise ApiError(404, "NotFound", f"{path} not found")

    async def create(self, path: str, body: dict[str, Any], **params: str) -> Any:
        if self.refuse_create is not None:
            raise self.refuse_create
        stored = copy.deepcopy(body)
        meta = stored["metadata"]
        meta.update(
            {
                "resourceVersion": self._version(),
                "uid": f"uid-{meta['name']}",
                "creationTimestamp": now_rfc3339(),
            }
        )
        self.records[meta["name"]] = stored
        self.writes.append(("create", meta["name"]))
        return copy.deepcopy(stored)

    async def replace(self, path: str, body: dict[str, Any], **params: str) -> Any:
        name = body["metadata"]["name"]
        current = self.records[name]
        if body["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = self._version()
        stored["metadata"]["creationTimestamp"] = current["metadata"]["creationTimestamp"]
        self.records[name] = stored
        self.writes.append(("update", name))
        return copy.deepcopy(stored)

    async def delete(self, path: str, uid: str | None = None, **params: str) -> Any:
        name = path.rsplit("/", 1)[-1]
        self.records.pop(name, None)
        self.writes.append(("delete", name))
        return {}

    async def request(self, method: str, path: str, *, body: Any = None, **params: Any) -> Any:
        """The verbs the plans' executor sends through ``request``."""
        if method == "DELETE":
            return await self.delete(path, uid=(body.get("preconditions") or {}).get("uid"))
        assert method == "PATCH", method
        return await self.patch(path, body)

    async def patch(self, path: str, body: dict[str, Any], content_type: str = "", **params: str) -> Any:
        raise AssertionError(f"unexpected PATCH of {path}")

    async def apply(
        self, path: str, body: dict[str, Any], field_manager: str, force: bool = True, want_reply: bool = True
    ) -> Any:
        if self.refuse_apply is not None:
            raise self.refuse_apply
        assert path.endswith("/status")
        assert body["metadata"]["resourceVersion"] == self.claim["metadata"]["resourceVersion"]
        self.claim["status"]["devices"] = copy.deepcopy(body["status"]["devices"])
        self.claim["metadata"]["resourceVersion"] = self._version()
        self.writes.append(("apply", self.claim["metadata"]["name"]))
        return copy.deepcopy(self.claim)


class Events:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str, str]] = []

    def record(self, obj: ObjectRef, type_: str, reason: str, message: str) -> None:
        self.posted.append((obj.kind, type_, reason))


class Queue:
    """The work queue as a sync uses it: the keys it adds, and a signal when a finished call wakes
    its claim."""

    def __init__(self) -> None:
        self.added: list[Key] = []
        self.woken = asyncio.Event()

    def add(self, key: Key) -> None:
        self.added.append(key)
        if key.kind == CLAIM:
            self.woken.set()


class World:
    def __init__(self, server: Server | None = None) -> None:
        """A fresh attacher; over ``server`` it is one that starts on what another left behind."""
        body = claim_body([result()], timestamp=datetime.now(UTC).replace(microsecond=0))
        self.server = server or Server(body)
        body = self.server.claim
        client = cast(KubeClient, self.server)
        self.cache = ClusterCache()
        self.cache.claims.put(project_claim(body, False, [FABRIC]))
        for stored in self.server.records.values():
            put_record(self.cache.records, DeviceAttachment.model_validate(stored))
        state = self.cache.policies.observe(POLICY)
        verdict = policy.validate(
            DeviceAttachPolicy.model_validate(POLICY), test_actions_enabled=False, taint_rules_served=True
        )
        state.settings = verdict.settings
        state.action = NoopAction()
        state.action_kind = "Noop"
        state.accepted_generation = state.evaluated_generation = 1
        state.ready = True
        self.calls = CallTracker(10, spawn)
        self.events = Events()
        self.queue = Queue()
        writes = Writes(client, cast(EventRecorder, self.events))
        self.pipeline = ClaimPipeline(
            Collaborators(
                settings=Settings(namespace="dra-operators"),
                client=client,
                events=cast(EventRecorder, self.events),
                queue=cast(WorkQueue[Key], self.queue),
                cache=self.cache,
                kube=Kube(
                    claims=StatusWriter(writes, client, self.cache, False),
                    ledger=LedgerWriter(writes, self.cache.records, "dra-operators"),
                    lookups=Lookups(client),
                    taints=TaintRules(writes),
                ),
                calls=self.calls,
                mirror=InventoryMirror(writes, "dra-operators", spawn),
                field_manager="test",
            )
        )
        claim = self.cache.claims.get(body["metadata"]["uid"])
        assert claim is not None
        self.key = Key(CLAIM, claim.metadata.namespace, claim.metadata.name, claim.metadata.uid)

    def record(self) -> DeviceAttachment:
        (body,) = self.server.records.values()
        return DeviceAttachment.model_validate(body)

    def shown(self) -> dict[str, str]:
        (entry,) = self.server.claim["status"]["devices"]
        return {c["type"]: c["status"] for c in entry["conditions"]}

    async def call_returns(self) -> None:
        await asyncio.wait_for(self.queue.woken.wait(), 2)
        self.queue.woken.clear()


async def test_attach_then_readiness_then_the_record_in_one_update() -> None:
    w = World()
    first = await w.pipeline.sync(w.key)
    assert isinstance(first, Requeue), "a just-started call is looked at again shortly"
    assert w.server.writes == [("create", w.record().metadata.name)], "the intent is durable first"
    assert w.record().status.phase is Phase.ATTACHING
    assert ("ResourceClaim", "Normal", "AttachStarted") in w.events.posted

    await w.call_returns()
    second = await w.pipeline.sync(w.key)
    name = w.record().metadata.name
    # Readiness is applied to the claim first, and the record follows in one update that also
    # records what the claim shows.
    assert w.server.writes[1:] == [("apply", "trainer-0-gpu"), ("update", name)]
    assert w.shown()[ATTACHED] == "True"
    assert (w.record().status.phase, w.record().status.reported) == (Phase.ATTACHED, Reported.READY)
    assert ("ResourceClaim", "Normal", "Attached") in w.events.posted
    assert ("Pod", "Normal", "Attached") in w.events.posted
    assert w.calls.outcome(name) is None, "the outcome is consumed once the step is persisted"

    writes = len(w.server.writes)
    again = await w.pipeline.sync(w.key)
    assert isinstance(second, Done | Requeue)
    assert isinstance(again, Done)
    assert len(w.server.writes) == writes, "a settled claim costs no write"


class Crash(Exception):
    """The attacher stops between two writes (a crash, or a lost leadership)."""


async def test_a_restart_past_the_deadline_records_the_readiness_the_claim_shows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    w = World()
    await w.pipeline.sync(w.key)
    await w.call_returns()

    async def crash(path: str, body: dict[str, Any], **params: str) -> Any:
        raise Crash

    monkeypatch.setattr(w.server, "replace", crash)
    with pytest.raises(Crash):
        await w.pipeline.sync(w.key)
    await w.calls.close()
    assert w.shown()[ATTACHED] == "True"
    assert w.record().status.phase is Phase.ATTACHING, "readiness is applied before the record update"
    monkeypatch.undo()

    restarted = World(w.server)
    late = w.record().spec.deadline + timedelta(minutes=1)
    monkeypatch.setattr(pipeline_module, "utcnow", lambda: late)
    writes = len(w.server.writes)
    outcome = await restarted.pipeline.sync(restarted.key)
    assert isinstance(outcome, Done)
    assert w.server.writes[writes:] == [("update", w.record().metadata.name)], "no failure over readiness"
    assert [t for t, status in w.shown().items() if status == "True"] == [ATTACHED]
    assert (w.record().status.phase, w.record().status.reported) == (Phase.ATTACHED, Reported.READY)
    assert restarted.calls.counts() == {}, "the device is attached already: no call"


async def test_a_record_that_exists_already_ends_the_sync_with_a_requeue() -> None:
    w = World()
    w.server.refuse_create = ApiError(409, "AlreadyExists", "deviceattachments exists")
    outcome = await w.pipeline.sync(w.key)
    assert isinstance(outcome, Requeue)
    assert outcome.after == 0.0
    assert "exists already (AlreadyExists)" in outcome.why
    assert w.calls.counts() == {}, "no call is started for a record the ledger does not hold"
    assert w.events.posted == []


async def test_a_refused_status_write_requeues_and_tells_the_policy() -> None:
    w = World()
    await w.pipeline.sync(w.key)
    await w.call_returns()
    w.server.refuse_apply = ApiError(
        403, "Forbidden", "may not patch resourceclaims/driver for fabric.attach-test.dra-operators.io"
    )
    state = w.cache.policies.get("fabric")
    assert state is not None
    state.authorized, state.authorized_at = True, 1.0
    outcome = await w.pipeline.sync(w.key)
    assert isinstance(outcome, Requeue)
    assert outcome.after == FORBIDDEN_RETRY_SECONDS
    assert state.authorized_at == 0.0, "the policy asks the API server again at its next sync"
    assert Key(POLICY_KIND, "", "fabric") in w.queue.added
    assert ("ResourceClaim", "Warning", "StatusWriteForbidden") in w.events.posted
    assert ("DeviceAttachPolicy", "Warning", "StatusWriteForbidden") in w.events.posted
    # The readiness record waits for the claim: it is not written before the claim shows it.
    assert w.record().status.phase is Phase.ATTACHING
    name = w.record().metadata.name
    assert w.calls.outcome(name) is not None, "the call's outcome is kept for the next sync"


async def test_policies_not_yet_evaluated_hold_the_claim() -> None:
    w = World()
    state = w.cache.policies.get("fabric")
    assert state is not None
    state.evaluated_generation = None
    outcome = await w.pipeline.sync(w.key)
    assert isinstance(outcome, Requeue)
    assert w.server.writes == []


@pytest.mark.parametrize(
    ("operation", "phase"), [(Operation.ATTACH, Phase.ATTACHED), (Operation.DETACH, Phase.DETACHED)]
)
def test_the_finished_call_picks_the_transition(operation: Operation, phase: Phase) -> None:
    w = World()
    started = asyncio.run(_started_record(w))
    status = started.status.model_copy(
        update={"phase": Phase.DETACHING if operation is Operation.DETACH else Phase.ATTACHING}
    )
    record = started.model_copy(update={"status": status})
    obs = Observation(now=datetime.now(UTC), deadline=record.spec.deadline)
    finished = (operation, CallOutcome(AttachResult(Outcome.SUCCEEDED, "ok")))
    step, called = record_step(record, obs, MachineSettings(), finished)
    assert called is CallResult.SUCCEEDED
    assert step.status.phase is phase
    unchanged, none = record_step(record, obs, MachineSettings(), None)
    assert none is None
    assert unchanged.status.phase is record.status.phase


async def _started_record(w: World) -> DeviceAttachment:
    await w.pipeline.sync(w.key)
    await w.calls.close()
    return w.record()


class ClusterServer(Server):
    """The claim and ledger paths, plus what a policy sync and the Events use."""

    async def create(self, path: str, body: dict[str, Any], **params: str) -> Any:
        if path.endswith("/selfsubjectaccessreviews"):
            return {"status": {"allowed": True}}
        if path.endswith("/events"):
            return body
        return await super().create(path, body, **params)

    async def patch(self, path: str, body: dict[str, Any], content_type: str = "", **params: str) -> Any:
        return {"metadata": {**body["metadata"], "resourceVersion": "2"}}

    async def apply(
        self, path: str, body: dict[str, Any], field_manager: str, force: bool = True, want_reply: bool = True
    ) -> Any:
        if "/deviceattachpolicies/" in path:
            return body
        return await super().apply(path, body, field_manager, force)


async def test_the_controller_feeds_its_cache_and_returns_the_pipelines_result() -> None:
    body = claim_body([result()], timestamp=datetime.now(UTC).replace(microsecond=0))
    server = ClusterServer(body)
    controller = attacher(server, Presence.PRESENT)
    runtime = controller.runtime
    controller.upsert_policy(POLICY)
    policy_result = await controller.sync(Key(POLICY_KIND, "", "fabric"))
    assert isinstance(policy_result, Requeue), "the policy is looked at again (authorization recheck)"
    controller.upsert_claim(body)
    key = Key(CLAIM, "team-a", "trainer-0-gpu", body["metadata"]["uid"])
    assert controller.shared.cache.claims.get(key.uid) is not None
    queued = await drain(runtime.queue)
    assert key in queued

    assert isinstance(await controller.sync(key), Requeue)
    (name,) = server.records
    assert controller.shared.cache.records.get(name) is not None, "our own write is in the cache at once"
    assert (await asyncio.wait_for(runtime.queue.get(), 2)) == key, "the finished call wakes the claim"
    runtime.queue.done(key)
    await controller.sync(key)
    stored = DeviceAttachment.model_validate(server.records[name])
    assert (stored.status.phase, stored.status.reported) == (Phase.ATTACHED, Reported.READY)

    controller.upsert_record(server.records[name])
    server.claim["metadata"]["resourceVersion"] = "99999"
    controller.delete_claim(server.claim)
    assert controller.shared.cache.claims.get(key.uid) is None
    await runtime.events.drain(1.0)
