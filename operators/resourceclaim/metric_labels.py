"""Label values of the operator's metrics (spec section 10).

The metric objects themselves live with the I/O layer; these functions only decide the
labels, so that the gauge computed at scrape time and the create counter agree with
upstream's ``dynamic_resource_allocation_*`` metrics label for label.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from .constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION, POD_CLAIM_NAME_ANNOTATION
from .models import ResourceClaim
from .resolution import admin_access_label

__all__ = [
    "ClaimGaugeLabels",
    "admin_access_label",
    "claim_admin_access_label",
    "claim_gauge_counts",
    "source_label",
]

ClaimGaugeLabels = tuple[str, str, str]
"""``(allocated, admin_access, source)`` of ``dra_operators_resourceclaim_resource_claims``."""


def source_label(annotations: Mapping[str, str]) -> str:
    """Who the claim was made for: kube-scheduler's extended resources, a template, or a user."""
    if annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true":
        return "extended_resource"
    if annotations.get(POD_CLAIM_NAME_ANNOTATION, ""):
        return "resource_claim_template"
    return ""


def claim_admin_access_label(claim: ResourceClaim) -> str:
    return "true" if claim.admin_access else "false"


def claim_gauge_counts(claims: Iterable[ResourceClaim]) -> dict[ClaimGaugeLabels, int]:
    """Claims per label set; label sets without claims are absent, so they are not emitted."""
    counts: Counter[ClaimGaugeLabels] = Counter()
    for claim in claims:
        allocated = "true" if claim.is_allocated else "false"
        labels = (allocated, claim_admin_access_label(claim), source_label(claim.metadata.annotations))
        counts[labels] += 1
    return dict(counts)
