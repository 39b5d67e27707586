"""One pass over a DeviceHealthPolicy, decided: the plan of writes, and what the controller keeps.

Given the policy, what its scope evaluated to, a snapshot of the cluster, the signal tracks of the
previous pass, the time and the DeviceTaintRule version served, :func:`decide` returns:

1. for a policy that cannot act (bad input, or no DeviceTaintRule API): a Warning Event when the
   problem is new, and the status with ``Ready=False``; no rule is written or deleted, and the
   tracks stay as they were;
2. otherwise, the rule writes as one :class:`~operators.core.plan.Together` step: deletes (with
   the rule's UID) of the rules whose device has been quiet for ``clearAfter``, creates for the
   candidates the guard lets through, and patches (with the UID too) of drifted rules (effect,
   pacing); then the Events (held back, tainted, cleared, and on the pods and claims of newly
   tainted devices); then the status by server-side apply when it says something new.

The status is decided before any write, as if every write succeeds; the plan ends with a
``Requeue`` at the next moment time alone changes the answer (a signal reaching ``after``, a quiet
device reaching ``clearAfter``, a ``tolerationSeconds`` window ending).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from operators.core.conditions import FALSE, format_time, reported, time_after
from operators.core.discovery import ServedResource
from operators.core.events import NORMAL, WARNING, ObjectRef
from operators.core.plan import Create, Delete, Patch, Plan, RecordEvent, Step, Together, Write, status_apply
from operators.core.reconcile import Done, Requeue, Result
from operators.dra.selection import Invalid, Selection
from operators.dra.taintrules import owned_rule_name
from operators.dra.unserved import DEVICE_TAINT_RULES_UNSERVED

from .dryrun import affected
from .guard import guard
from .models import (
    API_VERSION,
    KIND,
    POLICIES,
    AllocatedClaim,
    DeviceId,
    DeviceTaintRule,
    HealthPolicy,
    Pod,
    ResourceSlice,
)
from .rules import TAINT_KEY, TAINT_VALUE, desired_rule, effect_now, rule_patch
from .signals import Observed, Track, kubelet_signals, merge_observed, slice_signals, track
from .status import (
    READY,
    REASON_DEVICE_TAINT_RULE_UNAVAILABLE,
    STATE_CONFLICT,
    STATE_HELD_BACK,
    STATE_SIGNALLED,
    STATE_TAINTED,
    STATE_WOULD_TAINT,
    Counts,
    DeviceState,
    needs_write,
    policy_status,
)
from .validation import ValidSpec, check_scope_size, check_spec

__all__ = [
    "EVENT_CLEARED",
    "EVENT_DEVICE_UNHEALTHY",
    "EVENT_HELD_BACK",
    "EVENT_INVALID",
    "EVENT_TAINTED",
    "WRITE_CONCURRENCY",
    "Decision",
    "View",
    "decide",
]

WRITE_CONCURRENCY = 32
EVENT_INVALID = "InvalidPolicy"
EVENT_HELD_BACK = "RemediationHeldBack"
EVENT_RULE_CONFLICT = "RuleConflict"
EVENT_TAINTED = "DeviceTainted"
EVENT_CLEARED = "DeviceCleared"
EVENT_DEVICE_UNHEALTHY = "DeviceUnhealthy"
# Events on pods and claims of one newly tainted device; the rule's own condition says the rest.
EVENTS_PER_DEVICE = 20
# A deadline this close is met by the next pass anyway; never spin on a rounding error.
MINIMUM_REQUEUE = 1.0


@dataclass(frozen=True)
class View:
    """What the pass reads of the cluster: a snapshot, so a watch event cannot change it midway."""

    slices: Sequence[ResourceSlice] = ()
    pods: Sequence[Pod] = ()
    claims: Mapping[tuple[str, str], AllocatedClaim] = field(default_factory=dict)
    rules: Sequence[DeviceTaintRule] = ()
    """The rules the policy controls."""
    rule_controllers: Mapping[str, str | None] = field(default_factory=dict)
    """Every rule's name -> the UID of the policy controlling it (None: no policy); a name held
    for another UID is one this policy cannot create (a user's rule, or one of a deleted namesake
    policy that the garbage collector has not removed yet)."""


@dataclass(frozen=True)
class Decision:
    plan: Plan
    tracks: Mapping[DeviceId, Track]
    counts: Counts | None
    """None while the policy cannot act: its gauges keep their last values."""
    signalled_since: Mapping[str, datetime] = field(default_factory=dict)
    """Rule name -> signal start, for the rules this plan creates (the signal-to-taint histogram)."""


def decide(
    policy: HealthPolicy,
    outcome: Selection | Invalid,
    view: View,
    tracks: Mapping[DeviceId, Track],
    now: datetime,
    rules_api: ServedResource | None,
) -> Decision:
    spec = check_spec(policy.spec)
    if isinstance(spec, Invalid):
        return _cannot_act(policy, tracks, spec.reason, spec.message, now)
    if isinstance(outcome, Invalid):
        return _cannot_act(policy, tracks, outcome.reason, outcome.message, now)
    problem = check_scope_size(spec, len(outcome.devices))
    if problem is not None:
        return _cannot_act(policy, tracks, problem.reason, problem.message, now)
    if rules_api is None:
        return _cannot_act(
            policy, tracks, REASON_DEVICE_TAINT_RULE_UNAVAILABLE, f"{DEVICE_TAINT_RULES_UNSERVED}.", now
        )
    return _act(policy, spec, outcome.devices, view, tracks, now, rules_api)


def _observe(spec: ValidSpec, scope: Iterable[DeviceId], view: View) -> dict[DeviceId, Observed]:
    sources: list[Mapping[DeviceId, Observed]] = []
    if spec.slice_taint is not None:
        sources.append(slice_signals(spec.slice_taint, view.slices))
    if spec.kubelet_health is not None:
        sources.append(kubelet_signals(spec.kubelet_health, view.pods, view.claims))
    in_scope = set(scope)
    return {device: seen for device, seen in merge_observed(*sources).items() if device in in_scope}


def _act(
    policy: HealthPolicy,
    spec: ValidSpec,
    scope: Sequence[DeviceId],
    view: View,
    tracks: Mapping[DeviceId, Track],
    now: datetime,
    rules_api: ServedResource,
) -> Decision:
    owned: dict[DeviceId, DeviceTaintRule] = {}
    for rule in sorted(view.rules, key=lambda r: r.metadata.name):
        device = rule.device
        if device is not None and rule.metadata.deletion_timestamp is None:
            owned.setdefault(device, rule)
    new_tracks = track(tracks, _observe(spec, scope, view), owned, now)
    deadlines: list[datetime] = []

    cleared: list[DeviceId] = []
    for device in sorted(owned):
        quiet = new_tracks[device].quiet_since
        if quiet is None or spec.clear_after is None:
            continue
        end = time_after(quiet, spec.clear_after)
        if now >= end:
            cleared.append(device)
        else:
            deadlines.append(end)
    kept = [device for device in owned if device not in cleared]

    uid = policy.metadata.uid
    candidates: list[tuple[datetime, DeviceId]] = []
    conflicted: list[DeviceId] = []
    for device, state in new_tracks.items():
        if state.since is None or device in owned:
            continue
        ready_at = time_after(held_from(state.since), spec.after)
        if now < ready_at:
            deadlines.append(ready_at)
        elif view.rule_controllers.get(owned_rule_name(policy.metadata.name, device), uid) != uid:
            # Creating it would meet the other rule (409) and taint nothing: the device waits,
            # without a place under maxUnavailable, until that rule goes (its event requeues us).
            conflicted.append(device)
        else:
            candidates.append((state.since, device))
    guarded = guard(spec.max_unavailable, scope, kept, candidates)

    steps: list[Step] = []
    writes: list[Write] = []
    events: list[RecordEvent] = []
    since_of: dict[str, datetime] = {}
    ref = _policy_ref(policy)
    for device in cleared:
        rule = owned[device]
        writes.append(Delete(rules_api.path(rule.metadata.name), rule.metadata.uid))
        events.append(
            RecordEvent(
                ref,
                NORMAL,
                EVENT_CLEARED,
                f"No signal for device {device} for clearAfter; "
                f"deleted DeviceTaintRule {rule.metadata.name}.",
            )
        )
    if not spec.dry_run:
        for device in guarded.taint:
            chosen = effect_now(spec, None, now)
            if chosen.until is not None:
                deadlines.append(chosen.until)
            body = desired_rule(policy, spec, device, chosen.effect, rules_api.api_version)
            name = body["metadata"]["name"]
            writes.append(Create(rules_api.path(), body))
            since = new_tracks[device].since
            if since is not None:
                since_of[name] = since
            events.append(
                RecordEvent(
                    ref,
                    WARNING,
                    EVENT_TAINTED,
                    f"Device {device} is unhealthy; tainted {spec.effect} by DeviceTaintRule {name}.",
                )
            )
            events.extend(_device_events(policy, spec, device, view.claims.values()))
    for device in kept:
        rule = owned[device]
        if spec.dry_run:
            continue
        chosen = effect_now(spec, rule, now)
        if chosen.until is not None:
            deadlines.append(chosen.until)
        patch = rule_patch(policy, spec, rule, chosen.effect)
        if patch:
            writes.append(Patch(rules_api.path(rule.metadata.name), patch, uid=rule.metadata.uid))
    if writes:
        steps.append(Together(tuple(writes), WRITE_CONCURRENCY))

    tainted = sorted(kept) + ([] if spec.dry_run else sorted(guarded.taint))
    would = sorted(guarded.taint) if spec.dry_run else []
    counts = Counts(
        signalled=sum(1 for state in new_tracks.values() if state.signalled),
        tainted=len(tainted) + len(would),
        held_back=len(guarded.held_back),
    )
    previous_held = policy.status.get("heldBackDevices")
    if counts.held_back and counts.held_back != previous_held:
        events.insert(
            0,
            RecordEvent(
                ref,
                WARNING,
                EVENT_HELD_BACK,
                f"{counts.held_back} signalled devices are held back: maxUnavailable {spec.max_unavailable} "
                "allows no more tainted at once.",
            ),
        )
    # In device order, as the guard orders candidates: the plan never depends on the order in
    # which the slices were listed.
    events.extend(_conflict_events(policy, sorted(conflicted)))
    steps.extend(events)

    states = _states(new_tracks, tainted, would, guarded.held_back, conflicted)
    pods = (
        affected(TAINT_KEY, TAINT_VALUE, [*kept, *would], view.claims.values()).pods if spec.dry_run else None
    )
    status = policy_status(
        policy,
        problem=None,
        counts=counts,
        devices=states,
        dry_run=spec.dry_run,
        limit=str(spec.max_unavailable),
        pods=pods,
        now=format_time(now),
    )
    if needs_write(policy.status, status):
        steps.append(status_apply(POLICIES, KIND, policy.metadata.name, policy.metadata.uid, status))
    return Decision(Plan(tuple(steps), _result(deadlines, now)), new_tracks, counts, since_of)


def _states(
    tracks: Mapping[DeviceId, Track],
    tainted: Sequence[DeviceId],
    would: Sequence[DeviceId],
    held_back: Sequence[DeviceId],
    conflicted: Sequence[DeviceId] = (),
) -> list[DeviceState]:
    state = {device: STATE_SIGNALLED for device, track_ in tracks.items() if track_.signalled}
    state.update(dict.fromkeys(conflicted, STATE_CONFLICT))
    state.update(dict.fromkeys(held_back, STATE_HELD_BACK))
    state.update(dict.fromkeys(would, STATE_WOULD_TAINT))
    state.update(dict.fromkeys(tainted, STATE_TAINTED))
    order = {
        STATE_TAINTED: 0,
        STATE_WOULD_TAINT: 1,
        STATE_HELD_BACK: 2,
        STATE_CONFLICT: 3,
        STATE_SIGNALLED: 4,
    }
    return [
        DeviceState(device, name, tracks[device].since if device in tracks else None)
        for device, name in sorted(state.items(), key=lambda item: (order[item[1]], item[0]))
    ]


def _conflict_events(policy: HealthPolicy, conflicted: Sequence[DeviceId]) -> list[RecordEvent]:
    """One Event per device newly in conflict: the status already lists those it was in before."""
    listed = {
        (entry.get("driver"), entry.get("pool"), entry.get("device"))
        for entry in policy.status.get("devices") or ()
        if isinstance(entry, Mapping) and entry.get("state") == STATE_CONFLICT
    }
    return [
        RecordEvent(
            _policy_ref(policy),
            WARNING,
            EVENT_RULE_CONFLICT,
            f"Device {device} is unhealthy, but DeviceTaintRule "
            f"{owned_rule_name(policy.metadata.name, device)} exists and is not this policy's; "
            "the device is not tainted until that rule is removed.",
        )
        for device in conflicted
        if tuple(device) not in listed
    ]


def _device_events(
    policy: HealthPolicy, spec: ValidSpec, device: DeviceId, claims: Iterable[AllocatedClaim]
) -> list[RecordEvent]:
    found = affected(TAINT_KEY, TAINT_VALUE, [device], claims)
    message = (
        f"Device {device} is unhealthy and tainted {spec.effect} "
        f"by DeviceHealthPolicy {policy.metadata.name}."
    )
    refs: list[ObjectRef] = [*found.pods, *found.claims][:EVENTS_PER_DEVICE]
    return [RecordEvent(target, WARNING, EVENT_DEVICE_UNHEALTHY, message) for target in refs]


def _result(deadlines: Sequence[datetime], now: datetime) -> Result:
    if not deadlines:
        return Done()
    wait = (min(deadlines) - now).total_seconds()
    return Requeue(
        max(wait, MINIMUM_REQUEUE), "a signal, a quiet device or a tolerationSeconds window comes due"
    )


def _cannot_act(
    policy: HealthPolicy, tracks: Mapping[DeviceId, Track], reason: str, message: str, now: datetime
) -> Decision:
    steps: list[Step] = []
    if _newly_failing(policy, reason):
        steps.append(RecordEvent(_policy_ref(policy), WARNING, EVENT_INVALID, message))
    status = policy_status(policy, problem=(reason, message), counts=None, now=format_time(now))
    if needs_write(policy.status, status):
        steps.append(status_apply(POLICIES, KIND, policy.metadata.name, policy.metadata.uid, status))
    return Decision(Plan(tuple(steps)), tracks, None)


def _newly_failing(policy: HealthPolicy, reason: str) -> bool:
    return not reported(policy.status, READY, FALSE, reason, policy.metadata.generation)


def _policy_ref(policy: HealthPolicy) -> ObjectRef:
    return ObjectRef(API_VERSION, KIND, policy.metadata.name, None, policy.metadata.uid)


def held_from(since: datetime) -> datetime:
    """The moment ``after`` counts from: the whole second after ``since``. A slice taint's
    ``timeAdded`` is truncated to the second, so the signal may have begun up to a second after it
    says; counting from the next second makes ``after`` never fire early, at most a second late."""
    return time_after(since.replace(microsecond=0), 1)
