"""Building the :class:`~.actions.base.AttachRequest` handed to an action (spec §10.2).

The request combines the ledger record (identity, device, node, previous data), the claim
(generation, consumers), the Node object (provider ID, system UUID, labels) and, when the
policy enables ``deviceInfo``, the device as currently published in the driver's
ResourceSlices. Device details come from the pool's newest generation only: older slices of a
pool being republished may describe devices that no longer exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from operators.dra.pools import visible_devices

from .actions.base import AttachRequest, ClaimRef, DeviceInfo, NodeInfo, Operation, PodRef, PolicyRef
from .identity import record_key
from .models import ActionDevice, DeviceAttachment, Node, ResourceClaim, ResourceSlice
from .selection import pod_consumers

TEST_ANNOTATION_PREFIX = "test.dra-operators.io/"


def published_device(
    slices: Iterable[ResourceSlice], driver: str, pool: str, device: str
) -> ActionDevice | None:
    found = visible_devices(slices).get(((driver, pool), device))
    return found[1] if found is not None else None


def node_info(record: DeviceAttachment, node: Node | None) -> NodeInfo | None:
    if record.spec.node is None:
        return None
    source = record.spec.node_source.value if record.spec.node_source else ""
    if node is None:
        return NodeInfo(name=record.spec.node, source=source)
    return NodeInfo(
        name=record.spec.node,
        source=source,
        provider_id=node.spec.provider_id,
        system_uuid=node.status.node_info.system_uuid,
        labels=dict(node.metadata.labels),
    )


def claim_test_annotations(claim: ResourceClaim | None) -> Mapping[str, str]:
    if claim is None:
        return {}
    return {k: v for k, v in claim.metadata.annotations.items() if k.startswith(TEST_ANNOTATION_PREFIX)}


def build_request(
    operation: Operation,
    record: DeviceAttachment,
    *,
    timeout_seconds: float,
    claim: ResourceClaim | None = None,
    node: Node | None = None,
    device: ActionDevice | None = None,
    policy_generation: int | None = None,
    with_test_annotations: bool = False,
) -> AttachRequest:
    """``claim`` may be None for a detach after the claim is gone; ``device`` None means unknown."""
    spec = record.spec
    generation = claim.metadata.generation if claim is not None else 0
    consumers = tuple(
        PodRef(namespace=spec.claim.namespace, name=c.name, uid=c.uid)
        for c in (pod_consumers(claim) if claim is not None else ())
    )
    detach = operation is Operation.DETACH
    deadline: datetime | None = None if detach else spec.deadline
    return AttachRequest(
        operation=operation,
        attachment_key=record.metadata.name or record_key(record),
        attempt=record.status.detach_attempts if detach else max(record.status.attempts, 1),
        deadline=deadline,
        timeout_seconds=timeout_seconds,
        claim=ClaimRef(
            namespace=spec.claim.namespace,
            name=spec.claim.name,
            uid=spec.claim.uid,
            generation=generation,
            annotations=claim_test_annotations(claim) if with_test_annotations else {},
        ),
        allocation_timestamp=spec.allocation_timestamp,
        device=DeviceInfo(
            driver=spec.driver,
            pool=spec.pool,
            name=spec.device,
            share_id=spec.share_id,
            request=spec.request,
            admin_access=spec.admin_access,
            binding_conditions=spec.binding_conditions,
            binding_failure_conditions=spec.binding_failure_conditions,
            binds_to_node=device.binds_to_node if device is not None else None,
            attributes=device.attributes if device is not None else None,
            capacity=device.capacity if device is not None else None,
        ),
        node=node_info(record, node),
        consumers=consumers,
        policy=PolicyRef(
            name=spec.policy.name,
            generation=policy_generation if policy_generation is not None else spec.policy.generation,
        ),
        previous_data=record.status.data if operation is not Operation.ATTACH else None,
        detach_reason=record.status.detach_reason.value if detach and record.status.detach_reason else None,
    )
