"""Plain-data builders shared by the bindingattacher unit tests (not a test module)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from runtime_support import unit_runtime
from strategies import pod_consumer

from operators.bindingattacher import ledger
from operators.bindingattacher.actions.base import ActionConfigError
from operators.bindingattacher.actions.factory import BuildContext, build_action
from operators.bindingattacher.controller import BindingAttacherController
from operators.bindingattacher.models import (
    ActionSpec,
    DeviceAttachment,
    DeviceAttachmentStatus,
    NodeSource,
    ResourceClaim,
)
from operators.bindingattacher.selection import NodeResolution
from operators.bindingattacher.settings import Settings
from operators.core.client import KubeClient
from operators.core.conditions import format_time
from operators.core.events import EventRecorder
from operators.core.namespace import NamespaceState, Presence

T0 = datetime(2026, 8, 1, 10, 0, 0, tzinfo=UTC)
DEADLINE = T0 + timedelta(seconds=22)
FABRIC = "fabric.attach-test.dra-operators.io"
NIC = "nic.attach-test.dra-operators.io"
FOREIGN = "foreign.attach-test.dra-operators.io"
ATTACHED = f"{FABRIC}/attached"
ATTACH_FAILED = f"{FABRIC}/attach-failed"
ATTACH_TIMEOUT = f"{FABRIC}/attach-timeout"
CLAIM_UID = "5b0c2f1e-8d7a-4c3b-9e2f-1a0b9c8d7e6f"


def result(
    device: str = "f0",
    *,
    driver: str = FABRIC,
    pool: str = "fabric-pool",
    ready: Sequence[str] | None = None,
    failure: Sequence[str] | None = None,
    share_id: str | None = None,
    admin: bool = False,
) -> dict[str, Any]:
    if driver == FABRIC:
        ready = (ATTACHED,) if ready is None else ready
        failure = (ATTACH_FAILED, ATTACH_TIMEOUT) if failure is None else failure
    else:
        ready = (f"{driver}/ready",) if ready is None else ready
        failure = (f"{driver}/failed",) if failure is None else failure
    doc: dict[str, Any] = {
        "request": "gpu",
        "driver": driver,
        "pool": pool,
        "device": device,
        "bindingConditions": list(ready),
        "bindingFailureConditions": list(failure),
    }
    if share_id:
        doc["shareID"] = share_id
    if admin:
        doc["adminAccess"] = True
    return doc


def pinned(node: str) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
    }


def condition(
    type_: str, status: str, reason: str = "Attaching", message: str = "", generation: int = 1
) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": format_time(T0),
    }


def as_stored(entry_doc: dict[str, Any]) -> dict[str, Any]:
    """An applied ``status.devices`` entry as the API server returns it: a zero
    ``observedGeneration`` is dropped (``omitempty``), which is all a ResourceClaim ever gets."""
    conditions = [
        {k: v for k, v in c.items() if k != "observedGeneration" or v} for c in entry_doc["conditions"]
    ]
    return {**entry_doc, "conditions": conditions}


def entry(
    device: str, conditions: Sequence[dict[str, Any]], *, driver: str = FABRIC, pool: str = "fabric-pool"
) -> dict[str, Any]:
    return {"driver": driver, "pool": pool, "device": device, "conditions": list(conditions)}


def claim(
    results: Sequence[dict[str, Any]] | None = None,
    **options: Any,
) -> ResourceClaim:
    return ResourceClaim.model_validate(claim_body(results, **options))


def claim_body(
    results: Sequence[dict[str, Any]] | None = None,
    *,
    node: str | None = "node-a",
    timestamp: datetime | None = T0,
    devices: Sequence[dict[str, Any]] = (),
    reserved: Sequence[str] = ("pod-uid-1",),
    uid: str = CLAIM_UID,
    generation: int = 1,
    allocated: bool = True,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A claim as the API server shows it."""
    status: dict[str, Any] = {
        "reservedFor": [pod_consumer(f"pod-{i}", u) for i, u in enumerate(reserved)],
        "devices": list(devices),
    }
    if allocated:
        allocation: dict[str, Any] = {
            "devices": {"results": list(results if results is not None else [result()])}
        }
        if node is not None:
            allocation["nodeSelector"] = pinned(node)
        if timestamp is not None:
            allocation["allocationTimestamp"] = format_time(timestamp)
        status["allocation"] = allocation
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "trainer-0-gpu",
            "namespace": "team-a",
            "uid": uid,
            "generation": generation,
            "resourceVersion": "48213",
            "annotations": annotations or {},
        },
        "status": status,
    }


def record(
    the_claim: ResourceClaim | None = None,
    *,
    device: str = "f0",
    status: DeviceAttachmentStatus | None = None,
    node: str | None = "node-a",
    index: int | None = None,
) -> DeviceAttachment:
    the_claim = the_claim or claim([result(device)])
    allocation = the_claim.status.allocation
    assert allocation is not None
    assert allocation.allocation_timestamp is not None
    results = allocation.devices.results
    chosen = results[index] if index is not None else next(r for r in results if r.device == device)
    return ledger.new_record(
        claim=the_claim,
        result=chosen,
        allocation_timestamp=allocation.allocation_timestamp,
        policy_name="fabric",
        policy_uid="policy-uid",
        policy_generation=3,
        deadline=DEADLINE,
        namespace="dra-operators",
        status=status or DeviceAttachmentStatus(),
        node=NodeResolution.resolved(node, NodeSource.ALLOCATION) if node else None,
    )


def record_body(the_record: DeviceAttachment, *, uid: str, resource_version: str = "1") -> dict[str, Any]:
    """A ledger record as the API server shows it, under ``uid``."""
    meta = the_record.metadata.model_copy(update={"uid": uid, "resource_version": resource_version})
    return ledger.stored_body(the_record.model_copy(update={"metadata": meta}), meta.finalizers)


def attach_request(
    operation: str = "Attach",
    *,
    annotations: dict[str, str] | None = None,
    timestamp: datetime = T0,
    uid: str = CLAIM_UID,
    device: str = "f0",
) -> Any:
    """An AttachRequest built the way the runtime builds it, from a claim and its record."""
    from operators.bindingattacher.actions.base import Operation
    from operators.bindingattacher.calls import build_request

    the_claim = claim([result(device)], timestamp=timestamp, uid=uid, annotations=annotations)
    return build_request(
        Operation(operation),
        record(the_claim, device=device),
        timeout_seconds=5.0,
        claim=the_claim,
        with_test_annotations=True,
    )


def spawn(coroutine: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
    """What the runtime's spawn does, without the shutdown bookkeeping a unit test has no use for."""
    return asyncio.get_running_loop().create_task(coroutine, name=name)


async def refused_action(spec: ActionSpec, context: BuildContext) -> ActionConfigError:
    """The error with which building the action ``spec`` in ``context`` is refused."""
    with pytest.raises(ActionConfigError) as refused:
        await build_action(spec, context)
    return refused.value


@dataclass(frozen=True)
class Writes:
    """What the plans' executor writes with, around a test's fake API server (the runtime's
    client, Events and field manager in the operator)."""

    client: KubeClient
    events: EventRecorder
    field_manager: str = "test"


def attacher(client: object, ledger_namespace: Presence) -> BindingAttacherController:
    """A controller on its own runtime, as ``dra-operators bindingattacher`` builds it, over a
    fake API client, with the ledger namespace present or missing."""
    namespace = NamespaceState("dra-operators", "the DeviceAttachment ledger")
    namespace.update(ledger_namespace)
    runtime = unit_runtime(
        client,
        "bindingattacher",
        Settings(namespace="dra-operators"),
        field_manager="dra-operators-bindingattacher",
        own_namespace=namespace,
    )
    controller = BindingAttacherController(runtime)
    runtime.controller = controller
    return controller
