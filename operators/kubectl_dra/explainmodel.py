"""``kubectl dra explain``: why a claim or a pod is where it is, in plain words.

Pure: it reads a snapshot of the cluster (:class:`Snapshot`, raw API objects) and returns
:class:`Finding` s, each naming the object field it comes from, so that the reader can check every
statement with ``kubectl get -o yaml``. The situations it recognises:

* a claim that is not allocated: for each request, its DeviceClass, how many published devices match
  the class and the request's selectors, and why the others cannot be had (in use by another claim,
  a taint the request does not tolerate, not enough free counters), or that no pod asks for the
  claim, since kube-scheduler allocates a claim only for a pod it schedules;
* a claim that is allocated while a device waits for its binding conditions: which condition,
  since when (``allocationTimestamp``), and the attacher's last message;
* a claim that is being deleted and is held by ``resource.kubernetes.io/delete-protection``, and why
  (it is still reserved or allocated; once neither, the resourceclaim controller removes it);
* a claim reserved for a pod that is gone, replaced or finished.

Device health (issue #41), where the cluster reports it: the taints of an allocated device, a
``None`` taint as a signal that blocks nothing apart from those that do, with the DeviceHealthPolicy
that wrote a rule; and for a pod, the health the kubelet reports for each device of each container
(``allocatedResourcesStatus``), where anything but Healthy is a warning. A pod without those reports
gets no line about them: older kubelets and a disabled gate are not news.

The device matching mirrors the scheduler's for what it shows (current slices only, class selectors
then request selectors, NoSchedule and NoExecute taints of slices and DeviceTaintRules, devices of
other claims, shared counters); it explains, it does not allocate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from operators.core.conditions import format_time
from operators.core.models import NoneAsEmpty
from operators.dra import claims, health, slices
from operators.dra.cel import CelError, PreparedDevice, compile_expression
from operators.dra.pods import TERMINAL_PHASES
from operators.dra.pools import DeviceId, current_slices_by_pool, visible_devices
from operators.dra.quantity import Quantity, QuantityRangeError
from operators.dra.selectable import SelectableDevice
from operators.dra.slices import CounterSet, DeviceCounterConsumption
from operators.dra.taintrules import DeviceTaintRule
from operators.dra.taints import (
    EFFECT_NO_EXECUTE,
    DeviceToleration,
    taint_eviction_time,
    taint_prevents_allocation,
    taint_tolerated,
)

from .devicetaints import PlacedTaint, parse_rules, rule_taints, slice_taints
from .errors import PluginError

DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"

Key = tuple[str, str]


@dataclass(frozen=True)
class Finding:
    """One statement, and the field (``<Kind> <namespace>/<name> <path>``) it is read from;
    ``warning`` when it is something wrong with a device the reader's workload uses."""

    text: str
    source: str
    warning: bool = False

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"text": self.text, "source": self.source}
        if self.warning:
            found["warning"] = True
        return found


@dataclass
class Snapshot:
    """What explain reads: raw objects as the API returns them."""

    claims: dict[Key, dict[str, Any]] = field(default_factory=dict)
    pods: dict[Key, dict[str, Any]] = field(default_factory=dict)
    templates: dict[Key, dict[str, Any]] = field(default_factory=dict)
    slices: list[dict[str, Any]] = field(default_factory=list)
    classes: dict[str, dict[str, Any]] = field(default_factory=dict)
    rules: list[dict[str, Any]] = field(default_factory=list)


# --- the devices as explain reads them ------------------------------------------------------------


class ExplainedDevice(SelectableDevice):
    consumes_counters: Annotated[tuple[DeviceCounterConsumption, ...], NoneAsEmpty] = ()


class _SliceSpec(slices.ResourceSliceSpec[ExplainedDevice]):
    shared_counters: Annotated[tuple[CounterSet, ...], NoneAsEmpty] = ()


class _Slice(slices.ResourceSlice[ExplainedDevice]):
    spec: _SliceSpec


_ReportedClaim = claims.ResourceClaim[claims.AllocationResult[health.RequestResult]]


@dataclass(frozen=True)
class _Device:
    driver: str
    pool: str
    name: str
    device: ExplainedDevice
    slice_name: str

    @property
    def id(self) -> DeviceId:
        return DeviceId(self.driver, self.pool, self.name)

    @property
    def ref(self) -> str:
        return str(self.id)


CounterKey = tuple[str, str, str]
"""(driver, pool, counter set)"""


def _devices(
    bodies: Iterable[Mapping[str, Any]],
) -> tuple[list[_Device], dict[CounterKey, dict[str, Quantity]]]:
    """Published devices of the current slices, and each pool's counter sets (of its current slices)."""
    parsed = [_Slice.model_validate(body) for body in bodies]
    devices = [
        _Device(driver, pool, name, device, resource_slice.name)
        for ((driver, pool), name), (resource_slice, device) in sorted(visible_devices(parsed).items())
    ]
    counters: dict[CounterKey, dict[str, Quantity]] = {}
    for current in current_slices_by_pool(parsed).values():
        for resource_slice in current:
            spec = resource_slice.spec
            for counter_set in spec.shared_counters:
                counters.setdefault(
                    (spec.driver, spec.pool.name, counter_set.name),
                    {n: c.value for n, c in counter_set.counters.items()},
                )
    return devices, counters


# --- helpers -----------------------------------------------------------------------------------------


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _ref(kind: str, obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    namespace = meta.get("namespace")
    return f"{kind} {namespace + '/' if namespace else ''}{meta.get('name')}"


def _plural(count: int, singular: str, plural: str | None = None) -> str:
    return f"{count} {singular if count == 1 else (plural or singular + 's')}"


def _allocated_results(claim: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


def _in_use(snapshot: Snapshot, besides: Key) -> dict[tuple[str, str, str], Key]:
    """Devices allocated to claims other than ``besides``, and to which claim."""
    used: dict[tuple[str, str, str], Key] = {}
    for key, claim in snapshot.claims.items():
        if key == besides:
            continue
        for result in _allocated_results(claim):
            used.setdefault((result.get("driver", ""), result.get("pool", ""), result.get("device", "")), key)
    return used


@dataclass(frozen=True)
class _Published:
    """What every request of one claim is measured against, read once per claim: the devices, who
    holds which, the counters those holders leave, and the DeviceTaintRules."""

    devices: Sequence[_Device]
    used: Mapping[tuple[str, str, str], Key]
    remaining: Mapping[CounterKey, Mapping[str, Quantity]]
    rules: Sequence[DeviceTaintRule]

    @classmethod
    def of(cls, snapshot: Snapshot, besides: Key) -> _Published:
        devices, counters = _devices(snapshot.slices)
        used = _in_use(snapshot, besides)
        remaining = {name: dict(values) for name, values in counters.items()}
        for device in devices:
            if (device.driver, device.pool, device.name) in used:
                _charge(remaining, device)
        return cls(devices, used, remaining, parse_rules(snapshot.rules))

    def taints(self, device: _Device) -> list[PlacedTaint]:
        """The device's own taints and those DeviceTaintRules give it (as the operators apply rules:
        one that also names a class or CEL selectors gives none)."""
        return [
            *slice_taints(device.id, device.slice_name, device.device),
            *rule_taints(device.id, self.rules),
        ]


def _pods_using(snapshot: Snapshot, namespace: str, claim_name: str) -> list[str]:
    users = []
    for (pod_namespace, pod_name), pod in sorted(snapshot.pods.items()):
        if pod_namespace != namespace:
            continue
        statuses = {
            s.get("name"): s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        }
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            name = entry.get("resourceClaimName") or statuses.get(entry.get("name"))
            if name == claim_name:
                users.append(pod_name)
                break
    return users


# --- requests -------------------------------------------------------------------------------------


@dataclass
class _Tally:
    matching: int = 0
    in_use: dict[str, str] = field(default_factory=dict)
    tainted: dict[str, str] = field(default_factory=dict)
    signals: dict[str, str] = field(default_factory=dict)
    no_counters: list[str] = field(default_factory=list)
    free: list[str] = field(default_factory=list)
    error: str = ""


def _expressions(selectors: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str((s.get("cel") or {}).get("expression", "")) for s in selectors if s.get("cel")]


def _explain_request(snapshot: Snapshot, request: Mapping[str, Any], published: _Published) -> _Tally:
    tally = _Tally()
    class_name = str(request.get("deviceClassName") or "")
    device_class = snapshot.classes.get(class_name)
    if device_class is None:
        tally.error = f"DeviceClass {class_name} does not exist"
        return tally
    try:
        compiled = [
            compile_expression(e)
            for e in [
                *_expressions((device_class.get("spec") or {}).get("selectors") or []),
                *_expressions(request.get("selectors") or []),
            ]
        ]
    except CelError as err:
        tally.error = f"a selector does not compile: {err}"
        return tally
    tolerations = [DeviceToleration.model_validate(t) for t in request.get("tolerations") or []]
    for candidate in published.devices:
        prepared = PreparedDevice(candidate.device.cel_device(candidate.driver))
        try:
            if not all(expression.matches(prepared) for expression in compiled):
                continue
        except CelError:
            continue
        tally.matching += 1
        owner = published.used.get((candidate.driver, candidate.pool, candidate.name))
        if owner is not None and not candidate.device.allow_multiple_allocations:
            tally.in_use[candidate.ref] = f"{owner[0]}/{owner[1]}"
            continue
        placed = published.taints(candidate)
        signals = [p for p in placed if not p.blocks]
        if signals:
            tally.signals[candidate.ref] = ", ".join(p.describe() for p in signals)
        if taint_prevents_allocation([p.taint for p in placed], tolerations):
            # Only the taints that keep the request away, as the allocator judges them.
            blocking = [p for p in placed if taint_prevents_allocation((p.taint,), tolerations)]
            tally.tainted[candidate.ref] = ", ".join(p.describe() for p in blocking)
            continue
        if not _fits(published.remaining, candidate):
            tally.no_counters.append(candidate.ref)
            continue
        tally.free.append(candidate.ref)
    return tally


def _charge(remaining: dict[CounterKey, dict[str, Quantity]], device: _Device) -> None:
    for entry in device.device.consumes_counters:
        values = remaining.get((device.driver, device.pool, entry.counter_set))
        if values is None:
            continue
        for name, cost in entry.counters.items():
            if name in values:
                try:
                    values[name] = values[name] - cost.value
                except QuantityRangeError:
                    # The devices' fit would be a guess; say which data makes it one instead.
                    raise PluginError(
                        f"cannot explain: counter {name} of counter set {entry.counter_set} in pool "
                        f"{device.pool} of driver {device.driver} holds quantities too far apart to "
                        "subtract exactly"
                    ) from None


def _fits(remaining: Mapping[CounterKey, Mapping[str, Quantity]], device: _Device) -> bool:
    for entry in device.device.consumes_counters:
        values = remaining.get((device.driver, device.pool, entry.counter_set))
        if values is None:
            return False
        for name, cost in entry.counters.items():
            have = values.get(name)
            if have is None or have < cost.value:
                return False
    return True


def _request_findings(snapshot: Snapshot, claim: Mapping[str, Any], key: Key, source: str) -> list[Finding]:
    published = _Published.of(snapshot, key)
    findings = []
    requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
    for index, request in enumerate(requests):
        alternatives = [("exactly", request.get("exactly"))] if request.get("exactly") else []
        alternatives += [
            (f"firstAvailable[{i}] ({sub.get('name')})", sub)
            for i, sub in enumerate(request.get("firstAvailable") or [])
        ]
        for label, body in alternatives:
            path = f"{source} .spec.devices.requests[{index}].{label.split(' ')[0]}"
            tally = _explain_request(snapshot, body, published)
            name = request.get("name")
            if tally.error:
                findings.append(Finding(f"request {name} ({label}): {tally.error}.", path))
                continue
            wanted = (
                int(body.get("count") or 1)
                if body.get("allocationMode", "ExactCount") == "ExactCount"
                else None
            )
            parts = [
                f"request {name} ({label}) asks DeviceClass {body.get('deviceClassName')} for "
                + (_plural(wanted, "device") if wanted is not None else "all matching devices")
                + f": {_plural(tally.matching, 'published device matches', 'published devices match')}"
                + " the class and selectors"
            ]
            if tally.in_use:
                parts.append(
                    f"{len(tally.in_use)} in use by other claims ("
                    + ", ".join(f"{d} by {c}" for d, c in sorted(tally.in_use.items()))
                    + ")"
                )
            if tally.tainted:
                parts.append(
                    f"{_plural(len(tally.tainted), 'carries', 'carry')} a taint the request does not "
                    "tolerate (" + ", ".join(f"{d}: {t}" for d, t in sorted(tally.tainted.items())) + ")"
                )
            if tally.no_counters:
                parts.append(
                    f"{_plural(len(tally.no_counters), 'lacks', 'lack')} free shared counters "
                    f"({', '.join(tally.no_counters)})"
                )
            parts.append(f"{len(tally.free)} free")
            text = "; ".join(parts)
            if wanted is not None and len(tally.free) < wanted:
                text += f": not enough for {_plural(wanted, 'device')}"
            if tally.signals:
                text += "; " + ", ".join(f"{d} has {t}" for d, t in sorted(tally.signals.items()))
            findings.append(Finding(text + ".", path))
    return findings


# --- claims ----------------------------------------------------------------------------------------


def explain_claim(snapshot: Snapshot, namespace: str, name: str) -> list[Finding]:
    key = (namespace, name)
    claim = snapshot.claims.get(key)
    if claim is None:
        return [
            Finding(f"ResourceClaim {namespace}/{name} does not exist.", f"ResourceClaim {namespace}/{name}")
        ]
    source = _ref("ResourceClaim", claim)
    findings: list[Finding] = []
    meta = _meta(claim)
    status = claim.get("status") or {}
    allocation = status.get("allocation")
    reserved = list(status.get("reservedFor") or [])

    if meta.get("deletionTimestamp"):
        finalizers = list(meta.get("finalizers") or [])
        findings.append(
            Finding(
                f"It is being deleted since {meta['deletionTimestamp']}"
                + (f" and is held by the finalizers {', '.join(finalizers)}." if finalizers else "."),
                f"{source} .metadata.deletionTimestamp, .metadata.finalizers",
            )
        )
        if DELETE_PROTECTION in finalizers:
            if reserved:
                why = (
                    f"{DELETE_PROTECTION} stays while the claim is reserved: it still has "
                    f"{_plural(len(reserved), 'consumer')} (see below); the resourceclaim controller "
                    "releases consumers that are gone or done, then deallocates and removes the finalizer."
                )
                findings.append(Finding(why, f"{source} .status.reservedFor"))
            elif allocation is not None:
                findings.append(
                    Finding(
                        f"{DELETE_PROTECTION} stays while the claim is allocated; no consumer is left, "
                        "so the resourceclaim controller should deallocate it and remove the finalizer: "
                        "is it running?",
                        f"{source} .status.allocation",
                    )
                )
            else:
                findings.append(
                    Finding(
                        f"Nothing is allocated or reserved, so nothing should hold {DELETE_PROTECTION}: the "
                        "resourceclaim controller removes it; is it running?",
                        f"{source} .metadata.finalizers",
                    )
                )

    for index, consumer in enumerate(reserved):
        path = f"{source} .status.reservedFor[{index}]"
        if consumer.get("resource") != "pods" or consumer.get("apiGroup"):
            findings.append(
                Finding(
                    f"It is reserved for {consumer.get('resource')} {consumer.get('name')} "
                    f"({consumer.get('apiGroup') or 'core'}).",
                    path,
                )
            )
            continue
        pod = snapshot.pods.get((namespace, str(consumer.get("name"))))
        pod_name = consumer.get("name")
        if pod is None:
            findings.append(Finding(f"It is reserved for pod {pod_name}, which no longer exists.", path))
        elif _meta(pod).get("uid") != consumer.get("uid"):
            findings.append(
                Finding(
                    f"It is reserved for an earlier pod {pod_name} (uid {consumer.get('uid')}); "
                    "the pod of that name now is another one.",
                    path,
                )
            )
        elif (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            findings.append(
                Finding(
                    f"It is reserved for pod {pod_name}, which has finished ({pod['status']['phase']}).", path
                )
            )
        else:
            findings.append(
                Finding(
                    f"It is reserved for pod {pod_name}, which is "
                    f"{(pod.get('status') or {}).get('phase') or 'Pending'}.",
                    path,
                )
            )

    if allocation is None:
        if meta.get("deletionTimestamp"):
            return findings
        users = _pods_using(snapshot, namespace, name)
        if not users:
            findings.append(
                Finding(
                    "It is not allocated, and no pod uses it: kube-scheduler allocates a claim only when it "
                    "schedules a pod that uses it.",
                    f"{source} .status.allocation",
                )
            )
        else:
            findings.append(
                Finding(
                    f"It is not allocated; {_plural(len(users), 'pod waits', 'pods wait')} for it "
                    f"({', '.join(users)}).",
                    f"{source} .status.allocation",
                )
            )
        findings.extend(_request_findings(snapshot, claim, key, source))
        return findings

    findings.extend(_binding_findings(claim, source))
    findings.extend(_allocated_taint_findings(snapshot, claim, source))
    return findings


def _allocated_taint_findings(snapshot: Snapshot, claim: Mapping[str, Any], source: str) -> list[Finding]:
    """What the taints of the allocated devices mean for this claim: a signal blocks nothing, a
    NoSchedule taint only keeps new claims off, a NoExecute taint the claim does not tolerate evicts
    its pods."""
    devices = {device.id: device for device in _devices(snapshot.slices)[0]}
    rules = parse_rules(snapshot.rules)
    findings: list[Finding] = []
    for result in _allocated_results(claim):
        device_id = DeviceId(str(result.get("driver")), str(result.get("pool")), str(result.get("device")))
        published = devices.get(device_id)
        placed = [
            *(slice_taints(device_id, published.slice_name, published.device) if published else []),
            *rule_taints(device_id, rules),
        ]
        tolerations = [DeviceToleration.model_validate(t) for t in result.get("tolerations") or []]
        findings.extend(_taint_finding(device_id, taint, tolerations) for taint in placed)
    return findings


def _taint_finding(device: DeviceId, placed: PlacedTaint, tolerations: Sequence[DeviceToleration]) -> Finding:
    text = f"{device} has {placed.describe()}"
    if not placed.blocks:
        return Finding(text + ".", placed.source)
    if placed.taint.effect != EFFECT_NO_EXECUTE:
        return Finding(text + ": it takes no new claims; this one keeps it.", placed.source)
    if not taint_tolerated(tolerations, placed.taint):
        return Finding(
            text + ": the claim does not tolerate it, so its pods are evicted.", placed.source, warning=True
        )
    deadline = taint_eviction_time(tolerations, placed.taint)
    if deadline is None:
        return Finding(text + ": the claim tolerates it.", placed.source)
    return Finding(
        text + f": the claim tolerates it until {format_time(deadline)}, then its pods are evicted.",
        placed.source,
        warning=True,
    )


def _binding_findings(claim: Mapping[str, Any], source: str) -> list[Finding]:
    status = claim.get("status") or {}
    allocation = status.get("allocation") or {}
    since = allocation.get("allocationTimestamp")
    device_status = {
        (d.get("driver"), d.get("pool"), d.get("device")): d for d in status.get("devices") or []
    }
    findings = []
    results = _allocated_results(claim)
    devices_text = ", ".join(f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}" for r in results)
    findings.append(
        Finding(f"It is allocated: {devices_text}.", f"{source} .status.allocation.devices.results")
    )
    for index, result in enumerate(results):
        wanted = list(result.get("bindingConditions") or [])
        failures = list(result.get("bindingFailureConditions") or [])
        if not wanted:
            continue
        entry = device_status.get((result.get("driver"), result.get("pool"), result.get("device"))) or {}
        conditions = {c.get("type"): c for c in entry.get("conditions") or []}
        ref = f"{result.get('driver')}/{result.get('pool')}/{result.get('device')}"
        for failure in failures:
            condition = conditions.get(failure)
            if condition is not None and condition.get("status") == "True":
                findings.append(
                    Finding(
                        f"Binding of {ref} failed ({failure}): "
                        f"{condition.get('message') or condition.get('reason') or ''}; "
                        "kube-scheduler deallocates it and tries again.",
                        f"{source} .status.devices[{ref}].conditions[{failure}]",
                    )
                )
        for wanted_type in wanted:
            condition = conditions.get(wanted_type)
            if condition is not None and condition.get("status") == "True":
                continue
            last = ""
            if condition is not None and condition.get("message"):
                last = f"; the attacher's last word: {condition['message']}"
            findings.append(
                Finding(
                    f"The pod waits for {ref} to report {wanted_type}"
                    + (f" since {since}" if since else "")
                    + last
                    + ".",
                    f"{source} .status.allocation.devices.results[{index}].bindingConditions, "
                    f".status.devices[{ref}].conditions",
                )
            )
    return findings


# --- pods ------------------------------------------------------------------------------------------


def explain_pod(snapshot: Snapshot, namespace: str, name: str) -> list[Finding]:
    pod = snapshot.pods.get((namespace, name))
    if pod is None:
        return [Finding(f"Pod {namespace}/{name} does not exist.", f"Pod {namespace}/{name}")]
    source = _ref("Pod", pod)
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    findings = [
        Finding(
            f"It is {status.get('phase') or 'Pending'}"
            + (f" on node {spec['nodeName']}." if spec.get("nodeName") else ", not scheduled yet."),
            f"{source} .status.phase, .spec.nodeName",
        )
    ]
    for condition in status.get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("message")
        ):
            findings.append(
                Finding(
                    f"kube-scheduler says: {condition['message']}",
                    f"{source} .status.conditions[PodScheduled]",
                )
            )
    recorded = {s.get("name"): s for s in status.get("resourceClaimStatuses") or []}
    reports = _health_findings(snapshot, pod, source)
    for index, entry in enumerate(spec.get("resourceClaims") or []):
        entry_name = entry.get("name")
        path = f"{source} .spec.resourceClaims[{index}]"
        claim_name = entry.get("resourceClaimName")
        template = entry.get("resourceClaimTemplateName")
        if claim_name is None and template is not None:
            record = recorded.get(entry_name)
            if record is None:
                text = f"Claim {entry_name} has not been created from template {template} yet"
                if (namespace, template) not in snapshot.templates:
                    text += f", and ResourceClaimTemplate {template} does not exist"
                findings.append(Finding(text + ".", f"{path}, .status.resourceClaimStatuses"))
                continue
            claim_name = record.get("resourceClaimName")
            if claim_name is None:
                findings.append(
                    Finding(f"Claim {entry_name} is not needed.", f"{source} .status.resourceClaimStatuses")
                )
                continue
        if claim_name is None:
            continue
        findings.append(Finding(f"Claim {entry_name} is ResourceClaim {claim_name}:", path))
        findings.extend(explain_claim(snapshot, namespace, str(claim_name)))
        findings.extend(reports.pop(str(entry_name), []))
    # Reports on the claim kube-scheduler made for extended resources: it has no entry of its own.
    findings.extend(finding for rest in reports.values() for finding in rest)
    return findings


# The kubelet says Unknown when the driver has not reported on the device, or not lately.
_HEALTH_MEANING = {"Unknown": ": the kubelet has no recent report from the driver"}


def _health_findings(snapshot: Snapshot, body: Mapping[str, Any], source: str) -> dict[str, list[Finding]]:
    """The kubelet's health of each device of each container, by pod claim name. A pod without
    ``allocatedResourcesStatus`` (a kubelet before 1.36, or the gate off) has none, and says nothing."""
    pod = health.Pod.model_validate(body)
    if not any(pod.containers_reporting):
        return {}
    by_key = {
        (pod.namespace, name): _ReportedClaim.model_validate(snapshot.claims[(pod.namespace, name)])
        for name in health.claim_names(pod).values()
        if (pod.namespace, name) in snapshot.claims
    }
    found: dict[str, list[Finding]] = {}
    for report in health.device_reports(pod, by_key):
        device = (
            str(report.device)
            if report.device is not None
            else f"{report.resource_id} (no single device of ResourceClaim {report.claim or '?'})"
        )
        text = f"Container {report.container}: {device} is {report.health or 'not reported'}"
        text += f": {report.message}" if report.message else _HEALTH_MEANING.get(report.health, "")
        found.setdefault(report.pod_claim, []).append(
            Finding(
                text + ".",
                f"{source} .status.containerStatuses[{report.container}].allocatedResourcesStatus"
                f"[{report.resource}]",
                warning=report.health != health.HEALTHY,
            )
        )
    return found
