from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from bindingattacher_builders import DEADLINE, T0, claim, pinned

from operators.bindingattacher.models import (
    ConsumerReference,
    NodeResolutionMode,
    NodeSelector,
    NodeSource,
    Pod,
)
from operators.bindingattacher.selection import (
    NodeResolution,
    Resolution,
    node_wait_deadline,
    resolve,
    single_node,
)


def selector(doc: Any) -> NodeSelector:
    return NodeSelector.model_validate(doc)


def pod(uid: str, name: str, *, node: str | None = None, nominated: str | None = None) -> Pod:
    return Pod.model_validate(
        {
            "metadata": {"name": name, "namespace": "team-a", "uid": uid},
            "spec": {"nodeName": node} if node else {},
            "status": {"nominatedNodeName": nominated} if nominated else {},
        }
    )


def consumer(uid: str, name: str) -> ConsumerReference:
    return ConsumerReference(resource="pods", name=name, uid=uid)


def resolve_consumed_by(
    mode: NodeResolutionMode,
    *pods: Pod,
    allocated_on: str | None,
    now: datetime = T0,
    wait_deadline: datetime = DEADLINE,
) -> NodeResolution:
    """Resolves the node of a claim allocated on ``allocated_on`` (None: on no node) whose consumers
    are ``pods``."""
    the_claim = claim(node=allocated_on)
    assert the_claim.status.allocation is not None
    return resolve(
        mode=mode,
        allocation=the_claim.status.allocation,
        consumers=[consumer(p.metadata.uid, p.metadata.name) for p in pods],
        pods=list(pods),
        now=now,
        wait_deadline=wait_deadline,
    )


def test_binds_to_node_selector_names_the_node() -> None:
    assert single_node(selector(pinned("node-3"))) == "node-3"


def test_label_selectors_and_multi_value_fields_do_not_name_a_node() -> None:
    label = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "fabric.test/member", "operator": "In", "values": ["true"]}]}
        ]
    }
    two_values = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}
        ]
    }
    two_terms = {
        "nodeSelectorTerms": [pinned("a")["nodeSelectorTerms"][0], pinned("b")["nodeSelectorTerms"][0]]
    }
    mixed = {
        "nodeSelectorTerms": [
            {
                "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}],
                "matchExpressions": [{"key": "x", "operator": "Exists"}],
            }
        ]
    }
    not_in = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["a"]}]}
        ]
    }
    for doc in (label, two_values, two_terms, mixed, not_in):
        assert single_node(selector(doc)) is None
    assert single_node(None) is None


def test_allocation_pin_wins_over_pods() -> None:
    outcome = resolve_consumed_by(
        NodeResolutionMode.ALLOCATION_OR_POD, pod("p1", "pod-0", nominated="node-y"), allocated_on="node-x"
    )
    assert (outcome.status, outcome.node, outcome.source) == (
        Resolution.RESOLVED,
        "node-x",
        NodeSource.ALLOCATION,
    )


def test_fallback_uses_nominated_node_of_consumer() -> None:
    outcome = resolve_consumed_by(
        NodeResolutionMode.ALLOCATION_OR_POD, pod("p1", "pod-0", nominated="node-b"), allocated_on=None
    )
    assert (outcome.status, outcome.node, outcome.source) == (Resolution.RESOLVED, "node-b", NodeSource.POD)


def test_fallback_prefers_bound_node_and_reports_disagreement() -> None:
    outcome = resolve_consumed_by(
        NodeResolutionMode.ALLOCATION_OR_POD,
        pod("p1", "pod-0", node="node-a", nominated="node-c"),
        pod("p2", "pod-1", nominated="node-b"),
        allocated_on=None,
    )
    assert outcome.status is Resolution.FAILED
    assert outcome.message == "consumers disagree: pod-0=node-a, pod-1=node-b"


def test_fallback_waits_then_fails_at_wait_deadline() -> None:
    deadline = node_wait_deadline(T0, timedelta(seconds=30), DEADLINE)
    assert deadline == DEADLINE  # capped at the attach deadline

    def at(now: datetime) -> NodeResolution:
        return resolve_consumed_by(
            NodeResolutionMode.ALLOCATION_OR_POD,
            pod("p1", "pod-0"),
            allocated_on=None,
            now=now,
            wait_deadline=deadline,
        )

    assert at(T0).status is Resolution.WAITING
    late = at(DEADLINE)
    assert late.status is Resolution.FAILED
    assert "no consumer pod has a node yet" in late.message


def test_allocation_only_fails_at_once_without_pin() -> None:
    outcome = resolve_consumed_by(
        NodeResolutionMode.ALLOCATION_ONLY, pod("p1", "pod-0", nominated="node-b"), allocated_on=None
    )
    assert outcome.status is Resolution.FAILED
    assert "bindsToNode" in outcome.message


def test_mode_none_passes_no_node() -> None:
    outcome = resolve_consumed_by(NodeResolutionMode.NONE, allocated_on="node-a")
    assert (outcome.status, outcome.node, outcome.source) == (Resolution.RESOLVED, None, NodeSource.NONE)
