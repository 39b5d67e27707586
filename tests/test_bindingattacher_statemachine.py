from __future__ import annotations

from datetime import timedelta

from bindingattacher_builders import DEADLINE, T0

from operators.bindingattacher.models import (
    AttachFailure,
    DetachReason,
    DeviceAttachmentStatus,
    FailureKind,
    NodeSource,
    Phase,
    Reported,
    TaintDevice,
    WaitingFor,
)
from operators.bindingattacher.selection import EntryState, NodeResolution
from operators.bindingattacher.statemachine import (
    AttachmentOutcome,
    CallResult,
    Effect,
    Event,
    IdentityState,
    MachineSettings,
    Observation,
    advance,
    after_attach,
    after_detach,
    start,
)

SETTINGS = MachineSettings(rand=lambda: 0.5)
NOW = T0 + timedelta(seconds=1)
NODE = NodeResolution.resolved("node-a", NodeSource.ALLOCATION)


def obs(**changes: object) -> Observation:
    base: dict[str, object] = {"now": NOW, "deadline": DEADLINE, "node": NODE}
    base.update(changes)
    return Observation(**base)  # type: ignore[arg-type]


def attaching(attempts: int = 1) -> DeviceAttachmentStatus:
    return DeviceAttachmentStatus(phase=Phase.ATTACHING, attempts=attempts, last_transition_time=T0)


# --- start ---------------------------------------------------------------------------------------


def test_fresh_result_starts_attaching() -> None:
    step = start(obs(), SETTINGS)
    assert step is not None
    assert step.status.phase is Phase.ATTACHING
    assert step.status.attempts == 1
    assert step.effects == {Effect.CALL_ATTACH, Effect.WRITE_STATUS}
    assert step.events == (Event.ATTACH_STARTED,)
    assert step.node == NODE


def test_past_deadline_fails_without_call() -> None:
    step = start(obs(now=DEADLINE - timedelta(milliseconds=500)), SETTINGS)
    assert step is not None
    assert step.status.phase is Phase.FAILED
    assert step.status.attempts == 0
    assert step.status.failure is not None
    assert step.status.failure.kind is FailureKind.TIMEOUT
    assert step.status.failure.reason == "AttachTimeout"
    assert Effect.CALL_ATTACH not in step.effects
    assert Effect.WRITE_STATUS in step.effects
    assert step.outcome is AttachmentOutcome.TIMEOUT
    assert step.events == (Event.ATTACH_TIMEOUT,)


def test_node_failure_fails_at_once_without_call() -> None:
    step = start(obs(node=NodeResolution.failed("the allocation does not name a single node")), SETTINGS)
    assert step is not None
    assert step.status.phase is Phase.FAILED
    assert step.status.failure is not None
    assert step.status.failure.reason == "NodeNotDetermined"
    assert step.status.attempts == 0
    assert step.outcome is AttachmentOutcome.NODE_NOT_DETERMINED


def test_waits_are_pending_with_reason() -> None:
    node_wait = start(obs(node=NodeResolution.waiting("no node yet")), SETTINGS)
    assert node_wait is not None
    assert (node_wait.status.phase, node_wait.status.waiting_for) == (Phase.PENDING, WaitingFor.NODE)
    assert node_wait.requeue_after == 2.0
    previous = start(obs(previous_detach_pending=True), SETTINGS)
    assert previous is not None
    assert previous.status.waiting_for is WaitingFor.PREVIOUS_DETACH
    assert previous.events == (Event.WAITING_FOR_DETACH,)
    slot = start(obs(slot_free=False), SETTINGS)
    assert slot is not None
    assert slot.status.waiting_for is WaitingFor.SLOT
    assert Effect.CALL_ATTACH not in slot.effects


def test_adoption_of_ready_and_failed_entries() -> None:
    ready = start(obs(entry=EntryState.READY), SETTINGS)
    assert ready is not None
    assert (ready.status.phase, ready.status.adopted, ready.status.attempts) == (Phase.ATTACHED, True, 1)
    assert ready.status.reported is Reported.READY
    assert not ready.effects
    failure = AttachFailure(reason="AttachFailed", message="m", condition_type="x/failed")
    failed = start(obs(entry=EntryState.FAILED, entry_failure=failure), SETTINGS)
    assert failed is not None
    assert (failed.status.phase, failed.status.attempts, failed.status.failure) == (Phase.FAILED, 1, failure)


def test_no_new_attach_for_deleting_claim_or_gone_identity() -> None:
    assert start(obs(claim_deleting=True), SETTINGS) is None
    assert start(obs(identity=IdentityState.DEALLOCATED), SETTINGS) is None


# --- advance -------------------------------------------------------------------------------------


def test_pending_starts_when_the_wait_is_over() -> None:
    pending = DeviceAttachmentStatus(phase=Phase.PENDING, waiting_for=WaitingFor.PREVIOUS_DETACH)
    step = advance(pending, obs(), SETTINGS)
    assert (step.status.phase, step.status.attempts, step.status.waiting_for) == (
        Phase.ATTACHING,
        1,
        WaitingFor.NOTHING,
    )
    assert Effect.CALL_ATTACH in step.effects
    still = advance(pending, obs(previous_detach_pending=True), SETTINGS)
    assert still.status == pending
    assert still.events == ()  # the WaitingForDetach event is emitted once


def test_deadline_cancels_and_fails_with_attach_timeout() -> None:
    step = advance(attaching(), obs(now=DEADLINE, call_in_flight=True), SETTINGS)
    assert step.status.phase is Phase.FAILED
    assert step.status.failure is not None
    assert step.status.failure.kind is FailureKind.TIMEOUT
    assert step.effects >= {Effect.CANCEL_CALL, Effect.WRITE_STATUS}
    assert step.budget_exhausted is WaitingFor.NOTHING
    slot = DeviceAttachmentStatus(phase=Phase.PENDING, waiting_for=WaitingFor.SLOT, last_transition_time=T0)
    timed_out = advance(slot, obs(now=DEADLINE, slot_free=False), SETTINGS)
    assert timed_out.budget_exhausted is WaitingFor.SLOT
    assert timed_out.status.failure is not None
    assert "waiting for a free attach slot" in timed_out.status.failure.message


def test_readiness_already_shown_is_recorded_whatever_the_deadline() -> None:
    # A crash between the readiness apply and the record update leaves the record Attaching.
    for now in (NOW, DEADLINE + timedelta(minutes=5)):
        step = advance(attaching(), obs(now=now, entry=EntryState.READY), SETTINGS)
        assert (step.status.phase, step.status.reported) == (Phase.ATTACHED, Reported.READY)
        assert step.status.failure is None
        assert step.effects == frozenset(), "no call, no cancel, nothing new for the claim"
        assert step.events == (Event.ATTACHED,)
        assert step.outcome is AttachmentOutcome.READY
    # Our own failure of the allocation still wins: it can never become ready.
    detached = advance(attaching(), obs(entry=EntryState.READY, sibling_failure_reported=True), SETTINGS)
    assert (detached.status.phase, detached.status.detach_reason) == (Phase.DETACHING, DetachReason.FAILED)
    # Only an attach that was started can have shown readiness.
    pending = DeviceAttachmentStatus(
        phase=Phase.PENDING, waiting_for=WaitingFor.SLOT, last_transition_time=T0
    )
    waiting = advance(pending, obs(entry=EntryState.READY, slot_free=False), SETTINGS)
    assert waiting.status.phase is Phase.PENDING


def test_failure_is_never_written_for_an_allocation_in_use() -> None:
    step = advance(attaching(), obs(now=DEADLINE, allocation_in_use=True), SETTINGS)
    assert step.status.phase is Phase.ATTACHING
    assert Effect.WRITE_STATUS not in step.effects
    assert step.events == (Event.ATTACH_TIMEOUT,)


def test_deallocation_before_deadline_is_abandoned_and_detached() -> None:
    step = advance(attaching(), obs(identity=IdentityState.DEALLOCATED, call_in_flight=True), SETTINGS)
    assert step.status.phase is Phase.DETACHING
    assert step.status.detach_reason is DetachReason.DEALLOCATED
    assert step.status.detach_attempts == 1
    assert step.effects == {Effect.CANCEL_CALL, Effect.CALL_DETACH}
    assert step.events == (Event.ATTACH_ABANDONED,)
    assert step.outcome is AttachmentOutcome.ABANDONED


def test_identity_gone_without_attempts_skips_detach() -> None:
    pending = DeviceAttachmentStatus(phase=Phase.PENDING, waiting_for=WaitingFor.PREVIOUS_DETACH)
    step = advance(pending, obs(identity=IdentityState.REALLOCATED, failure_shown=True), SETTINGS)
    assert step.status.phase is Phase.DETACHED
    assert step.status.detach_reason is DetachReason.REALLOCATED
    assert step.effects == {Effect.DELETE_RECORD}
    assert step.events == ()


def test_attached_records_detach_on_claim_deletion() -> None:
    attached = DeviceAttachmentStatus(phase=Phase.ATTACHED, attempts=1, reported=Reported.READY)
    step = advance(attached, obs(identity=IdentityState.CLAIM_DELETED), SETTINGS)
    assert (step.status.phase, step.status.detach_reason) == (Phase.DETACHING, DetachReason.CLAIM_DELETED)
    assert Effect.CALL_DETACH in step.effects
    assert step.outcome is None


def test_failed_record_is_reported_then_detached_early() -> None:
    failure = AttachFailure(kind=FailureKind.FAILED, reason="AttachFailed", message="boom")
    failed = DeviceAttachmentStatus(phase=Phase.FAILED, attempts=1, failure=failure)
    assert advance(failed, obs(), SETTINGS).effects == {Effect.WRITE_STATUS}
    reported = failed.model_copy(update={"reported": Reported.FAILURE})
    step = advance(reported, obs(), SETTINGS)
    assert (step.status.phase, step.status.detach_reason) == (Phase.DETACHING, DetachReason.FAILED)
    assert Effect.CALL_DETACH in step.effects
    assert advance(reported, obs(allocation_in_use=True), SETTINGS).effects == frozenset()
    # A failure on a share the scheduler does not read is still written, but nothing detached.
    assert advance(failed, obs(reads_ready=True), SETTINGS).effects == {Effect.WRITE_STATUS}
    assert advance(reported, obs(reads_ready=True), SETTINGS).effects == frozenset()
    never_called = reported.model_copy(update={"attempts": 0})
    kept = advance(never_called, obs(), SETTINGS)
    assert kept.status.phase is Phase.DETACHED
    assert Effect.DELETE_RECORD not in kept.effects  # stays while the failed allocation is live


def test_detached_after_failure_is_deleted_once_the_allocation_goes() -> None:
    done = DeviceAttachmentStatus(phase=Phase.DETACHED, attempts=1, detach_reason=DetachReason.FAILED)
    assert advance(done, obs(), SETTINGS).effects == frozenset()
    assert advance(done, obs(identity=IdentityState.DEALLOCATED), SETTINGS).effects == {Effect.DELETE_RECORD}
    other = done.model_copy(update={"detach_reason": DetachReason.DEALLOCATED})
    assert advance(other, obs(), SETTINGS).effects == {Effect.DELETE_RECORD}


def test_sibling_failure_detaches_the_rest_of_the_allocation() -> None:
    attached = DeviceAttachmentStatus(phase=Phase.ATTACHED, attempts=1, reported=Reported.READY)
    step = advance(attached, obs(sibling_failure_reported=True), SETTINGS)
    assert (step.status.phase, step.status.detach_reason) == (Phase.DETACHING, DetachReason.FAILED)
    # A pod bound to the allocation anyway (two shares of a device, the scheduler reading the
    # ready one) keeps its devices: nothing is detached or called while it uses them.
    for status in (attached, attaching()):
        held = advance(status, obs(sibling_failure_reported=True, allocation_in_use=True), SETTINGS)
        assert (held.status, held.effects) == (status, frozenset())
        # Or one binds at the scheduler's next poll: it reads the allocation as ready.
        held = advance(status, obs(sibling_failure_reported=True, reads_ready=True), SETTINGS)
        assert (held.status, held.effects) == (status, frozenset())


def test_foreign_failure_holds_new_calls() -> None:
    step = advance(attaching(), obs(foreign_failure=True), SETTINGS)
    assert step.effects == frozenset()
    assert step.status.phase is Phase.ATTACHING


def test_retry_waits_for_backoff_then_calls_again_or_probes() -> None:
    status = attaching()
    waiting = advance(status, obs(retry_at=NOW + timedelta(seconds=3)), SETTINGS)
    assert waiting.effects == frozenset()
    assert waiting.requeue_after == 3.0
    again = advance(status, obs(), SETTINGS)
    assert again.effects == {Effect.CALL_ATTACH}
    assert again.status.attempts == 2
    probing = MachineSettings(probe_supported=True)
    probe = advance(status, obs(last_in_progress=True), probing)
    assert probe.effects == {Effect.CALL_PROBE}
    assert probe.status.attempts == 1
    assert advance(status, obs(call_in_flight=True), SETTINGS).effects == frozenset()


def test_attached_without_report_rewrites_readiness() -> None:
    attached = DeviceAttachmentStatus(phase=Phase.ATTACHED, attempts=1, reported=Reported.PROGRESS)
    assert advance(attached, obs(), SETTINGS).effects == {Effect.WRITE_STATUS}
    assert (
        advance(attached.model_copy(update={"reported": Reported.READY}), obs(), SETTINGS).effects
        == frozenset()
    )


def test_forget_deletes_without_detach() -> None:
    step = advance(attaching(), obs(forget=True), SETTINGS)
    assert step.effects == {Effect.CANCEL_CALL, Effect.DELETE_RECORD}
    assert step.events == (Event.ATTACHMENT_FORGOTTEN,)


# --- call results --------------------------------------------------------------------------------


def test_success_marks_attached() -> None:
    step = after_attach(
        attaching(), obs(), SETTINGS, CallResult.SUCCEEDED, message="port 7", data={"port": 7}
    )
    assert step.status.phase is Phase.ATTACHED
    assert step.status.data == {"port": 7}
    assert step.status.action_message == "port 7"
    assert step.status.attached_at == NOW
    assert step.effects == {Effect.WRITE_STATUS}
    assert step.events == (Event.ATTACHED,)
    assert step.outcome is AttachmentOutcome.READY


def test_late_success_after_deadline_still_reports_readiness() -> None:
    step = after_attach(attaching(), obs(now=DEADLINE + timedelta(seconds=1)), SETTINGS, CallResult.SUCCEEDED)
    assert step.status.phase is Phase.ATTACHED


def test_results_for_records_that_moved_on_are_ignored() -> None:
    failed = DeviceAttachmentStatus(phase=Phase.FAILED, attempts=1)
    step = after_attach(failed, obs(), SETTINGS, CallResult.SUCCEEDED)
    assert step.status == failed
    assert step.effects == frozenset()


def test_permanent_error_fails_and_taints_when_asked() -> None:
    step = after_attach(attaching(), obs(), SETTINGS, CallResult.PERMANENT_ERROR, message="no path")
    assert step.status.phase is Phase.FAILED
    assert step.status.failure == AttachFailure(
        kind=FailureKind.FAILED, reason="AttachFailed", message="no path"
    )
    assert Effect.TAINT_DEVICE not in step.effects
    tainting = MachineSettings(taint_device=TaintDevice.ON_PERMANENT_ERROR)
    assert (
        Effect.TAINT_DEVICE in after_attach(attaching(), obs(), tainting, CallResult.PERMANENT_ERROR).effects
    )
    timeout = advance(attaching(), obs(now=DEADLINE), tainting)
    assert Effect.TAINT_DEVICE not in timeout.effects
    always = MachineSettings(taint_device=TaintDevice.ALWAYS)
    assert Effect.TAINT_DEVICE in advance(attaching(), obs(now=DEADLINE), always).effects


def test_transient_error_backs_off_within_the_deadline() -> None:
    step = after_attach(attaching(), obs(retries=2), SETTINGS, CallResult.TRANSIENT_ERROR, message="busy")
    assert step.status.phase is Phase.ATTACHING
    assert step.status.last_error == "busy"
    assert step.requeue_after == 4.0
    assert step.events == (Event.ATTACH_RETRYING,)
    near = after_attach(
        attaching(), obs(now=DEADLINE - timedelta(seconds=1), retries=5), SETTINGS, CallResult.TRANSIENT_ERROR
    )
    assert near.requeue_after == 1.0


def test_in_progress_polls_after_retry_after() -> None:
    step = after_attach(attaching(), obs(), SETTINGS, CallResult.IN_PROGRESS, retry_after_seconds=3.0)
    assert step.status.phase is Phase.ATTACHING
    assert step.requeue_after == 3.0


def test_transient_error_at_deadline_fails() -> None:
    step = after_attach(
        attaching(), obs(now=DEADLINE), SETTINGS, CallResult.TRANSIENT_ERROR, message="timeout"
    )
    assert step.status.failure is not None
    assert step.status.failure.kind is FailureKind.TIMEOUT
    assert "timeout" in step.status.failure.message


def test_detach_results() -> None:
    detaching = DeviceAttachmentStatus(
        phase=Phase.DETACHING, attempts=1, detach_attempts=1, detach_reason=DetachReason.DEALLOCATED
    )
    done = after_detach(detaching, obs(identity=IdentityState.DEALLOCATED), SETTINGS, CallResult.SUCCEEDED)
    assert done.status.phase is Phase.DETACHED
    assert done.effects == {Effect.DELETE_RECORD}
    assert done.events == (Event.DETACHED,)
    after_failure = detaching.model_copy(update={"detach_reason": DetachReason.FAILED})
    kept = after_detach(after_failure, obs(), SETTINGS, CallResult.SUCCEEDED)
    assert kept.status.phase is Phase.DETACHED
    assert kept.effects == frozenset()
    retry = after_detach(detaching, obs(retries=0), SETTINGS, CallResult.TRANSIENT_ERROR, message="busy")
    assert retry.status.phase is Phase.DETACHING
    assert retry.requeue_after == 5.0
    assert retry.events == ()
    fifth = detaching.model_copy(update={"detach_attempts": 5})
    assert after_detach(fifth, obs(), SETTINGS, CallResult.TRANSIENT_ERROR).events == (Event.DETACH_FAILED,)
    permanent = after_detach(detaching, obs(), SETTINGS, CallResult.PERMANENT_ERROR)
    assert permanent.requeue_after == 3600.0


def test_a_detach_that_fails_for_days_still_waits_the_cap() -> None:
    # 5 s doubling to 300 s: retry 1100 comes after some 90 hours of a detach endpoint that
    # stays down. The delay used to be a float power of the retry count, which overflowed.
    detaching = DeviceAttachmentStatus(
        phase=Phase.DETACHING, attempts=1, detach_attempts=1100, detach_reason=DetachReason.DEALLOCATED
    )
    retry = after_detach(detaching, obs(retries=1100), SETTINGS, CallResult.TRANSIENT_ERROR, message="down")
    assert retry.status.phase is Phase.DETACHING
    assert retry.requeue_after == 300.0


def test_detaching_calls_again_after_backoff() -> None:
    detaching = DeviceAttachmentStatus(
        phase=Phase.DETACHING, attempts=1, detach_attempts=1, detach_reason=DetachReason.DEALLOCATED
    )
    step = advance(detaching, obs(identity=IdentityState.DEALLOCATED), SETTINGS)
    assert step.effects == {Effect.CALL_DETACH}
    assert step.status.detach_attempts == 2
    assert advance(detaching, obs(call_in_flight=True), SETTINGS).effects == frozenset()
