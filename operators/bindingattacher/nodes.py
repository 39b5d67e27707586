"""Target-node resolution (spec §6), honouring ``bindsToNode``.

``bindsToNode`` is not copied into the allocation: its only visible trace is the node selector,
which the scheduler then reduces to one term with one ``metadata.name In [node]`` field
requirement. That is exactly the shape the API server itself recognises when it authorizes
node-associated writers, so the same strict check is used here: anything else (label terms,
several values, several terms) does not name a single node.

When the allocation does not name a node, policy mode ``AllocationOrPod`` falls back to the
consumer pods' ``spec.nodeName`` or ``status.nominatedNodeName``. That fallback waits at most
``nodeWaitTimeout`` (capped at the attach deadline) and fails with ``NodeNotDetermined`` when the
pods never name a node or name different ones.

Resolution is pure: the caller GETs the pods and passes them in, together with the moment the
record started waiting, and re-asks while the answer is :attr:`Resolution.WAITING`.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from .models import AllocationResult, ConsumerReference, NodeResolutionMode, NodeSelector, NodeSource, Pod

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
    return min(waiting_since + node_wait_timeout, attach_deadline)


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
