"""Hypothesis strategies of API-valid DRA objects, as raw JSON-like bodies.

The bodies look like what kube-apiserver returns, so every property parses them with the
operators' own models and exercises the projections as well as the logic behind them. The
limits are the API's own (``resource.k8s.io/v1``, ``core/v1``, ``scheduling.k8s.io/v1beta1``
validation): DNS labels of at most 63 characters, DNS subdomains of at most 253, at most 128
devices in a slice (64 once one uses taints or counters), 16 taints per device, 8 counter sets
per slice and 32 counters in each, 2 counter consumptions per device, 2 compatibility groups per
consumption, 4 binding conditions, 32 results per allocation, 4 claims per PodGroup. Lists that
the API bounds only loosely (a pod's claims, a claim's ``reservedFor`` of up to 256 entries) are
kept short here: the properties are about the shape of the data, and long lists only slow every
example down. So is the number of devices in a slice (a few, not 128): a pool's logic is about
generations, counters and taints, and every device costs its own draws.

Names are drawn mostly from small pools, so that objects collide (two pods naming one claim, a
status naming a claim that exists, two slices of one pool) as often as they do in a cluster;
the occasional long name checks the limits.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st

from operators.core.conditions import format_time

Body = dict[str, Any]

MAX_LABEL = 63
MAX_SUBDOMAIN = 253
MAX_DEVICES = 128
MAX_DEVICES_ADVANCED = 64
MAX_TAINTS = 16
MAX_COUNTER_SETS = 8
MAX_COUNTERS = 32
MAX_CONSUMPTIONS = 2
MAX_COMPATIBILITY_GROUPS = 2
MAX_BINDING_CONDITIONS = 4
MAX_RESULTS = 32
MAX_POD_GROUP_CLAIMS = 4
MAX_TOLERATIONS = 16

EFFECTS = ("NoSchedule", "NoExecute", "None")
DRIVERS = ("gpu.example.com", "nic.example.com")
POOLS = ("node-1", "node-2", "pool-a")
DEVICES = ("gpu-0", "gpu-1", "gpu-2", "nic-0")
# Enough distinct names to reach the API's limits without generating each from a pattern.
DEVICE_NAMES = (*DEVICES, *(f"dev-{index}" for index in range(MAX_DEVICES)))
COUNTER_NAMES = ("memory", "cores", "slices", *(f"counter-{index}" for index in range(MAX_COUNTERS)))
TAINT_KEYS = ("example.com/unhealthy", "example.com/maintenance", "drain")
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def examples(count: int) -> settings:
    """A property's own number of examples, scaled as the loaded profile scales its default of 100
    (``thorough`` runs ten times as many)."""
    return settings(max_examples=max(1, count * settings().max_examples // 100))


# --- Names -------------------------------------------------------------------------------------------

_LABEL = rf"[a-z0-9]([-a-z0-9]{{0,{MAX_LABEL - 2}}}[a-z0-9])?"


@functools.cache
def dns_labels(*common: str) -> st.SearchStrategy[str]:
    """A DNS label (RFC 1123, at most 63 characters); mostly one of ``common`` when given."""
    any_label = st.from_regex(_LABEL, fullmatch=True)
    if not common:
        return any_label
    # Generating from the pattern costs ten times a pick from the pool.
    return st.one_of(*[st.sampled_from(common)] * 4, any_label)


@functools.cache
def dns_subdomains(*common: str) -> st.SearchStrategy[str]:
    """A DNS subdomain (dot-separated labels, at most 253 characters)."""
    joined = (
        st.lists(st.from_regex(_LABEL, fullmatch=True), min_size=1, max_size=5)
        .map(".".join)
        .filter(lambda name: len(name) <= MAX_SUBDOMAIN)
    )
    if not common:
        return joined
    return st.one_of(*[st.sampled_from(common)] * 4, joined)


@functools.cache
def uids() -> st.SearchStrategy[str]:
    return st.uuids().map(str)


@functools.cache
def times(within: timedelta = timedelta(days=30)) -> st.SearchStrategy[datetime]:
    """Whole seconds, as the API stores a ``metav1.Time``."""
    return st.integers(0, int(within.total_seconds())).map(lambda s: EPOCH + timedelta(seconds=s))


@functools.cache
def rfc3339() -> st.SearchStrategy[str]:
    return times().map(format_time)


# --- Quantities and durations -----------------------------------------------------------------------


@st.composite
def quantity_texts(draw: st.DrawFn, signed: bool = False) -> str:
    """A ``resource.Quantity`` string of the API's grammar: a decimal number and one suffix."""
    sign = draw(st.sampled_from(("", "+", "-"))) if signed else draw(st.sampled_from(("", "+")))
    whole = draw(st.from_regex(r"[0-9]{1,12}", fullmatch=True))
    fraction = draw(st.one_of(st.just(""), st.from_regex(r"\.[0-9]{1,9}", fullmatch=True)))
    suffix = draw(
        st.one_of(
            st.sampled_from(("", "n", "u", "m", "k", "M", "G", "T", "P", "E")),
            st.sampled_from(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")),
            st.integers(-20, 20).map(lambda e: f"e{e}"),
        )
    )
    return f"{sign}{whole}{fraction}{suffix}"


@functools.cache
def small_quantity_texts() -> st.SearchStrategy[str]:
    """Counter and capacity values as drivers publish them: small, non-negative, mixed spellings."""
    return st.one_of(
        st.integers(0, 64).map(str),
        st.integers(0, 80).map(lambda n: f"{n}Gi"),
        st.integers(0, 4000).map(lambda n: f"{n}m"),
        st.integers(0, 8).map(lambda n: f"{n}k"),
    )


@st.composite
def go_durations(draw: st.DrawFn) -> tuple[str, float]:
    """A Go duration the CRDs' pattern admits, with its value in seconds."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = draw(
        st.lists(
            st.tuples(
                st.integers(0, 10_000),
                st.one_of(st.none(), st.from_regex(r"[0-9]{1,3}", fullmatch=True)),
                st.sampled_from(sorted(units)),
            ),
            min_size=1,
            max_size=4,
        )
    )
    text = ""
    seconds = 0.0
    for whole, fraction, unit in parts:
        number = f"{whole}.{fraction}" if fraction is not None else str(whole)
        text += number + unit
        seconds += float(number) * units[unit]
    return text, seconds


# --- Taints and tolerations -------------------------------------------------------------------------


@st.composite
def taints(draw: st.DrawFn, effects: Sequence[str] = EFFECTS, dated: bool = True) -> Body:
    """A ``DeviceTaint``; kube-apiserver always sets ``timeAdded``, so ``dated`` is the norm."""
    body: Body = {"key": draw(st.sampled_from(TAINT_KEYS)), "effect": draw(st.sampled_from(effects))}
    value = draw(st.sampled_from(("", "Broken", "Degraded")))
    if value:
        body["value"] = value
    if dated or draw(st.booleans()):
        body["timeAdded"] = draw(rfc3339())
    return body


@st.composite
def tolerations(draw: st.DrawFn) -> Body:
    """A ``DeviceToleration``: ``Exists`` has no value, ``Equal`` (the default) may have one."""
    body: Body = {}
    operator = draw(st.sampled_from(("", "Exists", "Equal")))
    if operator:
        body["operator"] = operator
    if draw(st.booleans()):
        body["key"] = draw(st.sampled_from(TAINT_KEYS))
    if operator != "Exists":
        value = draw(st.sampled_from(("", "Broken", "Degraded")))
        if value:
            body["value"] = value
    effect = draw(st.sampled_from(("", *EFFECTS)))
    if effect:
        body["effect"] = effect
    # The API allows tolerationSeconds only with NoExecute; negative values mean "at once".
    if effect == "NoExecute" and draw(st.booleans()):
        body["tolerationSeconds"] = draw(st.one_of(st.integers(-10, 3600), st.integers(0, 2**63 - 1)))
    return body


# --- ResourceSlices ---------------------------------------------------------------------------------


# Built once: constructing a strategy validates it, which cost more than drawing from it.
_ATTRIBUTE_NAMES = st.lists(st.sampled_from(("profile", "gpu.example.com/profile", "model")), unique=True)
_PARTITION_TYPES = st.sampled_from(("full", "half", "quarter", ""))
_CAPACITIES = st.dictionaries(
    st.sampled_from(("memory", "bandwidth", "gpu.example.com/memory", "nic.example.com/bandwidth")),
    small_quantity_texts().map(lambda value: {"value": value}),
    max_size=3,
)
_COMPATIBILITY_GROUPS = st.lists(
    st.sampled_from(("a", "b", "c")), unique=True, max_size=MAX_COMPATIBILITY_GROUPS
)
_TAINTS = taints()


def binding_condition_lists(*types: str) -> st.SearchStrategy[list[str]]:
    """``bindingConditions`` or ``bindingFailureConditions`` of a device: unique, some of ``types``."""
    return st.lists(st.sampled_from(types), min_size=1, max_size=MAX_BINDING_CONDITIONS, unique=True)


@functools.cache
def up_to(limit: int, usual: int) -> st.SearchStrategy[int]:
    """A list bound: mostly ``usual``, now and then the API's ``limit``, so that examples stay
    cheap and the limit is still reached."""
    return st.sampled_from((usual, usual, usual, limit))


@st.composite
def devices(
    draw: st.DrawFn,
    name: str,
    counter_sets: Sequence[tuple[str, Sequence[str]]] = (),
    with_taints: bool = True,
) -> Body:
    """One ``spec.devices[]`` entry; ``counter_sets`` are the pool's (set, counter names) it may draw on."""
    body: Body = {"name": name}
    attributes: Body = {}
    for attribute in draw(_ATTRIBUTE_NAMES):
        attributes[attribute] = {"string": draw(_PARTITION_TYPES)}
    if draw(st.booleans()):
        attributes["memory"] = {"int": draw(st.integers(0, 100))}
    if attributes:
        body["attributes"] = attributes
    capacity = draw(_CAPACITIES)
    if capacity:
        body["capacity"] = capacity
    if len(counter_sets) > 0 and draw(st.booleans()):
        chosen = draw(
            st.lists(
                st.sampled_from(counter_sets),
                min_size=1,
                max_size=MAX_CONSUMPTIONS,
                unique_by=lambda entry: entry[0],
            )
        )
        consumes = []
        for set_name, counter_names in chosen:
            used = draw(st.lists(st.sampled_from(counter_names), unique=True, max_size=MAX_COUNTERS))
            entry: Body = {
                "counterSet": set_name,
                "counters": {counter: {"value": draw(small_quantity_texts())} for counter in used},
            }
            groups = draw(_COMPATIBILITY_GROUPS)
            if groups:
                entry["compatibilityGroups"] = groups
            consumes.append(entry)
        body["consumesCounters"] = consumes
    if with_taints and draw(st.integers(0, 3)) == 0:
        body["taints"] = draw(st.lists(_TAINTS, min_size=1, max_size=draw(up_to(MAX_TAINTS, 2))))
    if draw(st.integers(0, 4)) == 0:
        body["allowMultipleAllocations"] = True
    if draw(st.integers(0, 4)) == 0:
        conditions = binding_condition_lists("dra.example.com/Attached", "Ready", "Fabric")
        body["bindingConditions"] = draw(conditions)
        body["bindingFailureConditions"] = draw(conditions)
        body["bindsToNode"] = draw(st.booleans())
    return body


@st.composite
def counter_sets(draw: st.DrawFn) -> list[Body]:
    """``spec.sharedCounters`` of a slice: unique set names, unique counter names in each."""
    names = draw(
        st.lists(
            dns_labels("gpu-0-set", "gpu-1-set"),
            min_size=1,
            max_size=draw(up_to(MAX_COUNTER_SETS, 2)),
            unique=True,
        )
    )
    return [
        {
            "name": name,
            "counters": draw(
                st.dictionaries(
                    st.sampled_from(COUNTER_NAMES),
                    small_quantity_texts().map(lambda value: {"value": value}),
                    min_size=1,
                    max_size=draw(up_to(MAX_COUNTERS, 3)),
                )
            ),
        }
        for name in names
    ]


@st.composite
def pool_slices(
    draw: st.DrawFn,
    driver: str,
    pool: str,
    max_slices: int = 3,
    max_devices: int = 6,
    device_names: Sequence[str] = DEVICE_NAMES,
) -> list[Body]:
    """The slices of one pool, possibly of several generations and possibly incomplete.

    As the API demands, a slice carries devices or shared counters, never both; the counter sets
    of a pool are published once, in a slice of their own, and the devices of the pool's other
    slices refer to them.
    """
    generation = draw(st.integers(0, 3))
    count = draw(st.integers(1, max_slices))
    sets = draw(counter_sets()) if draw(st.booleans()) else []
    set_refs = [(entry["name"], sorted(entry["counters"])) for entry in sets]
    node = draw(st.one_of(st.none(), dns_subdomains("node-1", "node-2")))
    slices: list[Body] = []
    for index in range(count):
        slice_generation = generation if index == 0 else draw(st.integers(0, generation))
        spec: Body = {
            "driver": driver,
            "pool": {
                "name": pool,
                "generation": slice_generation,
                "resourceSliceCount": draw(st.integers(1, max_slices + 1)),
            },
        }
        if node is not None:
            spec["nodeName"] = node
        else:
            spec["allNodes"] = True
        if index == 0 and sets:
            spec["sharedCounters"] = sets
        else:
            names = draw(
                st.lists(
                    dns_labels(*device_names),
                    max_size=min(max_devices, MAX_DEVICES_ADVANCED),
                    unique=True,
                )
            )
            spec["devices"] = [draw(devices(name, set_refs)) for name in names]
            if draw(st.booleans()):
                spec["partitionTypeAttribute"] = draw(st.sampled_from(("gpu.example.com/profile", "profile")))
        slices.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {
                    "name": f"{pool}-{driver}-{index}"[:MAX_SUBDOMAIN],
                    "uid": draw(uids()),
                    "generation": 1,
                    "resourceVersion": "1",
                },
                "spec": spec,
            }
        )
    return slices


@st.composite
def slice_sets(
    draw: st.DrawFn, max_pools: int = 3, max_devices: int = 6, drivers: Sequence[str] = DRIVERS
) -> list[Body]:
    """The ResourceSlices of a cluster: a few pools of a few drivers."""
    pools = draw(
        st.lists(
            st.tuples(st.sampled_from(drivers), dns_labels(*POOLS)),
            max_size=max_pools,
            unique=True,
        )
    )
    return [
        body for driver, pool in pools for body in draw(pool_slices(driver, pool, max_devices=max_devices))
    ]


def published_devices(slices: Sequence[Body]) -> list[tuple[str, str, str]]:
    """(driver, pool, device) of every device some slice lists, whatever its generation."""
    return sorted(
        {
            (body["spec"]["driver"], body["spec"]["pool"]["name"], device["name"])
            for body in slices
            for device in body["spec"].get("devices") or ()
        }
    )


# --- ResourceClaims ---------------------------------------------------------------------------------


@st.composite
def allocation_results(draw: st.DrawFn, slices: Sequence[Body]) -> Body:
    """One result: mostly a device some slice publishes, sometimes one no slice lists."""
    known = published_devices(slices)
    target = st.tuples(st.sampled_from(DRIVERS), dns_labels(*POOLS), dns_labels(*DEVICES))
    driver, pool, device = draw(st.one_of(st.sampled_from(known), target) if known else target)
    result: Body = {
        "request": draw(dns_labels("req-0", "req-1")),
        "driver": driver,
        "pool": pool,
        "device": device,
    }
    if draw(st.integers(0, 5)) == 0:
        result["adminAccess"] = True
    if draw(st.booleans()):
        result["tolerations"] = draw(st.lists(tolerations(), max_size=draw(up_to(MAX_TOLERATIONS, 3))))
    if draw(st.integers(0, 3)) == 0:
        result["consumedCapacity"] = draw(
            st.dictionaries(
                st.sampled_from(("memory", "bandwidth", "gpu.example.com/memory")),
                small_quantity_texts(),
                max_size=2,
            )
        )
    if draw(st.integers(0, 3)) == 0:
        conditions = binding_condition_lists("dra.example.com/Attached", "dra.example.com/Failed", "Ready")
        result["bindingConditions"] = draw(conditions)
        result["bindingFailureConditions"] = draw(conditions)
    return result


def pod_consumer(name: str, uid: str) -> Body:
    return {"resource": "pods", "name": name, "uid": uid}


def pod_group_consumer(name: str = "pg", uid: str = "G") -> Body:
    """A claim's ``reservedFor`` entry naming the PodGroup ``name``."""
    return {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": name, "uid": uid}


def pod_owner(name: str, uid: str) -> Body:
    return {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid, "controller": True}


def pod_group_owner(name: str = "pg", uid: str = "G") -> Body:
    """The controlling owner reference to the PodGroup ``name`` (``scheduling.k8s.io/v1beta1``)."""
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "name": name,
        "uid": uid,
        "controller": True,
    }


@st.composite
def claim_bodies(
    draw: st.DrawFn,
    namespace: str,
    name: str,
    *,
    slices: Sequence[Body] = (),
    owners: Sequence[Body] = (),
    consumers: Sequence[Body] = (),
    allocated: bool | None = None,
) -> Body:
    """A ResourceClaim; ``owners`` are candidate controller references, ``consumers`` candidate
    ``reservedFor`` entries (an entry of an unknown kind is added now and then)."""
    metadata: Body = {
        "name": name,
        "namespace": namespace,
        "uid": draw(uids()),
        "resourceVersion": str(draw(st.integers(1, 10_000))),
        "creationTimestamp": draw(rfc3339()),
    }
    if len(owners) > 0 and draw(st.booleans()):
        metadata["ownerReferences"] = [dict(draw(st.sampled_from(owners)))]
    if draw(st.booleans()):
        metadata["annotations"] = {
            "resource.kubernetes.io/pod-claim-name": draw(dns_labels("gpu", "nic", "scratch"))
        }
    status: Body = {}
    if allocated is None:
        allocated = draw(st.booleans())
    if allocated:
        results = draw(st.lists(allocation_results(slices), min_size=1, max_size=draw(up_to(MAX_RESULTS, 3))))
        status["allocation"] = {"devices": {"results": results}}
        candidates = [*consumers, {"apiGroup": "example.com", "resource": "widgets", "name": "w", "uid": "W"}]
        reserved = draw(st.lists(st.sampled_from(candidates), max_size=4, unique_by=lambda c: c["uid"]))
        if reserved:
            status["reservedFor"] = [dict(consumer) for consumer in reserved]
    if allocated and draw(st.booleans()):
        metadata["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    if draw(st.integers(0, 5)) == 0:
        metadata["deletionTimestamp"] = draw(rfc3339())
    spec: Body = {
        "devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "gpu.example.com"}}]}
    }
    if draw(st.integers(0, 4)) == 0:
        spec["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }


@st.composite
def template_bodies(draw: st.DrawFn, namespace: str, name: str) -> Body:
    labels = draw(st.dictionaries(st.sampled_from(("app", "tier")), dns_labels("demo", "web"), max_size=2))
    annotations = draw(
        st.dictionaries(
            st.sampled_from(("note", "resource.kubernetes.io/pod-claim-name")),
            dns_labels("x", "y"),
            max_size=2,
        )
    )
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace, "uid": draw(uids())},
        "spec": {
            "metadata": {"labels": labels, "annotations": annotations, "creationTimestamp": None},
            "spec": {
                "devices": {
                    "requests": [{"name": "req-0", "exactly": {"deviceClassName": "gpu.example.com"}}]
                }
            },
        },
    }


# --- Pods and PodGroups -----------------------------------------------------------------------------

ENTRY_NAMES = ("gpu", "nic", "scratch", "shared")
TEMPLATE_NAMES = ("gpu-tmpl", "nic-tmpl")
CLAIM_NAMES = ("my-claim", "shared-claim", "gpu-claim")


@st.composite
def claim_entries(draw: st.DrawFn, max_size: int) -> list[Body]:
    """``spec.resourceClaims``: unique entry names, each naming a claim or a template (exactly one)."""
    names = draw(st.lists(dns_labels(*ENTRY_NAMES), max_size=max_size, unique=True))
    entries = []
    for name in names:
        if draw(st.booleans()):
            entries.append({"name": name, "resourceClaimTemplateName": draw(dns_subdomains(*TEMPLATE_NAMES))})
        else:
            entries.append({"name": name, "resourceClaimName": draw(dns_subdomains(*CLAIM_NAMES))})
    return entries


@st.composite
def claim_statuses(draw: st.DrawFn, entries: Sequence[Body], claim_names: Sequence[str] = ()) -> list[Body]:
    """``status.resourceClaimStatuses``: unique names, each one of the template entries; no claim name
    records "not needed"."""
    templated = [entry["name"] for entry in entries if "resourceClaimTemplateName" in entry]
    chosen = draw(st.lists(st.sampled_from(templated), unique=True)) if templated else []
    names = st.one_of(st.sampled_from(claim_names), dns_subdomains()) if claim_names else dns_subdomains()
    statuses = []
    for name in chosen:
        status: Body = {"name": name}
        if draw(st.integers(0, 4)) != 0:
            status["resourceClaimName"] = draw(names)
        statuses.append(status)
    return statuses


@st.composite
def pod_bodies(
    draw: st.DrawFn,
    namespace: str,
    name: str,
    *,
    claim_names: Sequence[str] = (),
    pod_group: str | None = None,
    max_claims: int = 4,
) -> Body:
    """A Pod with claims; ``claim_names`` are names its status may record (claims that may exist)."""
    entries = draw(claim_entries(max_claims))
    metadata: Body = {"name": name, "namespace": namespace, "uid": draw(uids()), "resourceVersion": "7"}
    spec: Body = {"containers": [{"name": "ctr", "image": "busybox"}]}
    if entries:
        spec["resourceClaims"] = entries
    if draw(st.booleans()):
        spec["nodeName"] = draw(dns_subdomains("node-1", "node-2"))
    if pod_group is not None:
        spec["schedulingGroup"] = {"podGroupName": pod_group}
    status: Body = {"phase": draw(st.sampled_from(("Pending", "Pending", "Running", "Succeeded", "Failed")))}
    statuses = draw(claim_statuses(entries, claim_names))
    if statuses:
        status["resourceClaimStatuses"] = statuses
    if draw(st.integers(0, 4)) == 0:
        status["extendedResourceClaimStatus"] = {
            "resourceClaimName": draw(st.sampled_from(claim_names) if claim_names else dns_subdomains()),
            "requestMappings": [
                {"containerName": "ctr", "resourceName": "example.com/gpu", "requestName": "r"}
            ],
        }
    if draw(st.integers(0, 5)) == 0:
        metadata["deletionTimestamp"] = draw(rfc3339())
    if draw(st.integers(0, 5)) == 0:
        status["conditions"] = [
            {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByDeviceTaintManager"},
            {"type": "Ready", "status": "False"},
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def pod_group_object(metadata: Body, spec: Body, status: Body) -> Body:
    """A ``scheduling.k8s.io/v1beta1`` PodGroup of these parts."""
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }


@st.composite
def pod_group_bodies(draw: st.DrawFn, namespace: str, name: str, *, claim_names: Sequence[str] = ()) -> Body:
    """A PodGroup (``scheduling.k8s.io/v1beta1``) with at most four claims."""
    entries = draw(claim_entries(MAX_POD_GROUP_CLAIMS))
    metadata: Body = {"name": name, "namespace": namespace, "uid": draw(uids()), "resourceVersion": "3"}
    if draw(st.integers(0, 5)) == 0:
        metadata["deletionTimestamp"] = draw(rfc3339())
    spec: Body = {"schedulingPolicy": {"gang": {"minCount": 2}}}
    if entries:
        spec["resourceClaims"] = entries
    status: Body = {}
    statuses = draw(claim_statuses(entries, claim_names))
    if statuses:
        status["resourceClaimStatuses"] = statuses
    return pod_group_object(metadata, spec, status)


# --- DeviceTaintRules and DeviceTaintSelectors ------------------------------------------------------


@st.composite
def device_selectors(draw: st.DrawFn, slices: Sequence[Body] = ()) -> Body:
    """``driver``/``pool``/``device`` criteria, each set or not, mostly naming what slices publish."""
    known = published_devices(slices)
    driver, pool, device = (
        draw(st.sampled_from(known))
        if len(known) > 0 and draw(st.booleans())
        else (draw(st.sampled_from(DRIVERS)), draw(dns_labels(*POOLS)), draw(dns_labels(*DEVICES)))
    )
    selector: Body = {}
    for key, value in (("driver", driver), ("pool", pool), ("device", device)):
        if draw(st.booleans()):
            selector[key] = value
    return selector


@st.composite
def rule_bodies(
    draw: st.DrawFn,
    name: str,
    slices: Sequence[Body] = (),
    version: str = "v1",
    effects: Sequence[str] = EFFECTS,
) -> Body:
    """A DeviceTaintRule; its selector may be absent (matches nothing) or empty (matches everything)."""
    spec: Body = {"taint": draw(taints(effects))}
    if draw(st.integers(0, 5)) != 0:
        spec["deviceSelector"] = draw(device_selectors(slices))
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name, "uid": draw(uids()), "generation": draw(st.integers(1, 5))},
        "spec": spec,
    }


@st.composite
def rule_sets(
    draw: st.DrawFn, slices: Sequence[Body] = (), max_size: int = 3, effects: Sequence[str] = EFFECTS
) -> list[Body]:
    names = draw(
        st.lists(dns_subdomains("drain", "broken-gpu", "maintenance"), max_size=max_size, unique=True)
    )
    return [draw(rule_bodies(name, slices, effects=effects)) for name in names]


@st.composite
def pool_status_requests(draw: st.DrawFn, slices: Sequence[Body] = ()) -> Body:
    """The spec of a pool status request: a driver, maybe a pool, maybe a limit (1-1000)."""
    pools = sorted({body["spec"]["pool"]["name"] for body in slices})
    spec: Body = {"driver": draw(st.sampled_from(DRIVERS))}
    if draw(st.booleans()):
        spec["poolName"] = draw(st.sampled_from(pools) if pools else dns_labels(*POOLS))
    if draw(st.booleans()):
        spec["limit"] = draw(st.integers(1, 1000))
    if draw(st.booleans()):
        spec["defaultPartitionTypeAttribute"] = draw(st.sampled_from(("gpu.example.com/profile", "profile")))
    return spec
