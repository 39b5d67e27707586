"""Differential test (spec scenario 35): our operator against upstream 1.37's in-tree
resourceclaim controller.

The scenarios 1-5, 8, 13, 17-19, 25-27 and 29 (claims whose raw parameters JSON cannot write
back) run once in the default cluster with our operator
(under its own ServiceAccount) and once in an upstream-mode cluster, at the same time.
After both settle, the claims and pod statuses they leave are compared, with generated
name suffixes, UIDs, timestamps, resource versions and managed fields normalised away.
Scenarios 15 and 16 are left out: the spec expects them to differ (section 14, row 3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from devcluster.kube import Kube
from e2e.resourceclaim.scenarios import (
    RAW_PARAMETERS,
    SETTLE,
    TIMEOUT,
    s01_create,
    s02_annotation_override,
    s03_truncation,
    s04_two_claims,
    s05_create_template,
    s05_missing_template_pod,
    s08_user_claim_pod,
    s08_user_creates_claim,
    s13_reserve_prescheduled,
    s17_18_shared_claim,
    s19_20_23_foreign_entries,
    s25_extended_resource_claim,
    s26_claim_being_deleted,
    s27_allocated_unused,
    s27_check,
    s29_raw_parameters,
    scenario_set,
)
from e2e.resourceclaim.support import assert_unchanged, snapshot

pytestmark = pytest.mark.differential


def run_scenario_set(api: Kube, request: pytest.FixtureRequest) -> dict[str, Any]:
    """Run the scenario set in a fresh namespace and return its normalised end state."""
    with scenario_set(api, request) as ctx:
        ns = ctx.ns
        s01_create(ctx)
        s02_annotation_override(ctx)
        s03_truncation(ctx)
        s04_two_claims(ctx)
        # Scenario 4's second part (re-creating a claim deleted by hand) stays in test_resourceclaim.py:
        # the in-tree controller keeps the claims it created in a mutation cache and, in CI runs,
        # sometimes had not re-created the claim after 60 s; its timing is not comparable.
        waiting = s05_missing_template_pod(ctx)
        s05_create_template(ctx, waiting, within=TIMEOUT)
        s08_user_claim_pod(ctx)
        s13_reserve_prescheduled(ctx)
        s17_18_shared_claim(ctx)
        s19_20_23_foreign_entries(ctx)
        s25_extended_resource_claim(ctx)
        s26_claim_being_deleted(ctx)
        s27_allocated_unused(ctx)
        s08_user_creates_claim(ctx)
        for form in RAW_PARAMETERS:
            s29_raw_parameters(ctx, form)
        state = assert_unchanged(lambda: snapshot(api, ns), SETTLE, f"the scenarios' end state in {ns}")
        s27_check(ctx)
        return state


def test_same_claims_and_pod_statuses_as_upstream(
    both_sides: Callable[..., Any], request: pytest.FixtureRequest
) -> None:
    ours, theirs = both_sides(lambda side: run_scenario_set(side, request))
    assert set(ours["claims"]) == set(theirs["claims"])
    assert set(ours["pods"]) == set(theirs["pods"])
    for name in ours["claims"]:
        assert ours["claims"][name] == theirs["claims"][name], f"claim {name}"
    for name in ours["pods"]:
        assert ours["pods"][name] == theirs["pods"][name], f"pod {name}"
    assert len(ours["claims"]) >= 10
