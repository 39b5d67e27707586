"""Properties tying the taint-selector operator to the operators that read its DeviceTaintRules.

Three pieces of code decide which devices a driver/pool/device selector picks: taintselector's
``select_devices`` (a DeviceTaintSelector), devicetaint's ``selector_matches`` over its pool
index (a DeviceTaintRule, for eviction) and poolstatus's rule filter (a DeviceTaintRule, for
counting unavailable devices). They must agree, or a selector would taint other devices than
the rules it writes, and the pool status would count other devices than the ones evicted from.

Examples per property (the ``unit`` profile; ``thorough`` runs ten times as many):

- ``test_selector_and_rule_select_the_same_devices``: 75
- ``test_written_rules_taint_exactly_the_selection``: 75
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from strategies import Body, device_selectors, dns_subdomains, examples, slice_sets, taints, uids

from operators.core.models import parse
from operators.devicetaint import models as devicetaint
from operators.devicetaint.evaluation import rule_selects
from operators.devicetaint.pools import PoolIndex
from operators.dra.claims import ResultWithTolerations
from operators.dra.selection import Selection, select_devices
from operators.dra.taintrules import rule_matches
from operators.dra.taints import selector_matches
from operators.poolstatus import models as poolstatus
from operators.poolstatus.counts import rules_for_driver
from operators.taintselector import models as taintselector
from operators.taintselector.models import DeviceId
from operators.taintselector.rules import desired_rules, diff_rules

Devices = set[tuple[str, str, str]]


def _selected_by_selector(criteria: Body, all_devices: bool, slices: list[Body]) -> Devices:
    selection = taintselector.DeviceSelection.model_validate({**criteria, "allDevices": all_devices})
    outcome = select_devices(selection, [parse(taintselector.ResourceSlice, body) for body in slices], {})
    assert isinstance(outcome, Selection), outcome
    return {tuple(device) for device in outcome.devices}  # type: ignore[misc]


def _pool_index(slices: list[Body]) -> PoolIndex:
    index = PoolIndex()
    for body in slices:
        index.apply(parse(devicetaint.ResourceSlice, body))
    return index


def _selected_by_rule(rule: Body, index: PoolIndex) -> Devices:
    selector = parse(devicetaint.DeviceTaintRule, rule).spec.device_selector
    return {
        (driver, pool_name, device)
        for (driver, pool_name), pool in index.items()
        for device in pool.visible_devices()
        if selector_matches(selector, driver, pool_name, device)
    }


def _rule(criteria: Body | None, taint: Body) -> Body:
    spec: Body = {"taint": taint}
    if criteria is not None:
        spec["deviceSelector"] = criteria
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "r"},
        "spec": spec,
    }


@examples(75)
@given(slice_sets(), st.data())
def test_selector_and_rule_select_the_same_devices(slices: list[Body], data: st.DataObject) -> None:
    """taintselector's selection (its module docstring: the seed's ways of choosing devices) against
    spec devicetaint section 5 (rule matching) and spec poolstatus sections 6.1 and 7.4: for
    driver/pool/device criteria, a DeviceTaintSelector selects exactly the published devices (newest
    generation) that a DeviceTaintRule with the same criteria matches, and that poolstatus's filter
    keeps. ``allDevices`` is the rule's empty selector, and a selector without criteria is the rule
    without one (nothing)."""
    criteria = data.draw(device_selectors(slices), label="criteria")
    all_devices = not criteria and data.draw(st.booleans(), label="allDevices")
    rule = _rule(criteria if criteria or all_devices else None, data.draw(taints(("NoSchedule",))))
    index = _pool_index(slices)
    by_selector = _selected_by_selector(criteria, all_devices, slices)
    assert by_selector == _selected_by_rule(rule, index)

    parsed = parse(poolstatus.DeviceTaintRule, rule)
    by_poolstatus = {
        (driver, pool_name, device)
        for (driver, pool_name), pool in index.items()
        if rules_for_driver([parsed], driver)
        for device in pool.visible_devices()
        if rule_matches(parsed.spec.device_selector, driver, pool_name, device)
    }
    assert by_poolstatus == by_selector


@examples(75)
@given(slice_sets(), st.data())
def test_written_rules_taint_exactly_the_selection(slices: list[Body], data: st.DataObject) -> None:
    """taintselector's rules (rules.py: one rule per selected device, deterministic names): the rules
    written for a selection have distinct valid names (DNS subdomains of at most 253 characters),
    each taints exactly its own device as devicetaint reads it, together they taint exactly the
    selection, and once written they are in sync."""
    criteria = data.draw(device_selectors(slices), label="criteria")
    all_devices = not criteria and data.draw(st.booleans(), label="allDevices")
    selected = _selected_by_selector(criteria, all_devices, slices)
    selector_body: dict[str, Any] = {
        "apiVersion": "dra-operators.io/v1alpha1",
        "kind": "DeviceTaintSelector",
        "metadata": {"name": data.draw(dns_subdomains("broken-gpu"), label="name"), "uid": data.draw(uids())},
        "spec": {"taint": data.draw(taints(("NoExecute", "NoSchedule", "None"))), "deviceSelector": criteria},
    }
    selector = parse(taintselector.TaintSelector, selector_body)
    rules = desired_rules(selector, sorted(DeviceId(*device) for device in selected), "resource.k8s.io/v1")
    assert len(rules) == len(selected)
    for name in rules:
        assert len(name) <= 253
        assert all(label and label[0].isalnum() and label[-1].isalnum() for label in name.split("."))

    index = _pool_index(slices)
    tainted: Devices = set()
    for body in rules.values():
        matched = _selected_by_rule(body, index)
        assert len(matched) == 1
        tainted |= matched
        rule = parse(devicetaint.DeviceTaintRule, body)
        driver, pool, device = next(iter(matched))
        assert rule_selects(
            rule.spec.device_selector, ResultWithTolerations(driver=driver, pool=pool, device=device)
        )
    assert tainted == selected

    written = [
        parse(taintselector.DeviceTaintRule, {**body, "metadata": {**body["metadata"], "uid": f"uid-{name}"}})
        for name, body in rules.items()
    ]
    assert diff_rules(selector.metadata.uid, rules, written).in_sync
