"""``kubectl dra taint-preview``: which devices, claims and pods a DeviceTaintRule would affect,
without tainting anything.

The devicetaint operator already has a dry run: a DeviceTaintRule with effect ``None`` taints
nothing, and the operator reports in its ``EvictionInProgress`` condition (reason ``NoEffect``)
how many devices and pods a ``NoExecute`` taint would affect. This command creates such a rule,
waits for that report, lists the names behind the counts from the API, and deletes the rule.
The taint's key and value matter: a claim may tolerate one key and not another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from operators.core.client import ApiError
from operators.core.conditions import current
from operators.core.names import is_dns_subdomain
from operators.core.resources import PODS
from operators.dra.api import GROUP, RESOURCE_CLAIMS, RESOURCE_SLICES
from operators.dra.taintrules import EVICTION_IN_PROGRESS, KIND, PLURAL, VERSIONS
from operators.dra.taints import EFFECT_NONE, DeviceTaint, DeviceTaintSelector
from operators.dra.unserved import DEVICE_TAINT_RULES_UNSERVED

from .errors import PluginError
from .previewmodel import (
    ClaimRow,
    Preview,
    affected_claims,
    affected_pods,
    parse_dry_run,
    published_devices,
    selector_fields,
)
from .session import Session, poll

SILENCE = "no operator answered within {timeout}: is the devicetaint operator running?"


@dataclass(frozen=True)
class PreviewQuery:
    selector: DeviceTaintSelector
    key: str
    value: str
    effect: str
    timeout: float


def rule_body(api_version: str, query: PreviewQuery) -> dict[str, Any]:
    taint = {"key": query.key, "effect": EFFECT_NONE, **({"value": query.value} if query.value else {})}
    return {
        "apiVersion": api_version,
        "kind": KIND,
        "metadata": {
            "generateName": "kubectl-dra-preview-",
            "labels": {"app.kubernetes.io/managed-by": "kubectl-dra"},
        },
        "spec": {"deviceSelector": selector_fields(query.selector), "taint": taint},
    }


def dry_run_report(rule: dict[str, Any]) -> dict[str, Any] | None:
    """The operator's NoEffect condition for the rule's current generation, once it is there."""
    status = rule.get("status") or {}
    for condition in status.get("conditions") or []:
        if (
            condition.get("type") == EVICTION_IN_PROGRESS
            and condition.get("reason") == "NoEffect"
            and current(condition, rule["metadata"].get("generation"), status)
        ):
            return dict(condition)
    return None


async def _dry_run(session: Session, query: PreviewQuery) -> str:
    rules = await session.first_served(GROUP, PLURAL, VERSIONS)
    if rules is None:
        raise PluginError(DEVICE_TAINT_RULES_UNSERVED)
    async with session.temporary(
        "a dry-run DeviceTaintRule", rules.path(), rule_body(rules.api_version, query)
    ) as rule:
        path = rules.path(rule["metadata"]["name"])
        answered = await poll(
            lambda: session.get("reading the dry-run DeviceTaintRule", path),
            lambda obj: dry_run_report(obj) is not None,
            query.timeout,
            SILENCE.format(timeout=f"{query.timeout:g}s"),
        )
    report = dry_run_report(answered)
    assert report is not None
    return str(report.get("message", ""))


async def consumer_pods(
    session: Session, claims: Sequence[ClaimRow]
) -> dict[tuple[str, str], dict[str, Any]]:
    pods: dict[tuple[str, str], dict[str, Any]] = {}
    for claim in claims:
        for consumer in claim.consumers:
            key = (claim.namespace, consumer.name)
            if key in pods or not is_dns_subdomain(consumer.name):
                # reservedFor takes any name; one no pod can have names no pod to preview.
                continue
            path = PODS.path(consumer.name, namespace=claim.namespace)
            try:
                pods[key] = await session.client.get(path)
            except ApiError as err:
                if not err.not_found:  # a pod gone since the claim was read is simply not affected
                    raise
    return pods


async def preview(session: Session, query: PreviewQuery) -> Preview:
    message = await _dry_run(session, query)
    dry_run = parse_dry_run(message)
    if dry_run is None:
        raise PluginError(f"the devicetaint operator's dry-run message is not understood: {message!r}")
    now = datetime.now(UTC)
    driver = query.selector.driver
    slices = await session.items(
        "listing ResourceSlices",
        RESOURCE_SLICES.path(),
        **({"fieldSelector": f"spec.driver={driver}"} if driver else {}),
    )
    claims = await session.items("listing ResourceClaims", RESOURCE_CLAIMS.path())
    taint = DeviceTaint(key=query.key, value=query.value, effect=query.effect, time_added=now)
    claim_rows = affected_claims(claims, query.selector, taint, now)
    pod_rows = affected_pods(
        claim_rows, await session.call("reading pods", consumer_pods(session, claim_rows))
    )
    return Preview(
        query.selector, taint, dry_run, published_devices(slices, query.selector), claim_rows, pod_rows
    )
