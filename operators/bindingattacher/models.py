"""Typed projections of the objects the binding attacher reads.

Only the fields the attacher uses are modelled; everything else is ignored, so that the
in-memory claim projection stays small (spec §15.3). The ResourceClaim and the Pod are the shared
projections of :mod:`operators.dra`, with what only the attacher reads added here: a result's
binding conditions, the allocation's node selector and timestamp, the drivers' device status
entries, a pod's nominated node. Kubernetes spells a few keys with an upper-case acronym
(``shareID``, ``providerID``, ``systemUUID``) which the camelCase alias generator cannot derive,
so those carry explicit aliases.

The attacher refuses what it always refused, where the shared projections are more lenient: a
``null`` list of results, consumers or device entries makes a claim unparsable, and a consumer
must name its resource, name and uid. It reads a missing or ``null`` namespace or node name as
``""``, as the shared projections store them.

Timestamps are parsed into aware datetimes and written back as RFC 3339 seconds in UTC, the
precision the API server stores and the precision ``attachmentKey`` is computed over.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, PlainSerializer, model_validator

from operators.core import PROJECT_GROUP
from operators.core.conditions import Condition, format_time
from operators.core.models import KubeModel, LeanMeta, ObjectMeta, OwnerReference
from operators.dra import claims, pods, slices
from operators.dra.attachments import VERSION

Timestamp = Annotated[datetime, PlainSerializer(format_time, return_type=str)]

API_VERSION = f"{PROJECT_GROUP}/{VERSION}"


def _none_as_blank(value: Any) -> Any:
    return "" if value is None else value


NoneAsBlank = BeforeValidator(_none_as_blank)
"""A ``null`` string reads as ``""``, which every read of these fields treats as absent."""


class AttacherMeta(LeanMeta):
    """The metadata of a claim or pod as the attacher has always accepted it: a missing name and
    a missing or ``null`` namespace read as ``""``, and ``null`` owner references are refused."""

    name: str = ""
    namespace: Annotated[str, NoneAsBlank] = ""
    owner_references: tuple[OwnerReference, ...] = ()


# --- ResourceClaim -------------------------------------------------------------------------------


class NodeSelectorRequirement(KubeModel):
    key: str
    operator: str
    values: tuple[str, ...] = ()


class NodeSelectorTerm(KubeModel):
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


class NodeSelector(KubeModel):
    node_selector_terms: tuple[NodeSelectorTerm, ...] = ()


class DeviceRequestAllocationResult(claims.DeviceRequestAllocationResult):
    """One ``status.allocation.devices.results[]`` entry, with the scheduler's condition copies."""

    request: str = ""
    admin_access: bool | None = None
    share_id: str | None = Field(default=None, alias="shareID")
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()


class DeviceAllocationResult(claims.DeviceAllocationResult[DeviceRequestAllocationResult]):
    results: tuple[DeviceRequestAllocationResult, ...] = ()


class AllocationResult(claims.AllocationResult[DeviceRequestAllocationResult]):
    devices: DeviceAllocationResult = DeviceAllocationResult()
    node_selector: NodeSelector | None = None
    allocation_timestamp: Timestamp | None = None


class ConsumerReference(claims.ConsumerReference):
    resource: str
    name: str
    uid: str


class AllocatedDeviceStatus(KubeModel):
    driver: str
    pool: str
    device: str
    share_id: str | None = Field(default=None, alias="shareID")
    conditions: tuple[Condition, ...] = ()
    data: dict[str, Any] | None = None


class ResourceClaimStatus(claims.ResourceClaimStatus[AllocationResult]):
    reserved_for: tuple[ConsumerReference, ...] = ()
    devices: tuple[AllocatedDeviceStatus, ...] = ()
    drivers_left_out: frozenset[str] = Field(default=frozenset(), exclude=True)
    """Not an API field: the drivers with binding conditions in the allocation that no policy
    configured when the claim was projected (``cache.project_claim``), so that their entries, or
    the whole allocation, were left out of it."""


class ClaimMeta(AttacherMeta):
    """What a cached claim keeps beyond the lean metadata: its resourceVersion (the newer of two
    copies wins) and the annotations that steer the Test action, the only ones kept; its labels
    are read as they always were, and emptied by the projection."""

    resource_version: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class ResourceClaim(claims.ResourceClaim[AllocationResult]):
    metadata: ClaimMeta
    status: ResourceClaimStatus = ResourceClaimStatus()


# --- Pods and Nodes (point reads, spec §6) ---------------------------------------------------------


# Of a consumer pod the attacher reads only where it runs or is nominated to run, never the claims
# it references: those keys are left unparsed (they keep their empty defaults), so that they cost
# nothing and a malformed one cannot make a consumer pod unreadable.


def _without(data: Any, *keys: str) -> Any:
    if not isinstance(data, Mapping):
        return data
    return {key: value for key, value in data.items() if key not in keys}


class PodSpec(pods.PodSpec):
    node_name: Annotated[str, NoneAsBlank] = ""

    @model_validator(mode="before")
    @classmethod
    def _skip_claims(cls, data: Any) -> Any:
        return _without(data, "resourceClaims")


class PodStatus(pods.PodStatus):
    nominated_node_name: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _skip_claims(cls, data: Any) -> Any:
        return _without(data, "resourceClaimStatuses", "extendedResourceClaimStatus")


class Pod(pods.Pod):
    metadata: AttacherMeta
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()


class NodeSystemInfo(KubeModel):
    system_uuid: str = Field(default="", alias="systemUUID")


class NodeSpec(KubeModel):
    provider_id: str = Field(default="", alias="providerID")


class NodeStatus(KubeModel):
    node_info: NodeSystemInfo = NodeSystemInfo()


class Node(KubeModel):
    metadata: ObjectMeta
    spec: NodeSpec = NodeSpec()
    status: NodeStatus = NodeStatus()


# --- ResourceSlice (device info for actions, spec §6 last paragraph) -----------------------------


class ActionDevice(slices.SliceDevice):
    """A device as an action is told about it: attributes and capacity stay raw."""

    binds_to_node: bool | None = None
    attributes: dict[str, dict[str, Any]] = Field(default_factory=dict)
    capacity: dict[str, dict[str, Any]] = Field(default_factory=dict)


class ResourceSliceSpec(slices.ResourceSliceSpec[ActionDevice]):
    node_name: str | None = None


class ResourceSlice(slices.ResourceSlice[ActionDevice]):
    spec: ResourceSliceSpec


# --- DeviceAttachPolicy (spec §21) -----------------------------------------------------------------


class ActionKind(enum.StrEnum):
    PYTHON = "Python"
    WEBHOOK = "Webhook"
    EXEC = "Exec"
    NOOP = "Noop"
    TEST = "Test"


class NodeResolutionMode(enum.StrEnum):
    ALLOCATION_ONLY = "AllocationOnly"
    ALLOCATION_OR_POD = "AllocationOrPod"
    NONE = "None"


class TaintDevice(enum.StrEnum):
    NEVER = "Never"
    ON_PERMANENT_ERROR = "OnPermanentError"
    ALWAYS = "Always"


class SecretKeyRef(KubeModel):
    name: str
    key: str = ""


class SecretRef(KubeModel):
    name: str


class PythonActionSpec(KubeModel):
    entry_point: str = ""
    config: dict[str, Any] = Field(default_factory=dict)


class WebhookActionSpec(KubeModel):
    url: str = ""
    ca_bundle: str | None = None
    ca_secret_ref: SecretKeyRef | None = None
    client_cert_secret_ref: SecretRef | None = None
    bearer_token_secret_ref: SecretKeyRef | None = None
    server_name: str | None = None
    connect_timeout: str = "5s"
    probe: bool = False
    allow_insecure_http: bool = Field(default=False, alias="allowInsecureHTTP")


class EnvVar(KubeModel):
    name: str
    value: str = ""


class ExecActionSpec(KubeModel):
    command: tuple[str, ...] = ()
    env: tuple[EnvVar, ...] = ()


class NoopActionSpec(KubeModel):
    delay: str = "0s"


class TestActionSpec(KubeModel):
    attach_outcome: str = "Succeed"
    attach_delay: str = "0s"
    fail_first: int = 0
    fail_allocations: int = 0
    detach_outcome: str = "Succeed"
    detach_delay: str = "0s"
    inventory_config_map: str | None = None


class ActionSpec(KubeModel):
    kind: ActionKind
    timeout: str = "60s"
    python: PythonActionSpec | None = None
    webhook: WebhookActionSpec | None = None
    exec: ExecActionSpec | None = None
    noop: NoopActionSpec | None = None
    test: TestActionSpec | None = None


class PoolSelector(KubeModel):
    pools: tuple[str, ...] = ()


class ConcurrencySpec(KubeModel):
    max_attaches: int = 20
    max_detaches: int = 10


class RetrySpec(KubeModel):
    initial_backoff: str = "1s"
    max_backoff: str = "30s"


class ReasonsSpec(KubeModel):
    attaching: str = "Attaching"
    waiting_for_node: str = "WaitingForNode"
    waiting_for_detach: str = "WaitingForDetach"
    attached: str = "Attached"
    failed: str = "AttachFailed"
    timeout: str = "AttachTimeout"
    node_not_determined: str = "NodeNotDetermined"


class ConditionsSpec(KubeModel):
    managed_types: tuple[str, ...] = ()
    failure_type: str = ""
    timeout_failure_type: str = ""
    node_failure_type: str = ""
    report_progress: bool = True
    write_data: bool = False
    reasons: ReasonsSpec = ReasonsSpec()


class DetachSpec(KubeModel):
    grace_period: str = "0s"
    initial_backoff: str = "5s"
    max_backoff: str = "5m"
    permanent_error_retry: str = "1h"


class OnFailureSpec(KubeModel):
    taint_device: TaintDevice = TaintDevice.ON_PERMANENT_ERROR
    taint_duration: str = "10m"


class DeviceAttachPolicySpec(KubeModel):
    driver: str
    selector: PoolSelector = PoolSelector()
    node_resolution: NodeResolutionMode = NodeResolutionMode.ALLOCATION_OR_POD
    node_wait_timeout: str = "30s"
    binding_timeout: str = "600s"
    safety_margin: str = "15s"
    device_info: bool = True
    action: ActionSpec
    concurrency: ConcurrencySpec = ConcurrencySpec()
    retry: RetrySpec = RetrySpec()
    conditions: ConditionsSpec = ConditionsSpec()
    detach: DetachSpec = DetachSpec()
    on_failure: OnFailureSpec = OnFailureSpec()


class DeviceAttachPolicy(KubeModel):
    metadata: ObjectMeta
    spec: DeviceAttachPolicySpec


# --- DeviceAttachment ledger (spec §8.3) -----------------------------------------------------------


class Phase(enum.StrEnum):
    PENDING = "Pending"
    ATTACHING = "Attaching"
    ATTACHED = "Attached"
    FAILED = "Failed"
    DETACHING = "Detaching"
    DETACHED = "Detached"


class WaitingFor(enum.StrEnum):
    NOTHING = ""
    NODE = "Node"
    PREVIOUS_DETACH = "PreviousDetach"
    SLOT = "Slot"


class DetachReason(enum.StrEnum):
    DEALLOCATED = "Deallocated"
    REALLOCATED = "Reallocated"
    CLAIM_DELETED = "ClaimDeleted"
    FAILED = "Failed"
    POLICY_REMOVED = "PolicyRemoved"


class Reported(enum.StrEnum):
    NONE = "None"
    PROGRESS = "Progress"
    READY = "Ready"
    FAILURE = "Failure"


class NodeSource(enum.StrEnum):
    ALLOCATION = "Allocation"
    POD = "Pod"
    NONE = "None"


class FailureKind(enum.StrEnum):
    """Which configured reason (and failure type override) a failure uses (spec §11.2)."""

    FAILED = "Failed"
    TIMEOUT = "Timeout"
    NODE = "Node"


class ClaimReference(KubeModel):
    namespace: str
    name: str
    uid: str


class PolicyReference(KubeModel):
    name: str
    uid: str = ""
    generation: int = 0


class DeviceAttachmentSpec(KubeModel):
    claim: ClaimReference
    allocation_timestamp: Timestamp
    driver: str
    pool: str
    device: str
    share_id: str | None = Field(default=None, alias="shareID")
    request: str = ""
    admin_access: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    node: str | None = None
    node_source: NodeSource | None = None
    policy: PolicyReference
    deadline: Timestamp


class AttachFailure(KubeModel):
    kind: FailureKind = FailureKind.FAILED
    reason: str
    message: str = ""
    condition_type: str = ""


class DeviceAttachmentStatus(KubeModel):
    phase: Phase = Phase.PENDING
    waiting_for: WaitingFor = WaitingFor.NOTHING
    attempts: int = 0
    detach_attempts: int = 0
    failure: AttachFailure | None = None
    detach_reason: DetachReason | None = None
    data: dict[str, Any] | None = None
    action_message: str = ""
    reported: Reported = Reported.NONE
    adopted: bool = False
    last_error: str = ""
    last_transition_time: Timestamp | None = None
    attached_at: Timestamp | None = None
    detached_at: Timestamp | None = None


class DeviceAttachment(KubeModel):
    metadata: ObjectMeta
    spec: DeviceAttachmentSpec
    status: DeviceAttachmentStatus = DeviceAttachmentStatus()
