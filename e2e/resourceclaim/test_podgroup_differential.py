"""Differential test of PodGroup ResourceClaims (KEP-5729): our operator against upstream 1.37's
in-tree resourceclaim controller, both clusters with the workload claims option.

The scenarios of ``scenarios_podgroup.py`` run once in the default cluster with our operator
(under its own ServiceAccount) and once in an upstream-mode cluster, at the same time. After
both settle, the claims, PodGroups, pod statuses and the Events on PodGroups are compared, with
generated name suffixes, UIDs, timestamps and the two controllers' field managers normalised
away. The group status apply is expected to differ only where a sync adds an entry to a status
that has others (upstream sends the new entries alone); no scenario here does that.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from devcluster.kube import Kube
from e2e.resourceclaim.scenarios import SETTLE, TIMEOUT, scenario_set
from e2e.resourceclaim.scenarios_podgroup import (
    group_deletion,
    group_direct_claim,
    group_late_template,
    group_late_template_created,
    group_member_finishes,
    group_template_claims,
)
from e2e.resourceclaim.support import assert_unchanged, snapshot

pytestmark = [pytest.mark.differential, pytest.mark.workload_claims]


def run_scenario_set(api: Kube, request: pytest.FixtureRequest) -> dict[str, Any]:
    """Run the scenario set in a fresh namespace and return its normalised end state."""
    with scenario_set(api, request) as ctx:
        ns = ctx.ns
        group_template_claims(ctx)
        # The late template's group retries with backoff while the other scenarios run.
        late = group_late_template(ctx)
        group_direct_claim(ctx)
        group_member_finishes(ctx)
        group_deletion(ctx)
        group_late_template_created(ctx, late, within=TIMEOUT)
        state = assert_unchanged(
            lambda: snapshot(api, ns, podgroups=True), SETTLE, f"the scenarios' end state in {ns}"
        )
        # A set: how a retried Event is counted (one object or several) is the recorder's business.
        state["podgroup_events"] = sorted(
            {
                (e["type"], e["reason"], e["involvedObject"]["name"], e["message"])
                for e in api.list(f"/api/v1/namespaces/{ns}/events")
                if e["involvedObject"].get("kind") == "PodGroup"
            }
        )
        return state


def test_same_podgroup_claims_and_statuses_as_upstream(
    both_sides: Callable[..., Any], request: pytest.FixtureRequest
) -> None:
    ours, theirs = both_sides(lambda side: run_scenario_set(side, request))
    for kind in ("claims", "podgroups", "pods"):
        assert set(ours[kind]) == set(theirs[kind]), kind
        for name in ours[kind]:
            assert ours[kind][name] == theirs[kind][name], f"{kind} {name}"
    assert ours["podgroup_events"] == theirs["podgroup_events"]
    # The deleted group's generated claim is gone; the others of both kinds are there.
    assert {"pg-gpu-<random>", "pg-m1-nic-<random>", "pgd-shared", "pgx-shared"} <= set(ours["claims"])
    assert not [name for name in ours["claims"] if name.startswith("pgx-gpu-")]
    assert set(ours["podgroups"]) == {"pg", "pgd", "pgf", "pgl"}
