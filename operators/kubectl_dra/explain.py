"""``kubectl dra explain claim|pod NAME``: read the objects :mod:`.explainmodel` reasons about.

It only reads: the claim or pod, every claim of the cluster (a device may be taken by a claim of
another namespace), the pods and templates of the namespace, the slices, classes and
DeviceTaintRules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from operators.core.resources import PODS
from operators.dra.api import (
    DEVICE_CLASSES,
    GROUP,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
)
from operators.dra.taintrules import PLURAL as RULES_PLURAL
from operators.dra.taintrules import VERSIONS as RULE_VERSIONS

from .explainmodel import Finding, Snapshot, explain_claim, explain_pod
from .session import Session


@dataclass(frozen=True)
class ExplainQuery:
    kind: str
    """``claim`` or ``pod``."""
    namespace: str
    name: str


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


async def snapshot(session: Session, namespace: str) -> Snapshot:
    claims = await session.items("listing resourceclaims", RESOURCE_CLAIMS.path())
    pods = await session.items("listing pods", PODS.path(namespace=namespace))
    templates = await session.items(
        "listing resourceclaimtemplates", RESOURCE_CLAIM_TEMPLATES.path(namespace=namespace)
    )
    slices = await session.items("listing resourceslices", RESOURCE_SLICES.path())
    classes = await session.items("listing deviceclasses", DEVICE_CLASSES.path())
    rules: list[dict[str, Any]] = []
    for version in RULE_VERSIONS:
        served = await session.served(GROUP, version, RULES_PLURAL)
        if served is not None:
            rules = await session.items("listing devicetaintrules", served.path())
            break
    return Snapshot(
        claims={_key(c): c for c in claims},
        pods={_key(p): p for p in pods},
        templates={_key(t): t for t in templates},
        slices=slices,
        classes={str((c.get("metadata") or {}).get("name")): c for c in classes},
        rules=rules,
    )


async def explain(session: Session, query: ExplainQuery) -> list[Finding]:
    cluster = await snapshot(session, query.namespace)
    if query.kind == "claim":
        return explain_claim(cluster, query.namespace, query.name)
    return explain_pod(cluster, query.namespace, query.name)


def render(query: ExplainQuery, findings: list[Finding]) -> str:
    """One statement per line, each followed by the field it was read from."""
    lines = [f"{'ResourceClaim' if query.kind == 'claim' else 'Pod'} {query.namespace}/{query.name}:"]
    for finding in findings:
        lines.append(f"- {finding.text}")
        lines.append(f"    from {finding.source}")
    return "\n".join(lines) + "\n"


def document(query: ExplainQuery, findings: list[Finding]) -> dict[str, Any]:
    kind = "ResourceClaim" if query.kind == "claim" else "Pod"
    return {
        "object": {"kind": kind, "namespace": query.namespace, "name": query.name},
        "findings": [finding.to_dict() for finding in findings],
    }
