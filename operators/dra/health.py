"""Device health as the project reads it: the kubelet's reports on a pod, the devices they name,
and the DeviceHealthPolicy that owns a DeviceTaintRule.

Since 1.36 the kubelet writes ``status.containerStatuses[].allocatedResourcesStatus`` (KEP-4680,
gate ``ResourceHealthStatus``). Each entry's ``name`` is ``claim:<pod claim name>`` or
``claim:<pod claim name>/<request>``; the pod claim name resolves to the ResourceClaim through the
pod (``resourceClaimStatuses``, ``resourceClaimName``, or the extended-resource claim), and the
claim's allocation results for that request are the devices. Each ``resources[].resourceID`` is
``<driver>/<pool>/<device>``, or the device's first CDI ID where the driver gave one; a CDI ID names
a device only when the request has exactly one, and is otherwise left unresolved rather than
guessed: the devicehealth operator taints what a report names, and tainting the wrong device
evicts a healthy workload. ``message`` is filled only under the gate
``ResourceHealthStatusMessage``.

devicehealth acts on these reports and ``kubectl dra explain pod`` shows them; both resolve them
through :func:`device_reports`, so that the two never disagree about which device a report is on.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, TypeVar

from pydantic import Field

from operators.core import PROJECT_GROUP
from operators.core.models import KubeModel, NoneAsEmpty, OwnerReference, controller_of

from . import claims, pods
from .pools import DeviceId

CLAIM_PREFIX = "claim:"
HEALTHY = "Healthy"

POLICY_VERSION = "v1alpha1"
POLICY_API_VERSION = f"{PROJECT_GROUP}/{POLICY_VERSION}"
POLICY_KIND = "DeviceHealthPolicy"


def health_policy_of(references: Iterable[OwnerReference]) -> str | None:
    """The name of the DeviceHealthPolicy that controls an object (a DeviceTaintRule), if one does;
    any version of the group, so that a reader keeps naming the policy across API versions."""
    controller = controller_of(references)
    return controller.name if controller is not None and controller.is_a(PROJECT_GROUP, POLICY_KIND) else None


# --- The kubelet's reports ----------------------------------------------------------------------------


class ResourceHealth(KubeModel):
    resource_id: str = Field(default="", alias="resourceID")
    health: str = ""
    message: str | None = None


class ResourceStatus(KubeModel):
    name: str
    resources: Annotated[tuple[ResourceHealth, ...], NoneAsEmpty] = ()


class ContainerStatus(KubeModel):
    name: str = ""
    allocated_resources_status: Annotated[tuple[ResourceStatus, ...], NoneAsEmpty] = ()


class PodStatus(pods.PodStatus):
    container_statuses: Annotated[tuple[ContainerStatus, ...], NoneAsEmpty] = ()
    init_container_statuses: Annotated[tuple[ContainerStatus, ...], NoneAsEmpty] = ()


class Pod(pods.Pod):
    status: PodStatus = PodStatus()

    @property
    def containers_reporting(self) -> Iterator[ContainerStatus]:
        """The container statuses that carry DRA reports (others report device plugins' resources)."""
        for container in (*self.status.container_statuses, *self.status.init_container_statuses):
            if any(status.name.startswith(CLAIM_PREFIX) for status in container.allocated_resources_status):
                yield container


class RequestResult(claims.DeviceRequestAllocationResult):
    """A result with its request (``<request>`` or ``<request>/<subrequest>``)."""

    request: str = ""


ResultT = TypeVar("ResultT", bound=RequestResult)


@dataclass(frozen=True)
class DeviceReport:
    """One ``resources[]`` entry of a DRA report, and the device it names (None: not resolvable)."""

    container: str
    resource: str
    """The report's ``name``: ``claim:<pod claim name>[/<request>]``."""
    claim: str
    """The ResourceClaim's name, ``""`` when the pod does not name one for the pod claim."""
    resource_id: str
    health: str
    message: str
    device: DeviceId | None

    @property
    def pod_claim(self) -> str:
        """The pod's name for the claim (``spec.resourceClaims[].name``)."""
        return self.resource[len(CLAIM_PREFIX) :].partition("/")[0]


def claim_names(pod: pods.Pod) -> dict[str, str]:
    """Pod claim name -> ResourceClaim name, as the kubelet resolves them."""
    names = {
        entry.name: entry.resource_claim_name
        for entry in pod.spec.resource_claims
        if entry.resource_claim_name
    }
    for status in pod.status.resource_claim_statuses:
        if status.resource_claim_name:
            names[status.name] = status.resource_claim_name
    extended = pod.extended_claim_name
    if extended:
        names.setdefault(extended, extended)
    return names


def _request_devices(
    claim: claims.ResourceClaim[claims.AllocationResult[ResultT]], request: str
) -> list[DeviceId]:
    allocation = claim.status.allocation
    if allocation is None:
        return []
    return [
        DeviceId(result.driver, result.pool, result.device)
        for result in allocation.devices.results
        if not request or result.request.split("/", 1)[0] == request
    ]


def device_reports(
    pod: Pod,
    claims_by_key: Mapping[tuple[str, str], claims.ResourceClaim[claims.AllocationResult[ResultT]]],
    health: Collection[str] | None = None,
) -> Iterator[DeviceReport]:
    """The pod's DRA reports, container by container, with the devices they name; only those whose
    health is in ``health`` when given. Claims are looked up by (namespace, name) only for reports
    that pass, so a pod whose devices are all healthy costs no lookup."""
    names: dict[str, str] | None = None
    for container in pod.containers_reporting:
        for status in container.allocated_resources_status:
            if not status.name.startswith(CLAIM_PREFIX):
                continue
            wanted = [entry for entry in status.resources if health is None or entry.health in health]
            if not wanted:
                continue
            if names is None:
                names = claim_names(pod)
            reference, _, request = status.name[len(CLAIM_PREFIX) :].partition("/")
            claim_name = names.get(reference, "")
            claim = claims_by_key.get((pod.namespace, claim_name))
            devices = _request_devices(claim, request) if claim is not None else []
            by_id = {str(device): device for device in devices}
            for entry in wanted:
                device = by_id.get(entry.resource_id) or (devices[0] if len(devices) == 1 else None)
                yield DeviceReport(
                    container.name,
                    status.name,
                    claim_name,
                    entry.resource_id,
                    entry.health,
                    entry.message or "",
                    device,
                )
