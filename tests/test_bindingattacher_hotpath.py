"""The happy path's API budget (spec §15.2): which writes and reads an attachment costs.

Readiness goes to the claim before the record learns of it, progress waits for a call that
may finish at once, pods are read only when a decision needs them, and Events never hold up
a reconcile.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from bindingattacher_builders import (
    ATTACHED,
    DEADLINE,
    FABRIC,
    T0,
    claim,
    condition,
    entry,
    record,
    result,
    spawn,
)

from operators.bindingattacher import policy
from operators.bindingattacher.actions import AttachResult, CallOutcome, Operation, Outcome
from operators.bindingattacher.calls import CallTracker
from operators.bindingattacher.decide import RuntimeFacts, observe_record, pods_needed
from operators.bindingattacher.devicestatus import ConditionSettings, desired_entries
from operators.bindingattacher.ledger import LedgerIndex
from operators.bindingattacher.models import DeviceAttachmentStatus, DeviceAttachPolicy, Phase
from operators.bindingattacher.policy import PolicySettings
from operators.bindingattacher.statemachine import (
    CallResult,
    MachineSettings,
    Observation,
    after_attach,
    start,
)

SETTINGS = ConditionSettings(policy_name="fabric")
NOW = T0 + timedelta(seconds=1)
ATTACHING = DeviceAttachmentStatus(phase=Phase.ATTACHING, attempts=1, last_transition_time=T0)


def _policy() -> PolicySettings:
    body = {
        "metadata": {"name": "fabric", "uid": "p1"},
        "spec": {"driver": FABRIC, "action": {"kind": "Noop"}},
    }
    verdict = policy.validate(
        DeviceAttachPolicy.model_validate(body), test_actions_enabled=False, taint_rules_served=True
    )
    assert verdict.settings is not None
    return verdict.settings


# -- readiness first -------------------------------------------------------------------------


def test_only_readiness_is_written_to_the_claim_before_the_record() -> None:
    the_claim = claim([result()])
    attaching = record(the_claim, status=ATTACHING)
    obs = observe_record(attaching, the_claim, (), LedgerIndex(), _policy(), RuntimeFacts(now=NOW))
    ready = after_attach(ATTACHING, obs, MachineSettings(), CallResult.SUCCEEDED)
    assert ready.status.phase is Phase.ATTACHED
    assert ready.report_first
    failed = after_attach(ATTACHING, obs, MachineSettings(), CallResult.PERMANENT_ERROR)
    assert failed.status.phase is Phase.FAILED
    assert not failed.report_first, "a failure is recorded before it is written (never reset later)"


def test_a_new_record_is_still_created_before_its_call() -> None:
    step = start(Observation(now=NOW, deadline=DEADLINE), MachineSettings())
    assert step is not None
    assert step.status.phase is Phase.ATTACHING
    assert not step.report_first


# -- progress grace --------------------------------------------------------------------------


def test_progress_of_a_just_started_call_is_held_back() -> None:
    the_claim = claim([result()])
    attaching = record(the_claim, status=ATTACHING)
    held = desired_entries(the_claim, [attaching], SETTINGS, NOW, hold_progress={attaching.metadata.name})
    assert held == []
    assert len(desired_entries(the_claim, [attaching], SETTINGS, NOW)) == 1


def test_a_held_entry_the_claim_already_shows_stays_in_the_apply() -> None:
    shown = entry("f0", [condition(ATTACHED, "False", "Attaching")])
    the_claim = claim([result()], devices=[shown])
    attaching = record(the_claim, status=ATTACHING)
    entries = desired_entries(the_claim, [attaching], SETTINGS, NOW, hold_progress={attaching.metadata.name})
    assert len(entries) == 1, "leaving it out of the apply would remove it"


def test_readiness_is_never_held() -> None:
    the_claim = claim([result()])
    attached = record(the_claim, status=DeviceAttachmentStatus(phase=Phase.ATTACHED, attempts=1))
    entries = desired_entries(the_claim, [attached], SETTINGS, NOW, hold_progress={attached.metadata.name})
    assert {c["type"]: c["status"] for c in entries[0]["conditions"]}[ATTACHED] == "True"


async def test_only_running_calls_started_recently_count_as_just_started() -> None:
    tracker = CallTracker(max_total=10, spawn=spawn)
    release = asyncio.Event()
    done = asyncio.Event()

    async def slow() -> CallOutcome:
        await release.wait()
        return CallOutcome(AttachResult(Outcome.SUCCEEDED))

    tracker.start("da-1", Operation.ATTACH, "fabric", "drv", slow, done.set)
    assert tracker.just_started(10.0) == {"da-1"}
    assert tracker.just_started(0.0) == frozenset()
    release.set()
    await asyncio.wait_for(done.wait(), 1)
    assert tracker.just_started(10.0) == frozenset()


# -- pod reads -------------------------------------------------------------------------------


def test_a_bindstonode_allocation_needs_no_pod_on_the_happy_path() -> None:
    the_claim = claim([result()])
    attaching = record(the_claim, status=ATTACHING)
    assert not pods_needed(the_claim, [], [DEADLINE], set(), NOW)
    assert not pods_needed(the_claim, [attaching], [], set(), NOW)


def test_pods_are_read_for_the_node_fallback() -> None:
    loose = claim([result()], node=None)
    assert pods_needed(loose, [], [DEADLINE], set(), NOW)
    waiting = record(loose, status=DeviceAttachmentStatus(phase=Phase.PENDING), node=None)
    assert pods_needed(loose, [waiting], [], set(), NOW)


def test_pods_are_read_before_any_failure_decision() -> None:
    the_claim = claim([result()])
    attaching = record(the_claim, status=ATTACHING)
    failed = record(the_claim, status=DeviceAttachmentStatus(phase=Phase.FAILED, attempts=1))
    assert pods_needed(the_claim, [failed], [], set(), NOW)
    assert pods_needed(the_claim, [attaching], [], {attaching.metadata.name}, NOW)
    late = DEADLINE - timedelta(seconds=1)
    assert pods_needed(the_claim, [attaching], [], set(), late)
    assert pods_needed(the_claim, [], [DEADLINE], set(), late)


def test_no_consumer_no_pod_read() -> None:
    unused = claim([result()], node=None, reserved=())
    assert not pods_needed(unused, [], [DEADLINE], set(), DEADLINE)
