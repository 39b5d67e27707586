"""Which claim results are ours, what the claim shows, and the target node.

A result is *ours* (spec §5) when its driver has a Ready policy, it carries
``bindingConditions``, its pool passes the policy's pool filter, and at least one of its
condition types is managed by the policy. Results of other drivers, and of our drivers without
binding conditions, are invisible to the attacher: it never reads, writes or removes their
``status.devices`` entries.

Everything here reads the claim as the scheduler does: only ``status`` of a condition matters,
and failure conditions are checked before readiness conditions.

The target node (spec §6) honours ``bindsToNode``, which is not copied into the allocation: its
only visible trace is the node selector, which the scheduler then reduces to one term with one
``metadata.name In [node]`` field requirement. That is exactly the shape the API server itself
recognises when it authorizes node-associated writers, so the same strict check is used here:
anything else (label terms, several values, several terms) does not name a single node.

When the allocation does not name a node, policy mode ``AllocationOrPod`` falls back to the
consumer pods' ``spec.nodeName`` or ``status.nominatedNodeName``. That fallback waits at most
``nodeWaitTimeout`` (capped at the attach deadline) and fails with ``NodeNotDetermined`` when the
pods never name a node or name different ones.

Resolution is pure: the caller GETs the pods and passes them in, together with the moment the
record started waiting, and re-asks while the answer is :attr:`Resolution.WAITING`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from operators.core.conditions import time_after
from operators.dra.pools import DeviceId

from .identity import DeviceKey
from .models import (
    AllocatedDeviceStatus,
    AllocationResult,
    AttachFailure,
    ConsumerReference,
    DeviceAttachPolicySpec,
    DeviceRequestAllocationResult,
    NodeResolutionMode,
    NodeSelector,
    NodeSource,
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
    result: DeviceRequestAllocationResult
    readiness_types: tuple[str, ...]
    """``R`` of spec §11.2: the managed types of ``bindingConditions``, in result order."""
    failure_types: tuple[str, ...]
    """``F`` of spec §11.2: the managed types of ``bindingFailureConditions``, in result order."""

    @property
    def key(self) -> DeviceKey:
        return DeviceKey.of(self.result)


@dataclass(frozen=True)
class ClaimSelection:
    ours: tuple[OurResult, ...] = ()
    blocked_by_policy: tuple[tuple[DeviceRequestAllocationResult, SelectionRules], ...] = ()
    """Results that would be ours if their policy were Ready (Warning ``AttachPolicyNotReady``)."""
    missing_allocation_timestamp: bool = False
    """Results exist but the allocation has no timestamp (Warning ``MissingAllocationTimestamp``)."""


def _candidate(result: DeviceRequestAllocationResult, rules: SelectionRules) -> OurResult | None:
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
    blocked: list[tuple[DeviceRequestAllocationResult, SelectionRules]] = []
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
        if DeviceKey.of(entry) == key:
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
    return _state_of(find_entry(claim, ours.key), ours)


def _state_of(entry: AllocatedDeviceStatus | None, ours: OurResult) -> EntryState:
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
        key = DeviceKey.of(result)
        true = _true_types(find_entry(claim, key))
        own = managed.get(key, frozenset())
        if any(t in true and t not in own for t in result.binding_failure_conditions):
            return True
    return False


def scheduler_entry(claim: ResourceClaim, key: DeviceKey) -> AllocatedDeviceStatus | None:
    """The entry kube-scheduler reads for a device: the first of its driver, pool and device.

    It does not compare ``shareID`` (spec §3.2): of several shares of one device in a claim,
    the first entry answers for all of them.
    """
    for entry in claim.status.devices:
        if DeviceId(entry.driver, entry.pool, entry.device) == key.device:
            return entry
    return None


def scheduler_reads_ready(claim: ResourceClaim, ours: Sequence[OurResult]) -> bool:
    """Whether kube-scheduler reads every one of our results as ready.

    With one share per device this excludes any failure of ours. With shares, a failure on a
    share whose entry comes after a ready share's entry is never read, and the pod binds through
    the ready one: the allocation is then as good as in use.
    """
    return bool(ours) and all(_state_of(scheduler_entry(claim, o.key), o) is EntryState.READY for o in ours)


def own_failure_shown(claim: ResourceClaim, ours: Iterable[OurResult]) -> bool:
    return any(entry_state(claim, o) is EntryState.FAILED for o in ours)


def pod_consumers(claim: ResourceClaim) -> tuple[ConsumerReference, ...]:
    return tuple(c for c in claim.status.reserved_for if c.is_pod)


def allocation_in_use(claim: ResourceClaim, pods: Sequence[Pod]) -> bool:
    """Whether a consumer pod is bound: then no failure is ever written and nothing detached."""
    consumers = {c.uid for c in pod_consumers(claim)}
    return any(p.metadata.uid in consumers and p.spec.node_name for p in pods)


NODE_NAME_FIELD = "metadata.name"
RECHECK_SECONDS = 2.0
"""How often an unresolved node is re-checked (spec §6 step 2)."""


class Resolution(enum.StrEnum):
    RESOLVED = "Resolved"
    WAITING = "Waiting"
    FAILED = "Failed"


@dataclass(frozen=True)
class NodeResolution:
    status: Resolution
    node: str | None = None
    source: NodeSource | None = None
    message: str = ""

    @classmethod
    def resolved(cls, node: str | None, source: NodeSource) -> NodeResolution:
        return cls(Resolution.RESOLVED, node, source)

    @classmethod
    def waiting(cls, message: str) -> NodeResolution:
        return cls(Resolution.WAITING, message=message)

    @classmethod
    def failed(cls, message: str) -> NodeResolution:
        return cls(Resolution.FAILED, message=message)


def single_node(selector: NodeSelector | None) -> str | None:
    """The node an allocation is pinned to, or None when the selector does not name exactly one."""
    if selector is None or len(selector.node_selector_terms) != 1:
        return None
    term = selector.node_selector_terms[0]
    if term.match_expressions or len(term.match_fields) != 1:
        return None
    requirement = term.match_fields[0]
    if requirement.key != NODE_NAME_FIELD or requirement.operator != "In" or len(requirement.values) != 1:
        return None
    return requirement.values[0]


def node_wait_deadline(
    waiting_since: datetime, node_wait_timeout: timedelta, attach_deadline: datetime
) -> datetime:
    return min(time_after(waiting_since, node_wait_timeout), attach_deadline)


def wait_or_fail(message: str, now: datetime, wait_deadline: datetime) -> NodeResolution:
    """Keep waiting for a node while time remains, then fail with the same explanation."""
    if now < wait_deadline:
        return NodeResolution.waiting(message)
    return NodeResolution.failed(message)


def _pod_node(pod: Pod) -> str | None:
    return pod.spec.node_name or pod.status.nominated_node_name or None


def _from_consumers(consumers: Sequence[ConsumerReference], pods: Sequence[Pod]) -> NodeResolution:
    by_uid = {pod.metadata.uid: pod for pod in pods}
    named: list[tuple[str, str]] = []
    for consumer in consumers:
        pod = by_uid.get(consumer.uid)
        node = _pod_node(pod) if pod is not None else None
        if node:
            named.append((consumer.name, node))
    nodes = sorted({node for _, node in named})
    if len(nodes) > 1:
        listing = ", ".join(f"{pod}={node}" for pod, node in named)
        return NodeResolution.failed(f"consumers disagree: {listing}")
    if nodes:
        return NodeResolution.resolved(nodes[0], NodeSource.POD)
    if not consumers:
        return NodeResolution.waiting(
            "the allocation names no single node and the claim has no consumer pods"
        )
    return NodeResolution.waiting("the allocation names no single node and no consumer pod has a node yet")


def resolve(
    *,
    mode: NodeResolutionMode,
    allocation: AllocationResult,
    consumers: Sequence[ConsumerReference],
    pods: Sequence[Pod],
    now: datetime,
    wait_deadline: datetime,
) -> NodeResolution:
    """Resolve the node for a new allocation identity; the result is recorded and never changes.

    ``consumers`` are the claim's ``reservedFor`` pod entries and ``pods`` the ones the caller
    could GET (missing pods are simply absent).
    """
    if mode is NodeResolutionMode.NONE:
        return NodeResolution.resolved(None, NodeSource.NONE)
    pinned = single_node(allocation.node_selector)
    if pinned is not None:
        return NodeResolution.resolved(pinned, NodeSource.ALLOCATION)
    if mode is NodeResolutionMode.ALLOCATION_ONLY:
        return NodeResolution.failed(
            "the allocation does not name a single node (nodeResolution is AllocationOnly; "
            "publish the device with bindsToNode: true)"
        )
    outcome = _from_consumers(consumers, pods)
    if outcome.status is Resolution.WAITING:
        return wait_or_fail(outcome.message, now, wait_deadline)
    return outcome
