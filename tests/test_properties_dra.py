"""Properties of the shared DRA domain (operators/dra): quantities, durations, taints, pools.

Examples per property (the ``unit`` profile; ``thorough`` runs ten times as many):

- ``test_quantity_round_trips_through_its_canonical_text``: 300
- ``test_quantity_arithmetic_is_exact``: 200
- ``test_quantity_arithmetic_is_quick_or_refused_at_any_exponent``: 200
- ``test_go_durations_parse_to_their_value``: 300
- ``test_eviction_never_precedes_the_taint``: 300
- ``test_earliest_eviction_is_the_minimum``: 150
- ``test_allocation_check_agrees_with_tolerations``: 300
- ``test_current_slices_are_the_newest_generation_in_any_order``: 100
- ``test_the_pod_pre_check_never_drops_a_pod_with_claims``: 200
"""

from __future__ import annotations

import decimal
import math
import operator
from datetime import timedelta
from decimal import Decimal
from random import Random

from hypothesis import example, given, settings
from hypothesis import strategies as st
from strategies import (
    Body,
    dns_subdomains,
    examples,
    go_durations,
    pod_bodies,
    quantity_texts,
    slice_sets,
    taints,
    tolerations,
)

from operators.core.conditions import LATEST_TIME
from operators.devicetaint.models import Pod as EvictionPod
from operators.dra import pools
from operators.dra.durations import duration_seconds, format_seconds, parse_go_duration
from operators.dra.pods import pod_may_use_claims
from operators.dra.quantity import MAX_EXACT_DIGITS, QuantityRangeError, parse_quantity
from operators.dra.slices import ResourceSlice, SliceDevice
from operators.dra.taints import (
    EFFECT_NO_EXECUTE,
    DeviceTaint,
    DeviceToleration,
    earliest_eviction,
    taint_eviction_time,
    taint_prevents_allocation,
    toleration_tolerates,
)
from operators.resourceclaim.models import Pod as ClaimPod
from operators.resourceclaim.resolution import pod_has_claims


@examples(300)
@given(quantity_texts(signed=True))
def test_quantity_round_trips_through_its_canonical_text(text: str) -> None:
    """quantity.py: every string of the API's grammar parses, and the canonical string the project
    writes parses back to the same value (status fields must read as kube-apiserver prints them)."""
    quantity = parse_quantity(text)
    canonical = str(quantity)
    assert parse_quantity(canonical) == quantity
    assert str(parse_quantity(canonical)) == canonical


@examples(200)
@given(quantity_texts(), quantity_texts())
def test_quantity_arithmetic_is_exact(left_text: str, right_text: str) -> None:
    """quantity.py: sums, differences and comparisons agree with exact rational arithmetic, and
    ``non_negative`` never yields a negative value (poolstatus's available capacity)."""
    left, right = parse_quantity(left_text), parse_quantity(right_text)
    assert (left + right).as_fraction() == left.as_fraction() + right.as_fraction()
    assert (left - right).as_fraction() == left.as_fraction() - right.as_fraction()
    assert (left < right) == (left.as_fraction() < right.as_fraction())
    assert (left - right).non_negative().sign() >= 0


_EXPONENTS = st.one_of(
    st.integers(-9, 40),
    st.integers(MAX_EXACT_DIGITS - 20, MAX_EXACT_DIGITS + 20),
    st.integers(2**31 - 20, 2**31 - 1),
    st.integers(-9, 2**31 - 1),
)
# Wide enough for every exact result, and any exponent: decimal never expands a power of ten.
_WIDE = decimal.Context(prec=MAX_EXACT_DIGITS + 64, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[])


def _exponent_texts() -> st.SearchStrategy[str]:
    coefficients = st.one_of(st.integers(-(10**12), 10**12), st.sampled_from((1, -1, 0)))
    return st.builds(lambda c, e: f"{c}e{e}", coefficients, _EXPONENTS)


@settings(examples(200), deadline=timedelta(milliseconds=250))
@given(_exponent_texts(), _exponent_texts())
@example("1e2147483647", "1")
@example("1e5000", "1")
@example("1e4095", "-1")
def test_quantity_arithmetic_is_quick_or_refused_at_any_exponent(left_text: str, right_text: str) -> None:
    """quantity.py: a driver may publish any exponent up to 2**31 - 1. Comparing and printing are
    exact; a sum or difference is exact, or, when it needs far more than MAX_EXACT_DIGITS digits,
    refused with QuantityRangeError. Each example has a deadline: nothing expands ``10**exponent``."""
    left, right = parse_quantity(left_text), parse_quantity(right_text)
    exact_left, exact_right = Decimal(left_text), Decimal(right_text)
    assert (left < right) == (exact_left < exact_right)
    assert Decimal(str(left)) == exact_left
    for operation, exact in ((operator.add, _WIDE.add), (operator.sub, _WIDE.subtract)):
        _WIDE.clear_flags()
        expected = exact(exact_left, exact_right)
        try:
            computed = operation(left, right)
        except QuantityRangeError:
            # Refused only when the exact result has more digits than the bound.
            assert _WIDE.flags[decimal.Inexact] or len(expected.as_tuple().digits) >= MAX_EXACT_DIGITS
        else:
            assert not _WIDE.flags[decimal.Inexact]
            assert Decimal(str(computed)) == expected


@examples(300)
@given(go_durations())
@example(("0.01ms", 1e-05))  # once a flake: repr() of the seconds read 1e-05
def test_go_durations_parse_to_their_value(duration: tuple[str, float]) -> None:
    """durations.py: every duration the CRDs' pattern admits parses, by both readings, to its value."""
    text, seconds = duration
    assert math.isclose(parse_go_duration(text).total_seconds(), seconds, rel_tol=1e-9, abs_tol=1e-6)
    assert math.isclose(duration_seconds(text), seconds, rel_tol=1e-9, abs_tol=1e-9)
    # A plain number of seconds has no exponent: repr() writes small floats as 1e-05.
    plain = format(Decimal(repr(seconds)), "f")
    assert math.isclose(duration_seconds(f" {plain} "), seconds, rel_tol=1e-9)
    assert format_seconds(timedelta(seconds=seconds)).endswith("s")


@examples(300)
@given(taints(), st.lists(tolerations(), max_size=4))
def test_eviction_never_precedes_the_taint(taint_body: Body, toleration_bodies: list[Body]) -> None:
    """Spec devicetaint section 6 (taints.py): an eviction is due at ``timeAdded`` plus the
    smallest ``tolerationSeconds`` of the tolerating tolerations (negative as 0), never before
    ``timeAdded``; only a dated NoExecute taint evicts, and an unbounded toleration never does."""
    taint = DeviceTaint.model_validate(taint_body)
    given_tolerations = [DeviceToleration.model_validate(body) for body in toleration_bodies]
    when = taint_eviction_time(given_tolerations, taint)
    if taint.effect != EFFECT_NO_EXECUTE or taint.time_added is None:
        assert when is None
        return
    tolerating = [t for t in given_tolerations if toleration_tolerates(t, taint)]
    if any(t.toleration_seconds is None for t in tolerating):
        assert when is None
        return
    assert when is not None
    assert when >= taint.time_added
    if tolerating:
        shortest = min(max(t.toleration_seconds or 0, 0) for t in tolerating)
        if when != LATEST_TIME:
            assert when == taint.time_added + timedelta(seconds=shortest)
    else:
        assert when == taint.time_added


@examples(150)
@given(st.lists(st.tuples(st.lists(tolerations(), max_size=3), taints(effects=("NoExecute",))), max_size=5))
def test_earliest_eviction_is_the_minimum(pairs: list[tuple[list[Body], Body]]) -> None:
    """taints.py: the eviction of several (tolerations, taint) pairs is due at the earliest of their
    times and names exactly the pairs that evict at all."""
    parsed = [
        ([DeviceToleration.model_validate(t) for t in tols], DeviceTaint.model_validate(taint), index)
        for index, (tols, taint) in enumerate(pairs)
    ]
    times = {index: taint_eviction_time(tols, taint) for tols, taint, index in parsed}
    due = {index: when for index, when in times.items() if when is not None}
    eviction = earliest_eviction(parsed)
    if not due:
        assert eviction is None
        return
    assert eviction is not None
    assert eviction.when == min(due.values())
    assert eviction.reasons == frozenset(due)


@examples(300)
@given(st.lists(taints(), max_size=4), st.lists(tolerations(), max_size=4))
def test_allocation_check_agrees_with_tolerations(
    taint_bodies: list[Body], toleration_bodies: list[Body]
) -> None:
    """taints.py: a device is unusable exactly when one of its NoSchedule or NoExecute taints is
    tolerated by none of the request's tolerations; an ``Exists`` toleration without key and
    effect tolerates every taint."""
    device_taints = [DeviceTaint.model_validate(body) for body in taint_bodies]
    request = [DeviceToleration.model_validate(body) for body in toleration_bodies]
    blocking = [
        taint
        for taint in device_taints
        if taint.effect in ("NoSchedule", "NoExecute")
        and not any(toleration_tolerates(t, taint) for t in request)
    ]
    assert taint_prevents_allocation(device_taints, request) == bool(blocking)
    everything = DeviceToleration(operator="Exists")
    assert not taint_prevents_allocation(device_taints, [everything])


@examples(100)
@given(slice_sets(), st.randoms(use_true_random=False))
def test_current_slices_are_the_newest_generation_in_any_order(bodies: list[Body], random: Random) -> None:
    """pools.py: a pool's current slices are those of its highest generation, by name; the visible
    devices come from them only, and neither depends on the order the slices arrived in."""
    slices = [ResourceSlice[SliceDevice].model_validate(body) for body in bodies]
    by_pool = pools.current_slices_by_pool(slices)
    for pool, current in by_pool.items():
        members = [s for s in slices if pools.pool_of(s) == pool]
        newest = max(s.spec.pool.generation for s in members)
        assert [s.name for s in current] == sorted(
            s.name for s in members if s.spec.pool.generation == newest
        )
    visible = pools.visible_devices(slices)
    for (pool, device), (resource_slice, _) in visible.items():
        assert resource_slice in by_pool[pool]
        assert device in {d.name for d in resource_slice.spec.devices}
    shuffled = list(slices)
    random.shuffle(shuffled)
    assert pools.visible_devices(shuffled) == visible


@st.composite
def any_pods(draw: st.DrawFn) -> Body:
    """A pod with claims, or a plain pod as most pods of a cluster are."""
    body = draw(pod_bodies("demo", draw(dns_subdomains("my-pod"))))
    if draw(st.booleans()):
        body["spec"].pop("resourceClaims", None)
        body["status"].pop("resourceClaimStatuses", None)
    return body


@examples(200)
@given(any_pods())
def test_the_pod_pre_check_never_drops_a_pod_with_claims(body: Body) -> None:
    """pods.py (issue #23): the check made before any projection is built drops a pod only when
    neither operator's projection of it references a claim."""
    if not pod_may_use_claims(body):
        assert not pod_has_claims(ClaimPod.model_validate(body))
        assert not EvictionPod.model_validate(body).uses_claims
