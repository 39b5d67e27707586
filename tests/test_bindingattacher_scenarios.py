"""The acceptance scenarios of spec §23, replayed on the pure layer (no cluster, no I/O)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from bindingattacher_builders import ATTACH_FAILED, ATTACH_TIMEOUT, ATTACHED, FABRIC, T0, claim, result

from operators.bindingattacher import ledger, policy
from operators.bindingattacher.decide import RuntimeFacts, observe_record, observe_result
from operators.bindingattacher.devicestatus import desired_entries
from operators.bindingattacher.models import (
    DetachReason,
    DeviceAttachment,
    DeviceAttachmentStatus,
    DeviceAttachPolicy,
    NodeSource,
    Phase,
    Pod,
    Reported,
    ResourceClaim,
    WaitingFor,
)
from operators.bindingattacher.policy import PolicySettings
from operators.bindingattacher.selection import SelectionRules, select
from operators.bindingattacher.statemachine import (
    CallResult,
    Effect,
    Step,
    advance,
    after_attach,
    after_detach,
    start,
)
from operators.core.conditions import LATEST_TIME, parse_time


def settings_for(spec: dict[str, Any] | None = None) -> PolicySettings:
    body = {
        "driver": FABRIC,
        "bindingTimeout": "30s",
        "safetyMargin": "8s",
        "action": {"kind": "Test", "test": {"attachDelay": "2s"}},
        "conditions": {"timeoutFailureType": ATTACH_TIMEOUT},
    }
    body.update(spec or {})
    the_policy = DeviceAttachPolicy.model_validate(
        {"metadata": {"name": "fabric", "uid": "p1"}, "spec": body}
    )
    verdict = policy.validate(the_policy, test_actions_enabled=True, taint_rules_served=True)
    assert verdict.settings is not None
    return verdict.settings


RULES = {FABRIC: SelectionRules(driver=FABRIC, ready=True)}


class World:
    """The reconciler's view: one policy, a ledger index, and the claim as last seen."""

    def __init__(self, the_claim: ResourceClaim, settings: PolicySettings | None = None) -> None:
        self.claim: ResourceClaim | None = the_claim
        self.settings = settings or settings_for()
        self.machine = self.settings.machine_settings(probe_supported=False)
        self.index = ledger.LedgerIndex()

    def apply(self, record: DeviceAttachment, step: Step) -> DeviceAttachment:
        if step.node is not None:
            record = ledger.with_node(record, step.node)
        record = record.model_copy(update={"status": step.status})
        if Effect.DELETE_RECORD in step.effects:
            self.index.remove(record.metadata.name)
        else:
            self.index.put(record)
        return record

    def first_look(
        self, now: datetime, pods: tuple[Pod, ...] = (), result_index: int = 0
    ) -> tuple[DeviceAttachment, Step | None]:
        assert self.claim is not None
        chosen = select(self.claim, RULES)
        ours = chosen.ours[result_index]
        allocation = self.claim.status.allocation
        assert allocation is not None
        assert allocation.allocation_timestamp is not None
        would_be = ledger.new_record(
            claim=self.claim,
            result=ours.result,
            allocation_timestamp=allocation.allocation_timestamp,
            policy_name="fabric",
            policy_uid="p1",
            policy_generation=1,
            deadline=self.settings.attach_deadline(allocation.allocation_timestamp),
            namespace="dra-operators",
            status=DeviceAttachmentStatus(),
        )
        facts = RuntimeFacts(now=now, pods=pods)
        step = start(
            observe_result(
                self.claim, ours, chosen.ours, self.index, self.settings, facts, would_be=would_be
            ),
            self.machine,
        )
        if step is None:
            return would_be, None
        return self.apply(would_be, step), step

    def look(self, record: DeviceAttachment, now: datetime, **facts: Any) -> tuple[DeviceAttachment, Step]:
        ours = select(self.claim, RULES).ours if self.claim is not None else ()
        obs = observe_record(
            record, self.claim, ours, self.index, self.settings, RuntimeFacts(now=now, **facts)
        )
        step = advance(record.status, obs, self.machine)
        return self.apply(record, step), step

    def answer(
        self, record: DeviceAttachment, now: datetime, result: CallResult, message: str = ""
    ) -> tuple[DeviceAttachment, Step]:
        ours = select(self.claim, RULES).ours if self.claim is not None else ()
        obs = observe_record(record, self.claim, ours, self.index, self.settings, RuntimeFacts(now=now))
        if record.status.phase is Phase.DETACHING:
            step = after_detach(record.status, obs, self.machine, result, message=message)
        else:
            step = after_attach(record.status, obs, self.machine, result, message=message)
        return self.apply(record, step), step

    def reported(self, record: DeviceAttachment) -> DeviceAttachment:
        """The status apply succeeded: remember what the claim now shows."""
        kind = {Phase.ATTACHED: Reported.READY, Phase.FAILED: Reported.FAILURE}.get(
            record.status.phase, Reported.PROGRESS
        )
        record = record.model_copy(update={"status": record.status.model_copy(update={"reported": kind})})
        self.index.put(record)
        return record

    def show(self, results: list[dict[str, Any]], now: datetime, *, reverse: bool = False) -> None:
        """The claim as the API server returns it after our apply, its entries in the given order."""
        assert self.claim is not None
        written = desired_entries(
            self.claim, self.index.all(), self.settings.condition_settings("fabric"), now
        )
        self.claim = claim(results, devices=written[::-1] if reverse else written)

    def entries(self, now: datetime) -> dict[str, dict[str, Any]]:
        assert self.claim is not None
        condition_settings = self.settings.condition_settings("fabric")
        written = desired_entries(self.claim, self.index.all(), condition_settings, now)
        return {c["type"]: c for e in written for c in e["conditions"]}


def test_scenario_1_success_path() -> None:
    world = World(claim([result("f0")], node="node-b"))
    record, step = world.first_look(T0 + timedelta(seconds=1))
    assert step is not None
    assert Effect.CALL_ATTACH in step.effects
    assert (record.status.phase, record.spec.node, record.spec.node_source) == (
        Phase.ATTACHING,
        "node-b",
        NodeSource.ALLOCATION,
    )
    assert world.entries(T0)[ATTACHED]["reason"] == "Attaching"
    record, step = world.answer(record, T0 + timedelta(seconds=3), CallResult.SUCCEEDED, "ok")
    assert step.outcome is not None
    assert step.outcome.value == "ready"
    shown = world.entries(T0 + timedelta(seconds=3))
    assert shown[ATTACHED]["status"] == "True"
    assert shown[ATTACHED]["message"] == "attached to node node-b by policy fabric: ok"
    assert shown[ATTACH_FAILED]["status"] == shown[ATTACH_TIMEOUT]["status"] == "False"


def test_scenario_2_failure_detaches_once_and_reallocation_gets_a_new_key() -> None:
    world = World(claim([result("f0")]))
    record, _ = world.first_look(T0 + timedelta(seconds=1))
    record, step = world.answer(
        record, T0 + timedelta(seconds=3), CallResult.PERMANENT_ERROR, "failing this allocation"
    )
    assert record.status.phase is Phase.FAILED
    assert world.entries(T0)[ATTACH_FAILED]["status"] == "True"
    assert world.entries(T0)[ATTACH_FAILED]["reason"] == "AttachFailed"
    record = world.reported(record)
    record, step = world.look(record, T0 + timedelta(seconds=4))
    assert (record.status.phase, record.status.detach_reason) == (Phase.DETACHING, DetachReason.FAILED)
    assert Effect.CALL_DETACH in step.effects
    record, step = world.answer(record, T0 + timedelta(seconds=5), CallResult.SUCCEEDED)
    assert record.status.phase is Phase.DETACHED
    assert Effect.DELETE_RECORD not in step.effects
    assert world.entries(T0)[ATTACH_FAILED]["status"] == "True"  # the failure stays visible
    # Another reconcile while the failed allocation is live neither adopts nor detaches again.
    record, step = world.look(record, T0 + timedelta(seconds=6))
    assert step.effects == frozenset()
    old_key = record.metadata.name
    # The scheduler deallocates, then allocates again with a new timestamp.
    world.claim = claim([result("f0")], timestamp=T0 + timedelta(seconds=40))
    _, step = world.look(record, T0 + timedelta(seconds=40))
    assert step.effects == {Effect.DELETE_RECORD}
    new, first_step = world.first_look(T0 + timedelta(seconds=41))
    assert first_step is not None
    assert new.metadata.name != old_key
    assert new.status.phase is Phase.ATTACHING


def test_scenario_3_timeout_then_early_detach() -> None:
    world = World(claim([result("f0")]))
    record, _ = world.first_look(T0 + timedelta(seconds=1))
    record, step = world.look(record, T0 + timedelta(seconds=22), call_in_flight=True)
    assert Effect.CANCEL_CALL in step.effects
    assert step.budget_exhausted is WaitingFor.NOTHING
    shown = world.entries(T0 + timedelta(seconds=22))
    assert shown[ATTACH_TIMEOUT]["status"] == "True"
    assert shown[ATTACH_TIMEOUT]["reason"] == "AttachTimeout"
    assert shown[ATTACH_FAILED]["status"] == "False"
    record = world.reported(record)
    record, step = world.look(record, T0 + timedelta(seconds=22, milliseconds=500))
    assert record.status.phase is Phase.DETACHING


def test_scenario_3b_scheduler_gives_up_first() -> None:
    world = World(claim([result("f0")]), settings_for({"bindingTimeout": "120s"}))
    record, _ = world.first_look(T0 + timedelta(seconds=1))
    world.claim = claim(allocated=False)
    record, step = world.look(record, T0 + timedelta(seconds=31), call_in_flight=True)
    assert [e.value for e in step.events] == ["AttachAbandoned"]
    assert record.status.detach_reason is DetachReason.DEALLOCATED
    assert Effect.WRITE_STATUS not in step.effects


def test_scenario_4c_allocation_only_without_pin() -> None:
    world = World(
        claim([result("l0", pool="loose-pool")], node=None),
        settings_for({"nodeResolution": "AllocationOnly"}),
    )
    record, step = world.first_look(T0 + timedelta(seconds=1))
    assert step is not None
    assert Effect.CALL_ATTACH not in step.effects
    assert record.status.attempts == 0
    assert world.entries(T0)[ATTACH_FAILED]["reason"] == "NodeNotDetermined"
    assert world.entries(T0)[ATTACH_FAILED]["status"] == "True"


def test_scenario_4b_nominated_node_fallback() -> None:
    pod = Pod.model_validate(
        {
            "metadata": {"name": "pod-0", "namespace": "team-a", "uid": "pod-uid-1"},
            "status": {"nominatedNodeName": "node-c"},
        }
    )
    world = World(claim([result("l0", pool="loose-pool")], node=None))
    record, _ = world.first_look(T0 + timedelta(seconds=1), pods=(pod,))
    assert (record.spec.node, record.spec.node_source) == ("node-c", NodeSource.POD)


def test_scenario_6d_started_after_the_deadline() -> None:
    world = World(claim([result("f0")]))
    record, step = world.first_look(T0 + timedelta(seconds=25))
    assert step is not None
    assert Effect.CALL_ATTACH not in step.effects
    assert record.status.failure is not None
    assert record.status.failure.reason == "AttachTimeout"


def test_an_allocation_stamped_in_year_9999_attaches_with_a_deadline_at_the_end_of_time() -> None:
    # Not a spec scenario: whoever writes status.allocation may write any allocationTimestamp.
    world = World(claim([result("f0")], timestamp=parse_time("9999-12-31T23:59:59Z")))
    record, step = world.first_look(T0 + timedelta(seconds=1))
    assert step is not None
    assert Effect.CALL_ATTACH in step.effects
    assert record.spec.deadline == LATEST_TIME


def test_scenario_10_same_device_next_claim_waits_for_detach() -> None:
    world = World(claim([result("f0")], uid="claim-a"))
    first, _ = world.first_look(T0 + timedelta(seconds=1))
    first, _ = world.answer(first, T0 + timedelta(seconds=3), CallResult.SUCCEEDED)
    claim_a = world.claim
    world.claim = claim([result("f0")], uid="claim-b", timestamp=T0 + timedelta(seconds=10))
    second, step = world.first_look(T0 + timedelta(seconds=10))
    assert (second.status.phase, second.status.waiting_for) == (Phase.PENDING, WaitingFor.PREVIOUS_DETACH)
    assert world.entries(T0)[ATTACHED]["reason"] == "WaitingForDetach"
    # Claim A is deleted: its record detaches; B starts only afterwards.
    claim_b, world.claim = world.claim, None
    first, step = world.look(first, T0 + timedelta(seconds=11))
    assert first.status.phase is Phase.DETACHING
    world.claim = claim_b
    second, step = world.look(second, T0 + timedelta(seconds=11))
    assert second.status.phase is Phase.PENDING
    world.claim = None
    first, step = world.answer(first, T0 + timedelta(seconds=12), CallResult.SUCCEEDED)
    assert Effect.DELETE_RECORD in step.effects
    world.claim = claim_b
    second, step = world.look(second, T0 + timedelta(seconds=12))
    assert second.status.phase is Phase.ATTACHING
    assert claim_a is not None


def test_scenario_13_reallocation_while_attaching() -> None:
    world = World(claim([result("f0")]))
    old, _ = world.first_look(T0 + timedelta(seconds=1))
    world.claim = claim([result("f0")], timestamp=T0 + timedelta(seconds=5))
    new, step = world.first_look(T0 + timedelta(seconds=5))
    assert new.status.waiting_for is WaitingFor.PREVIOUS_DETACH  # the old record still holds f0
    old, step = world.answer(old, T0 + timedelta(seconds=7), CallResult.SUCCEEDED)
    assert (old.status.phase, old.status.detach_reason) == (Phase.DETACHING, DetachReason.REALLOCATED)
    assert (
        world.entries(T0 + timedelta(seconds=7))[ATTACHED]["status"] == "False"
    )  # nothing from the old record
    old, step = world.answer(old, T0 + timedelta(seconds=8), CallResult.SUCCEEDED)
    assert Effect.DELETE_RECORD in step.effects
    new, step = world.look(new, T0 + timedelta(seconds=8))
    assert new.status.phase is Phase.ATTACHING


def _one_share_ready_the_other_failed(world: World, results: list[dict[str, Any]]) -> list[DeviceAttachment]:
    ready, _ = world.first_look(T0 + timedelta(seconds=1), result_index=0)
    broken, _ = world.first_look(T0 + timedelta(seconds=1), result_index=1)
    ready, _ = world.answer(ready, T0 + timedelta(seconds=2), CallResult.SUCCEEDED)
    ready = world.reported(ready)
    broken, _ = world.answer(broken, T0 + timedelta(seconds=3), CallResult.PERMANENT_ERROR, "share b broke")
    broken = world.reported(broken)
    return [ready, broken]


def test_scenario_shares_the_share_a_pod_binds_through_is_not_detached() -> None:
    # Two shares of one device in one claim. kube-scheduler reads, for both results, the first
    # entry of the device whatever its shareID (spec §3.2): share a shows ready, so the pod binds
    # although our failure of share b was written while no pod was bound yet.
    results = [result("f0", share_id="a"), result("f0", share_id="b")]
    world = World(claim(results))
    ready, broken = _one_share_ready_the_other_failed(world, results)
    world.show(results, T0 + timedelta(seconds=3))
    assert world.claim is not None
    assert [e.share_id for e in world.claim.status.devices] == ["a", "b"]
    for record in (ready, broken):
        held, step = world.look(record, T0 + timedelta(seconds=4))
        assert Effect.CALL_DETACH not in step.effects, f"share {record.spec.share_id} detached"
        assert held.status.phase is record.status.phase
    # Deallocation (or claim deletion) still detaches both: nothing leaks.
    world.claim = claim(allocated=False)
    for record in (ready, broken):
        gone, step = world.look(record, T0 + timedelta(seconds=40))
        assert (gone.status.phase, gone.status.detach_reason) == (Phase.DETACHING, DetachReason.DEALLOCATED)
        assert Effect.CALL_DETACH in step.effects


def test_scenario_shares_a_failure_the_scheduler_reads_detaches_every_share() -> None:
    results = [result("f0", share_id="a"), result("f0", share_id="b")]
    world = World(claim(results))
    ready, broken = _one_share_ready_the_other_failed(world, results)
    # The failed share's entry comes first: the scheduler reads the failure, the pod never binds.
    world.show(results, T0 + timedelta(seconds=3), reverse=True)
    for record in (ready, broken):
        detaching, step = world.look(record, T0 + timedelta(seconds=4))
        assert (detaching.status.phase, detaching.status.detach_reason) == (
            Phase.DETACHING,
            DetachReason.FAILED,
        )
        assert Effect.CALL_DETACH in step.effects


def test_scenario_shares_a_share_not_ready_yet_is_detached_after_a_failure() -> None:
    # The scheduler reads share a's progress entry; after our failure of share b readiness is
    # never written again for the allocation, so the pod can never bind through share a.
    results = [result("f0", share_id="a"), result("f0", share_id="b")]
    world = World(claim(results))
    attaching, _ = world.first_look(T0 + timedelta(seconds=1), result_index=0)
    broken, _ = world.first_look(T0 + timedelta(seconds=1), result_index=1)
    broken, _ = world.answer(broken, T0 + timedelta(seconds=3), CallResult.PERMANENT_ERROR, "share b broke")
    broken = world.reported(broken)
    world.show(results, T0 + timedelta(seconds=3))
    detaching, step = world.look(attaching, T0 + timedelta(seconds=4), call_in_flight=True)
    assert (detaching.status.phase, detaching.status.detach_reason) == (Phase.DETACHING, DetachReason.FAILED)
    assert step.effects == {Effect.CANCEL_CALL, Effect.CALL_DETACH}
