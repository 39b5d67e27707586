"""Never a broader selection than the rule's: the devices devicetaint acts on for a DeviceTaintRule
are always among the devices the rule selects by the API's own semantics.

The API (1.34's ``v1alpha3``, the only one that had them) selects a device when driver, pool and
device equal the selector's where it sets them, and, where it sets ``deviceClassName`` or CEL
``selectors``, the device is of that class and every expression holds. The operator evaluates
neither, so for the oracle the class and CEL are an arbitrary predicate drawn by Hypothesis: the
devices acted on must be a subset for every such predicate, which holds only if a rule that sets
them is not applied at all (:func:`operators.dra.taintrules.narrows_beyond_names`). Where the
selector sets only names, the two sets are equal: the refusal takes nothing from ordinary rules.

"Acts on" is read through every path that applies a rule: the NoExecute taints of an allocated
device (``evicting_taints``, hence the evictions the cache schedules), the pods a rule counts as
pending, and the dry run's device counts.

Examples per property (the ``unit`` profile; ``thorough`` runs ten times as many):

- ``test_devicetaint_never_acts_beyond_the_rules_selection``: 150
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from strategies import DEVICES, DRIVERS, POOLS, examples

from operators.core.conditions import format_time
from operators.core.keys import Key
from operators.core.models import parse
from operators.devicetaint.cache import ClusterCache
from operators.devicetaint.evaluation import (
    ClaimEntry,
    Consumers,
    RuleTaintReason,
    allocated_devices,
    evicting_taints,
    pending_pods,
    published_devices,
)
from operators.devicetaint.messages import REASON_UNSUPPORTED_SELECTOR, RuleWrite
from operators.devicetaint.models import RULE, DeviceTaintRule, Pod, ResourceClaim, ResourceSlice, pod_key
from operators.devicetaint.pools import PoolIndex
from operators.dra.taintrules import narrows_beyond_names

Device = tuple[str, str, str]
Body = dict[str, Any]

CLASSES = ("gpu-class", "nic-class", "big-gpu-class")
EXPRESSIONS = (
    'device.attributes["gpu.example.com"].model == "a100"',
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
    "device.driver == 'nic.example.com'",
)
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)

_DEVICES = st.lists(
    st.tuples(st.sampled_from(DRIVERS), st.sampled_from(POOLS), st.sampled_from(DEVICES)),
    min_size=1,
    max_size=8,
    unique=True,
)


@st.composite
def rule_selectors(draw: st.DrawFn, devices: Sequence[Device]) -> Body:
    """Driver, pool and device each set or not (mostly naming a published device), and now and
    then a class, CEL selectors, or both, as 1.34's ``v1alpha3`` allowed."""
    driver, pool, device = (
        draw(st.sampled_from(devices))
        if draw(st.booleans())
        else (draw(st.sampled_from(DRIVERS)), draw(st.sampled_from(POOLS)), draw(st.sampled_from(DEVICES)))
    )
    selector: Body = {}
    for key, value in (("driver", driver), ("pool", pool), ("device", device)):
        if draw(st.booleans()):
            selector[key] = value
    if draw(st.booleans()):
        selector["deviceClassName"] = draw(st.sampled_from(CLASSES))
    if draw(st.booleans()):
        chosen = draw(st.lists(st.sampled_from(EXPRESSIONS), min_size=1, max_size=2, unique=True))
        selector["selectors"] = [{"cel": {"expression": expression}} for expression in chosen]
    return selector


def slice_bodies(devices: Sequence[Device]) -> list[Body]:
    pools: dict[tuple[str, str], list[str]] = {}
    for driver, pool, device in devices:
        pools.setdefault((driver, pool), []).append(device)
    return [
        {
            "metadata": {"name": f"{driver}-{pool}", "uid": f"S-{driver}-{pool}", "generation": 1},
            "spec": {
                "driver": driver,
                "nodeName": "node-1",
                "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {"name": name, "attributes": {"model": {"string": "a100" if index % 2 else "h100"}}}
                    for index, name in enumerate(names)
                ],
            },
        }
        for (driver, pool), names in pools.items()
    ]


def claim_and_pod(index: int, device: Device) -> tuple[Body, Body]:
    """One claim per device, allocated and reserved for one scheduled pod that tolerates nothing."""
    driver, pool, name = device
    claim = {
        "metadata": {"name": f"c{index}", "namespace": "ns", "uid": f"C{index}"},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "r", "driver": driver, "pool": pool, "device": name}]}
            },
            "reservedFor": [{"resource": "pods", "name": f"p{index}", "uid": f"U{index}"}],
        },
    }
    pod = {
        "metadata": {"name": f"p{index}", "namespace": "ns", "uid": f"U{index}"},
        "spec": {"nodeName": "node-1", "resourceClaims": [{"name": "dev", "resourceClaimName": f"c{index}"}]},
    }
    return claim, pod


def api_selection(selector: Body, devices: Sequence[Device], class_and_cel_hold: set[Device]) -> set[Device]:
    """The oracle: what the API's semantics select, with class and CEL as the drawn predicate."""
    narrowed = "deviceClassName" in selector or bool(selector.get("selectors"))
    return {
        device
        for device in devices
        if all(
            selector.get(key) in (None, value)
            for key, value in zip(("driver", "pool", "device"), device, strict=True)
        )
        and (not narrowed or device in class_and_cel_hold)
    }


@examples(150)
@given(st.data())
def test_devicetaint_never_acts_beyond_the_rules_selection(data: st.DataObject) -> None:
    devices: list[Device] = data.draw(_DEVICES, label="devices")
    selector = data.draw(rule_selectors(devices), label="selector")
    class_and_cel_hold = data.draw(st.sets(st.sampled_from(devices)), label="class and CEL hold for")
    effect = data.draw(st.sampled_from(("NoExecute", "None")), label="effect")
    rule = parse(
        DeviceTaintRule,
        {
            "metadata": {"name": "r", "uid": "R1", "generation": 1},
            "spec": {
                "deviceSelector": selector,
                "taint": {"key": "example.com/broken", "effect": effect, "timeAdded": format_time(NOW)},
            },
        },
    )
    oracle = api_selection(selector, devices, class_and_cel_hold)
    names_only = not narrows_beyond_names(rule.spec.device_selector)

    slices = [parse(ResourceSlice, body) for body in slice_bodies(devices)]
    pools = PoolIndex()
    for resource_slice in slices:
        pools.apply(resource_slice)
    pairs = [claim_and_pod(index, device) for index, device in enumerate(devices)]
    claims = [parse(ResourceClaim, claim) for claim, _ in pairs]
    pods = [parse(Pod, pod) for _, pod in pairs]
    device_of_pod = {pod.key: device for pod, device in zip(pods, devices, strict=True)}

    # The taints an allocated device gets from the rule (read as NoExecute, as the dry run does).
    as_no_execute = rule.model_copy(
        update={
            "spec": rule.spec.model_copy(
                update={"taint": rule.spec.taint.model_copy(update={"effect": "NoExecute"})}
            )
        }
    )
    acted_on = {
        (result.driver, result.pool, result.device)
        for claim in claims
        for result in claim.results
        for _, reason in evicting_taints(result, pools, [as_no_execute])
        if isinstance(reason, RuleTaintReason)
    }
    assert acted_on <= oracle
    assert acted_on == (oracle if names_only else set())

    entries = {claim.key: ClaimEntry(claim, None) for claim in claims}
    consumers = Consumers({pod.key: pod for pod in pods}, {})
    pending = {device_of_pod[key] for key in pending_pods(rule, entries, consumers)}
    assert pending <= oracle
    assert pending == (oracle if names_only else set())
    published = published_devices(rule.spec.device_selector, pools)
    allocated = allocated_devices(rule.spec.device_selector, entries)
    assert published <= len(oracle)
    assert allocated <= len(oracle)
    assert (published, allocated) == ((len(oracle), len(oracle)) if names_only else (0, 0))

    # The cache end to end: the evictions it schedules, and what the rule's condition reports.
    cache = ClusterCache()
    for resource_slice in slices:
        cache.apply_slice(resource_slice, NOW)
    for claim, pod in zip(claims, pods, strict=True):
        cache.apply_claim(claim, NOW)
        cache.apply_pod(pod, NOW)
    cache.apply_rule(rule, NOW)
    scheduled = {device_of_pod[pod.key] for pod in pods if cache.scheduled_eviction(pod_key(pod)) is not None}
    assert scheduled <= oracle
    assert scheduled == (oracle if names_only and effect == "NoExecute" else set())
    decision = cache.decide_rule(Key(RULE, "", "r", "R1"), NOW)
    assert isinstance(decision, RuleWrite)
    assert (decision.condition.reason == REASON_UNSUPPORTED_SELECTOR) is not names_only
