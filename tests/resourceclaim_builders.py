"""Builders of plain API bodies and a scripted fake API for the resourceclaim unit tests.

The bodies look like what kube-apiserver returns, so the tests parse them with the same
functions the operator uses. The fake API answers the syncs' requests and records them as the
actions below.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from strategies import pod_consumer as pod_consumer
from strategies import pod_group_consumer as pod_group_consumer
from strategies import pod_group_object, pod_owner
from strategies import pod_group_owner as pod_group_owner

from operators.core.client import ApiError, KubeClient
from operators.core.events import EventRecorder, ObjectRef
from operators.core.reconcile import Result
from operators.dra.podgroups import PodGroup
from operators.resourceclaim import metrics
from operators.resourceclaim.cache import ClusterCache
from operators.resourceclaim.models import Pod, ResourceClaim, ResourceClaimTemplate

# The requests and notices of a sync, as the tests name them: the fake API server below records
# what the core's executor sends as these.


@dataclass(frozen=True)
class CreateClaim:
    namespace: str
    body: dict[str, Any]


@dataclass(frozen=True)
class _ObjectWrite:
    namespace: str
    name: str
    body: dict[str, Any]


class ApplyPodStatus(_ObjectWrite):
    """A server-side apply of ``pods/<name>/status``."""


class ApplyPodGroupStatus(_ObjectWrite):
    """A server-side apply of ``podgroups/<name>/status``."""


class PutClaimStatus(_ObjectWrite):
    """A PUT of ``resourceclaims/<name>/status``."""


class PutClaim(_ObjectWrite):
    """A PUT of ``resourceclaims/<name>``."""


@dataclass(frozen=True)
class DeleteClaim:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class _ObjectRead:
    namespace: str
    name: str


class GetPod(_ObjectRead):
    pass


class GetPodGroup(_ObjectRead):
    pass


class GetClaim(_ObjectRead):
    pass


@dataclass(frozen=True)
class EmitEvent:
    namespace: str
    name: str
    uid: str
    type: str
    reason: str
    message: str
    api_version: str = "v1"
    kind: str = "Pod"


@dataclass(frozen=True)
class CountClaimCreate:
    """An increment of the create counter."""

    status: str
    admin_access: str
    owner_api_group: str = ""
    owner_api_kind: str = "Pod"


Action = (
    CreateClaim
    | ApplyPodStatus
    | ApplyPodGroupStatus
    | PutClaimStatus
    | PutClaim
    | DeleteClaim
    | GetPod
    | GetPodGroup
    | GetClaim
    | EmitEvent
    | CountClaimCreate
)


@dataclass(frozen=True)
class Ok:
    body: dict[str, Any] | None = None


@dataclass(frozen=True)
class Failed:
    """An API error: ``code`` is the HTTP status, 0 for timeouts and connection errors."""

    code: int
    message: str
    retry_after: float | None = None


Reply = Ok | Failed

NS = "demo"
FINALIZER = "resource.kubernetes.io/delete-protection"
ALLOCATION: dict[str, Any] = {"devices": {"results": [{"request": "req-0", "driver": "gpu.example.com"}]}}
TEMPLATE_SPEC: dict[str, Any] = {
    "devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "gpu.example.com"}}]}
}


def template_entry(name: str, template: str) -> dict[str, str]:
    return {"name": name, "resourceClaimTemplateName": template}


def named_entry(name: str, claim: str) -> dict[str, str]:
    return {"name": name, "resourceClaimName": claim}


def pod_body(
    name: str = "my-pod",
    uid: str = "U",
    *,
    claims: Iterable[Mapping[str, str]] = (),
    statuses: Iterable[Mapping[str, str]] = (),
    node_name: str = "",
    phase: str = "Pending",
    deleting: bool = False,
    extended_claim: str | None = None,
    namespace: str = NS,
    pod_group: str | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "7"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    spec: dict[str, Any] = {"containers": [{"name": "ctr", "image": "busybox"}]}
    if claims:
        spec["resourceClaims"] = [dict(entry) for entry in claims]
    if node_name:
        spec["nodeName"] = node_name
    if pod_group is not None:
        spec["schedulingGroup"] = {"podGroupName": pod_group}
    status: dict[str, Any] = {"phase": phase}
    if statuses:
        status["resourceClaimStatuses"] = [dict(entry) for entry in statuses]
    if extended_claim is not None:
        status["extendedResourceClaimStatus"] = {
            "resourceClaimName": extended_claim,
            "requestMappings": [
                {"containerName": "ctr", "resourceName": "example.com/gpu", "requestName": "r"}
            ],
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def make_pod(name: str = "my-pod", uid: str = "U", **kwargs: Any) -> Pod:
    return Pod.model_validate(pod_body(name, uid, **kwargs))


def pod_group_body(
    name: str = "pg",
    uid: str = "G",
    *,
    claims: Iterable[Mapping[str, str]] = (),
    statuses: Iterable[Mapping[str, str]] = (),
    deleting: bool = False,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "uid": uid,
        "resourceVersion": "3",
        "finalizers": ["scheduling.k8s.io/podgroup-protection"],
    }
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:02:00Z"
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": 2}}}
    if claims:
        spec["resourceClaims"] = [dict(entry) for entry in claims]
    status: dict[str, Any] = {}
    if statuses:
        status["resourceClaimStatuses"] = [dict(entry) for entry in statuses]
    return pod_group_object(metadata, spec, status)


def make_pod_group(name: str = "pg", uid: str = "G", **kwargs: Any) -> PodGroup:
    return PodGroup.model_validate(pod_group_body(name, uid, **kwargs))


def claim_body(
    name: str,
    uid: str | None = None,
    *,
    owner: tuple[str, str] | None = None,
    owner_ref: Mapping[str, Any] | None = None,
    entry: str | None = None,
    annotations: Mapping[str, str] | None = None,
    finalizers: Iterable[str] = (),
    allocated: bool = False,
    reserved_for: Iterable[Mapping[str, str]] = (),
    deleting: bool = False,
    created: str = "2026-01-01T00:00:00Z",
    spec: Mapping[str, Any] | None = None,
    namespace: str = NS,
) -> dict[str, Any]:
    """A claim body; ``owner`` = (pod name, pod uid) makes it controlled by that pod."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{name}",
        "resourceVersion": "42",
        "creationTimestamp": created,
        "managedFields": [{"manager": "kube-scheduler", "operation": "Update"}],
    }
    all_annotations = dict(annotations or {})
    if entry is not None:
        all_annotations["resource.kubernetes.io/pod-claim-name"] = entry
    if all_annotations:
        metadata["annotations"] = all_annotations
    if owner is not None:
        metadata["ownerReferences"] = [pod_owner(*owner)]
    if owner_ref is not None:
        metadata["ownerReferences"] = [dict(owner_ref)]
    if finalizers:
        metadata["finalizers"] = list(finalizers)
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:05:00Z"
    status: dict[str, Any] = {}
    if allocated:
        status["allocation"] = copy.deepcopy(ALLOCATION)
    reserved = [dict(consumer) for consumer in reserved_for]
    if reserved:
        status["reservedFor"] = reserved
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": copy.deepcopy(dict(spec or TEMPLATE_SPEC)),
        "status": status,
    }


def make_claim(name: str, uid: str | None = None, **kwargs: Any) -> ResourceClaim:
    return ResourceClaim.from_body(claim_body(name, uid, **kwargs))


def template_body(
    name: str = "gpu-tmpl",
    *,
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    spec: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NS, "uid": uid or f"uid-{name}"},
        "spec": {
            "metadata": {
                "labels": dict({"app": "demo"} if labels is None else labels),
                "annotations": dict({"note": "x"} if annotations is None else annotations),
                "creationTimestamp": None,
            },
            "spec": copy.deepcopy(dict(spec or TEMPLATE_SPEC)),
        },
    }


def make_template(name: str = "gpu-tmpl", **kwargs: Any) -> ResourceClaimTemplate:
    return ResourceClaimTemplate.model_validate(template_body(name, **kwargs))


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeApi:
    """Answers a sync's requests like kube-apiserver would, unless a failure is scripted.

    ``failures[ActionType]`` is a list of replies used, in order, before normal answers.
    ``live_pods`` maps pod names to UIDs for live GETs; ``live_claims`` likewise.
    """

    SUFFIXES = ("bcdfg", "hjklm", "npqrs", "tvwxz", "24567")

    def __init__(self) -> None:
        self.actions: list[Action] = []
        self.failures: dict[type, list[Reply]] = {}
        self.live_pods: dict[str, str] = {}
        self.live_claims: dict[str, str] = {}
        self.live_pod_groups: dict[str, str] = {}
        self.created: list[dict[str, Any]] = []

    def fail(self, action_type: type, *replies: Reply) -> None:
        self.failures.setdefault(action_type, []).extend(replies)

    def __call__(self, action: Action) -> Reply:
        self.actions.append(action)
        scripted = self.failures.get(type(action))
        if scripted:
            return scripted.pop(0)
        if isinstance(action, CreateClaim):
            body = copy.deepcopy(action.body)
            metadata = body["metadata"]
            index = len(self.created)
            metadata["name"] = metadata["generateName"] + self.SUFFIXES[index % len(self.SUFFIXES)]
            metadata["uid"] = f"created-{index}"
            metadata["resourceVersion"] = "1"
            metadata["creationTimestamp"] = f"2026-01-01T00:00:{index:02d}Z"
            self.created.append(body)
            return Ok(body)
        if isinstance(action, PutClaimStatus | PutClaim):
            body = copy.deepcopy(action.body)
            body["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1)
            return Ok(body)
        if isinstance(action, GetPod):
            if action.name not in self.live_pods:
                return Failed(404, f'pods "{action.name}" not found')
            return Ok({"metadata": {"name": action.name, "uid": self.live_pods[action.name]}})
        if isinstance(action, GetPodGroup):
            if action.name not in self.live_pod_groups:
                return Failed(404, f'podgroups.scheduling.k8s.io "{action.name}" not found')
            return Ok({"metadata": {"name": action.name, "uid": self.live_pod_groups[action.name]}})
        if isinstance(action, GetClaim):
            if action.name not in self.live_claims:
                return Failed(404, "not found")
            return Ok({"metadata": {"name": action.name, "uid": self.live_claims[action.name]}})
        return Ok()

    def run(self, sync: Coroutine[Any, Any, Result]) -> Result:
        """The outcome of a sync that reads and writes through this fake (its Writer); the creates
        it counted are recorded after its requests."""
        before = _create_counts()
        result = asyncio.run(sync)
        for labels, count in _create_counts().items():
            self.actions.extend([CountClaimCreate(*labels)] * int(count - before.get(labels, 0)))
        return result

    # The Writer a sync executes its plans with: each request is recorded as the action it is.

    @property
    def client(self) -> KubeClient:
        return cast(KubeClient, _RecordingClient(self))

    @property
    def events(self) -> EventRecorder:
        return cast(EventRecorder, _RecordingEvents(self))

    @property
    def field_manager(self) -> str:
        return "dra-operators-resourceclaim"

    def of_type(self, action_type: type) -> list[Any]:
        return [action for action in self.actions if isinstance(action, action_type)]

    def writes(self) -> list[Any]:
        """Every action that changes the cluster."""
        kinds = (CreateClaim, ApplyPodStatus, ApplyPodGroupStatus, PutClaimStatus, PutClaim, DeleteClaim)
        return [action for action in self.actions if isinstance(action, kinds)]


def cache_with(
    *,
    pods: Iterable[Pod] = (),
    claims: Iterable[ResourceClaim] = (),
    templates: Iterable[ResourceClaimTemplate] = (),
    pod_groups: Iterable[PodGroup] = (),
    workload_claims: bool = False,
    clock: FakeClock | None = None,
) -> ClusterCache:
    """A cache after the initial listing of the given objects; ``workload_claims`` as the
    controller decides it at start, before any event."""
    cache = ClusterCache(clock=clock or FakeClock())
    cache.workload_claims = workload_claims
    for group in pod_groups:
        cache.apply_pod_group_event(None, group)
    for template in templates:
        cache.apply_template_event(None, template)
    for claim in claims:
        cache.apply_claim_event(None, claim)
    for pod in pods:
        cache.apply_pod_event(None, pod)
    return cache


class _RecordingClient:
    """The requests of a sync, answered by ``api`` as the actions they are."""

    def __init__(self, api: FakeApi) -> None:
        self.api = api

    def _answer(self, action: Action) -> Any:
        reply = self.api(action)
        if isinstance(reply, Failed):
            raise ApiError(reply.code, "Failed", reply.message, reply.retry_after)
        return reply.body

    async def get(self, path: str, **_: str) -> Any:
        namespace, resource, name, _sub = _parts(path)
        get: Action = (
            GetPod(namespace, name)
            if resource == "pods"
            else GetPodGroup(namespace, name)
            if resource == "podgroups"
            else GetClaim(namespace, name)
        )
        return self._answer(get)

    async def replace(self, path: str, body: Mapping[str, Any], **params: str) -> Any:
        namespace, _resource, name, subresource = _parts(path)
        put = PutClaimStatus if subresource == "status" else PutClaim
        return self._answer(put(namespace, name, dict(body)))

    async def request(self, method: str, path: str, *, body: Any = None, **options: Any) -> Any:
        assert method == "DELETE", method
        namespace, _, name, _sub = _parts(path)
        return self._answer(DeleteClaim(namespace, name, body["preconditions"]["uid"]))

    async def create(self, path: str, body: Mapping[str, Any], **params: str) -> Any:
        assert params == {"fieldManager": "dra-operators-resourceclaim"}, params
        namespace = path.split("/namespaces/", 1)[1].split("/")[0]
        return self._answer(CreateClaim(namespace, dict(body)))

    async def apply(self, path: str, body: Mapping[str, Any], field_manager: str, **_: Any) -> Any:
        namespace, resource, name, subresource = _parts(path)
        assert subresource == "status", path
        apply: Action = (
            ApplyPodStatus(namespace, name, dict(body))
            if resource == "pods"
            else ApplyPodGroupStatus(namespace, name, dict(body))
        )
        return self._answer(apply)


def _parts(path: str) -> tuple[str, str, str, str]:
    """(namespace, resource, name, subresource) of an object's path."""
    after = path.split("/namespaces/", 1)[1].split("/")
    return after[0], after[1], after[2], after[3] if len(after) > 3 else ""


class _RecordingEvents:
    def __init__(self, api: FakeApi) -> None:
        self.api = api

    def record(self, obj: ObjectRef, type_: str, reason: str, message: str) -> None:
        self.api.actions.append(
            EmitEvent(
                obj.namespace or "", obj.name, obj.uid, type_, reason, message, obj.api_version, obj.kind
            )
        )


def _create_counts() -> dict[tuple[str, ...], float]:
    """The create counter's value per label set."""
    [family] = metrics.creates.collect()
    names = ("status", "admin_access", "owner_api_group", "owner_api_kind")
    return {
        tuple(sample.labels[label] for label in names): sample.value
        for sample in family.samples
        if sample.name.endswith("_total")
    }
