"""A DeviceTaintRule whose selector also names a class or CEL selectors (1.34's ``v1alpha3``, or a
future version that brings them back): devicetaint applies none of it, and says why in the rule's
``EvictionInProgress`` condition, a log line and one Warning Event per generation.

The property that nothing broader than the rule's selection is ever acted on is
tests/test_properties_devicetaint_selection.py; these are the words and the once-only bookkeeping.
"""

from __future__ import annotations

from typing import Any

import pytest
from devicetaint_builders import DRIVER, P1, R1, T, fixture_f, rule, seconds
from test_devicetaint_controller import (
    CLAIM,
    NO_RULES,
    POD,
    RESOURCES_V1ALPHA3,
    document,
    make_controller,
    start,
)

from operators.core.conditions import FALSE
from operators.core.keys import POD as POD_KIND
from operators.core.keys import Key
from operators.devicetaint.cache import ClusterCache
from operators.devicetaint.messages import (
    REASON_UNSUPPORTED_SELECTOR,
    RuleWrite,
    unsupported_selector_text,
)
from operators.dra.taintrules import RuleDeviceSelector, narrows_beyond_names, rule_matches

BY_CLASS = {"driver": DRIVER, "deviceClassName": "gpu-class"}
BY_CEL = {"driver": DRIVER, "selectors": [{"cel": {"expression": 'device.attributes["m"].x == "a"'}}]}
BY_BOTH = {**BY_CLASS, **BY_CEL}


def selector(body: dict[str, Any]) -> RuleDeviceSelector:
    return RuleDeviceSelector.model_validate(body)


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, ()),
        ({"driver": DRIVER, "pool": "node-1", "device": "gpu-0"}, ()),
        ({"selectors": []}, ()),
        (BY_CLASS, ("deviceClassName",)),
        ({"deviceClassName": ""}, ("deviceClassName",)),
        (BY_CEL, ("selectors",)),
        (BY_BOTH, ("deviceClassName", "selectors")),
    ],
)
def test_which_fields_narrow_beyond_the_names(body: dict[str, Any], fields: tuple[str, ...]) -> None:
    assert narrows_beyond_names(selector(body)) == fields
    assert rule_matches(selector(body), DRIVER, "node-1", "gpu-0") is (not fields)


def test_no_selector_narrows_nothing_and_matches_nothing() -> None:
    assert narrows_beyond_names(None) == ()
    assert not rule_matches(None, DRIVER, "node-1", "gpu-0")


def test_the_words_name_the_fields_and_what_the_operator_matches() -> None:
    one = unsupported_selector_text(("deviceClassName",))
    assert one.startswith("spec.deviceSelector.deviceClassName is set, but this operator matches")
    assert "only by driver, pool and device, as Kubernetes 1.35 and later do" in one
    assert one.endswith("so this rule evicts no pod and counts none.")
    both = unsupported_selector_text(("deviceClassName", "selectors"))
    assert both.startswith("spec.deviceSelector.deviceClassName and spec.deviceSelector.selectors are set,")


@pytest.mark.parametrize("narrowing", [BY_CLASS, BY_CEL, BY_BOTH])
def test_a_narrowing_no_execute_rule_evicts_nothing_and_says_why(narrowing: dict[str, Any]) -> None:
    state = fixture_f()
    state.apply_rule(rule(selector=narrowing), T)
    assert state.scheduled_eviction(P1) is None
    decision = state.decide_rule(R1, T)
    assert isinstance(decision, RuleWrite)
    condition = decision.condition
    fields = narrows_beyond_names(selector(narrowing))
    assert (condition.status, condition.reason, condition.message) == (
        FALSE,
        REASON_UNSUPPORTED_SELECTOR,
        unsupported_selector_text(fields),
    )
    assert condition.observed_generation == 1


def test_a_narrowing_dry_run_counts_nothing() -> None:
    state = fixture_f()
    narrowing = rule(selector=BY_CLASS, effect="None")
    state.apply_rule(narrowing, T)
    assert state.rule_counts(narrowing).published_devices == 0
    decision = state.decide_rule(R1, T)
    assert isinstance(decision, RuleWrite)
    assert decision.condition.reason == REASON_UNSUPPORTED_SELECTOR


def test_the_same_names_without_the_class_evict_as_usual() -> None:
    state = fixture_f()
    state.apply_rule(rule(selector=BY_CLASS), T)
    state.apply_rule(rule(generation=2, selector={"driver": DRIVER}), T + seconds(1))
    assert state.scheduled_eviction(P1) is not None
    decision = state.decide_rule(R1, T + seconds(1))
    assert isinstance(decision, RuleWrite)
    assert decision.condition.reason == "PodsPendingEviction"


def test_warned_once_per_generation() -> None:
    state = ClusterCache()
    first = state.apply_rule(rule(selector=BY_CLASS), T)
    assert first.warnings == [f"DeviceTaintRule example: {unsupported_selector_text(('deviceClassName',))}"]
    ((warning,),) = [first.rule_warnings]
    assert (warning.item, warning.reason) == (R1, REASON_UNSUPPORTED_SELECTOR)
    assert warning.message == unsupported_selector_text(("deviceClassName",))
    # The same generation again (a status write of ours echoed by the watch, say): nothing new.
    echoed = rule(selector=BY_CLASS, conditions=[{"type": "EvictionInProgress", "status": "False"}])
    again = state.apply_rule(echoed, T + seconds(1))
    assert (again.warnings, again.rule_warnings) == ([], [])
    changed = state.apply_rule(rule(generation=2, selector=BY_BOTH), T + seconds(2))
    assert len(changed.warnings) == 1
    assert [w.message for w in changed.rule_warnings] == [
        unsupported_selector_text(("deviceClassName", "selectors"))
    ]


def test_a_restarted_process_logs_again_but_posts_no_second_event() -> None:
    """The condition written before the restart shows the generation was refused (and its Event sent)."""
    said = {
        "type": "EvictionInProgress",
        "status": "False",
        "reason": REASON_UNSUPPORTED_SELECTOR,
        "message": unsupported_selector_text(("deviceClassName",)),
        "observedGeneration": 3,
        "lastTransitionTime": "2026-03-01T11:00:00Z",
    }
    effects = ClusterCache().apply_rule(rule(generation=3, selector=BY_CLASS, conditions=[said]), T)
    assert len(effects.warnings) == 1
    assert effects.rule_warnings == []
    older = {**said, "observedGeneration": 2}
    effects = ClusterCache().apply_rule(rule(generation=3, selector=BY_CLASS, conditions=[older]), T)
    assert len(effects.rule_warnings) == 1


async def test_the_controller_posts_the_event_and_writes_the_condition_as_the_served_version() -> None:
    """A 1.35 cluster with the alpha API on: rules are v1alpha3, so are the Event's object and the
    status apply."""
    controller, client = make_controller(
        {"v1": document("v1", NO_RULES), "v1alpha3": document("v1alpha3", RESOURCES_V1ALPHA3)}
    )
    assert await start(controller)
    controller.upsert_claim(CLAIM)
    controller.upsert_pod(POD)
    body = {
        "metadata": {"name": "example", "uid": "R1", "generation": 1},
        "spec": {
            "deviceSelector": BY_CLASS,
            "taint": {"key": "k", "effect": "NoExecute", "timeAdded": "2026-03-01T12:00:00Z"},
        },
    }
    controller.upsert_rule(body)
    controller.upsert_rule(body)  # once per generation, however often the watch delivers it
    assert controller.cache.scheduled_eviction(Key(POD_KIND, "ns1", "p1", "U1")) is None
    await controller.sync(R1)
    await controller.runtime.events.drain(5)
    ((path, event),) = [(p, b) for p, b in client.writes("POST") if p.endswith("/events")]
    assert path == "/api/v1/namespaces/default/events"
    assert event["involvedObject"] == {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "name": "example",
        "uid": "R1",
    }
    assert (event["type"], event["reason"]) == ("Warning", REASON_UNSUPPORTED_SELECTOR)
    assert event["message"] == unsupported_selector_text(("deviceClassName",))
    ((status_path, applied),) = client.writes("APPLY")
    assert status_path == "/apis/resource.k8s.io/v1alpha3/devicetaintrules/example/status"
    (condition,) = applied["body"]["status"]["conditions"]
    assert (condition["status"], condition["reason"]) == ("False", REASON_UNSUPPORTED_SELECTOR)
