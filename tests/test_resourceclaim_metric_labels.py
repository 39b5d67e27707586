"""Metric label values of spec section 10 (and the label sets of acceptance scenario 34)."""

from __future__ import annotations

import pytest
from resourceclaim_builders import make_claim

from operators.resourceclaim.metric_labels import claim_gauge_counts, source_label

ADMIN_SPEC = {
    "devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "c", "adminAccess": True}}]}
}


@pytest.mark.parametrize(
    ("annotations", "source"),
    [
        ({}, ""),
        ({"resource.kubernetes.io/pod-claim-name": ""}, ""),
        ({"resource.kubernetes.io/pod-claim-name": "gpu"}, "resource_claim_template"),
        ({"resource.kubernetes.io/extended-resource-claim": "true"}, "extended_resource"),
        ({"resource.kubernetes.io/extended-resource-claim": "false"}, ""),
        (
            {
                "resource.kubernetes.io/extended-resource-claim": "true",
                "resource.kubernetes.io/pod-claim-name": "g",
            },
            "extended_resource",
        ),
    ],
)
def test_source_label(annotations: dict[str, str], source: str) -> None:
    assert source_label(annotations) == source


def test_gauge_counts_per_label_set_without_empty_sets() -> None:
    claims = [
        make_claim("a", entry="gpu"),
        make_claim("b", entry="gpu"),
        make_claim("c", entry="gpu", allocated=True, spec=ADMIN_SPEC),
        make_claim(
            "d", annotations={"resource.kubernetes.io/extended-resource-claim": "true"}, allocated=True
        ),
        make_claim("e"),
    ]
    assert claim_gauge_counts(claims) == {
        ("false", "false", "resource_claim_template"): 2,
        ("true", "true", "resource_claim_template"): 1,
        ("true", "false", "extended_resource"): 1,
        ("false", "false", ""): 1,
    }
    assert claim_gauge_counts([]) == {}
