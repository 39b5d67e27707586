"""Which claim results the attacher acts on (spec §5), and what the claim already shows.

A result is *ours* when its driver has a Ready policy, it carries ``bindingConditions``, its
pool passes the policy's pool filter, and at least one of its condition types is managed by the
policy. Results of other drivers, and of our drivers without binding conditions, are invisible
to the attacher: it never reads, writes or removes their ``status.devices`` entries.

Everything here reads the claim as the scheduler does: only ``status`` of a condition matters,
and failure conditions are checked before readiness conditions.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .identity import DeviceKey
from .models import (
    AllocatedDeviceStatus,
    AttachFailure,
    ConsumerReference,
    DeviceAttachPolicySpec,
    DeviceResult,
    Pod,
    ResourceClaim,
)

TRUE = "True"


@dataclass(frozen=True)
class SelectionRules:
    """The part of a policy that decides selection; ``ready`` is the policy's Ready condition."""

    driver: str
    ready: bool
    pools: frozenset[str] = frozenset()
    managed_types: frozenset[str] = frozenset()
    not_ready_message: str = ""

    @classmethod
    def of_policy(
        cls, spec: DeviceAttachPolicySpec, ready: bool, not_ready_message: str = ""
    ) -> SelectionRules:
        return cls(
            driver=spec.driver,
            ready=ready,
            pools=frozenset(spec.selector.pools),
            managed_types=frozenset(spec.conditions.managed_types),
            not_ready_message=not_ready_message,
        )

    def manages(self, condition_type: str) -> bool:
        return not self.managed_types or condition_type in self.managed_types


@dataclass(frozen=True)
class OurResult:
    result: DeviceResult
    readiness_types: tuple[str, ...]
    """``R`` of spec §11.2: the managed types of ``bindingConditions``, in result order."""
    failure_types: tuple[str, ...]
    """``F`` of spec §11.2: the managed types of ``bindingFailureConditions``, in result order."""

    @property
    def key(self) -> DeviceKey:
        return DeviceKey.of_result(self.result)


@dataclass(frozen=True)
class ClaimSelection:
    ours: tuple[OurResult, ...] = ()
    blocked_by_policy: tuple[tuple[DeviceResult, SelectionRules], ...] = ()
    """Results that would be ours if their policy were Ready (Warning ``AttachPolicyNotReady``)."""
    missing_allocation_timestamp: bool = False
    """Results exist but the allocation has no timestamp (Warning ``MissingAllocationTimestamp``)."""


def _candidate(result: DeviceResult, rules: SelectionRules) -> OurResult | None:
    if result.driver != rules.driver or not result.binding_conditions:
        return None
    if rules.pools and result.pool not in rules.pools:
        return None
    readiness = tuple(t for t in result.binding_conditions if rules.manages(t))
    failure = tuple(t for t in result.binding_failure_conditions if rules.manages(t))
    if not readiness and not failure:
        return None
    return OurResult(result, readiness, failure)


def select(claim: ResourceClaim, rules_by_driver: Mapping[str, SelectionRules]) -> ClaimSelection:
    allocation = claim.status.allocation
    if allocation is None:
        return ClaimSelection()
    ours: list[OurResult] = []
    blocked: list[tuple[DeviceResult, SelectionRules]] = []
    for result in allocation.devices.results:
        rules = rules_by_driver.get(result.driver)
        if rules is None:
            continue
        candidate = _candidate(result, rules)
        if candidate is None:
            continue
        if rules.ready:
            ours.append(candidate)
        else:
            blocked.append((result, rules))
    if (ours or blocked) and allocation.allocation_timestamp is None:
        return ClaimSelection(missing_allocation_timestamp=True)
    return ClaimSelection(ours=tuple(ours), blocked_by_policy=tuple(blocked))


def find_entry(claim: ResourceClaim, key: DeviceKey) -> AllocatedDeviceStatus | None:
    for entry in claim.status.devices:
        if DeviceKey(entry.driver, entry.pool, entry.device, entry.share_id or "") == key:
            return entry
    return None


def _true_types(entry: AllocatedDeviceStatus | None) -> frozenset[str]:
    if entry is None:
        return frozenset()
    return frozenset(c.type for c in entry.conditions if c.status == TRUE)


class EntryState(enum.StrEnum):
    """What the claim shows for one of our devices, as far as adoption (§16.3) cares."""

    ABSENT = "Absent"
    READY = "Ready"
    FAILED = "Failed"
    OTHER = "Other"


def entry_state(claim: ResourceClaim, ours: OurResult) -> EntryState:
    entry = find_entry(claim, ours.key)
    if entry is None:
        return EntryState.ABSENT
    true = _true_types(entry)
    if any(t in true for t in ours.failure_types):
        return EntryState.FAILED
    if ours.readiness_types and all(t in true for t in ours.readiness_types):
        return EntryState.READY
    return EntryState.OTHER


def shown_failure(claim: ResourceClaim, ours: OurResult) -> AttachFailure | None:
    """The True failure condition of ours the claim shows, as found (for adoption after a restart)."""
    entry = find_entry(claim, ours.key)
    if entry is None:
        return None
    for condition in entry.conditions:
        if condition.type in ours.failure_types and condition.status == TRUE:
            return AttachFailure(
                reason=condition.reason, message=condition.message, condition_type=condition.type
            )
    return None


def foreign_failure(claim: ResourceClaim, ours: Iterable[OurResult]) -> bool:
    """Whether a writer other than us shows a True failure condition on this allocation.

    Covers results of other drivers that carry binding conditions (the scheduler ignores the
    failure lists of results without them) and unmanaged failure types in our own entries.
    Such a failure stops new attach calls but, unlike our own failures, does not trigger an
    early detach, because its writer might reset it (spec §9).
    """
    allocation = claim.status.allocation
    if allocation is None:
        return False
    managed = {o.key: frozenset(o.failure_types) for o in ours}
    for result in allocation.devices.results:
        if not result.binding_conditions:
            continue
        key = DeviceKey.of_result(result)
        true = _true_types(find_entry(claim, key))
        own = managed.get(key, frozenset())
        if any(t in true and t not in own for t in result.binding_failure_conditions):
            return True
    return False


def own_failure_shown(claim: ResourceClaim, ours: Iterable[OurResult]) -> bool:
    return any(entry_state(claim, o) is EntryState.FAILED for o in ours)


def pod_consumers(claim: ResourceClaim) -> tuple[ConsumerReference, ...]:
    return tuple(c for c in claim.status.reserved_for if c.resource == "pods" and not c.api_group)


def allocation_in_use(claim: ResourceClaim, pods: Sequence[Pod]) -> bool:
    """Whether a consumer pod is bound: then no failure is ever written and nothing detached."""
    consumers = {c.uid for c in pod_consumers(claim)}
    return any(p.metadata.uid in consumers and p.spec.node_name for p in pods)
