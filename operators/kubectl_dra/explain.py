"""``kubectl dra explain claim|pod|policy|attachment NAME``: read the objects
:mod:`.explainmodel` and :mod:`.attachexplain` reason about.

It only reads. For a claim or pod: the claim or pod, every claim of the cluster (a device may be
taken by a claim of another namespace), the pods and templates of the namespace, the slices,
classes and DeviceTaintRules. For a DeviceAttachPolicy or DeviceAttachment: it, the policy's
records and the binding attacher's Lease in the operators' namespace.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from operators.core.client import ApiError
from operators.core.resources import LEASES, PODS
from operators.dra.api import (
    DEVICE_CLASSES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
)
from operators.dra.attachments import LABEL_POLICY, LEASE, POLICIES, RECORDS

from .attachexplain import AttacherLease, explain_attachment, explain_policy
from .explainmodel import Finding, Snapshot, explain_claim, explain_pod
from .session import Session, describe

KINDS = {
    "claim": "ResourceClaim",
    "pod": "Pod",
    "policy": "DeviceAttachPolicy",
    "attachment": "DeviceAttachment",
}


@dataclass(frozen=True)
class ExplainQuery:
    kind: str
    """A key of :data:`KINDS`."""
    namespace: str
    """The object's namespace; for a policy (cluster-scoped), the operators' namespace."""
    name: str

    @property
    def title(self) -> str:
        if self.kind == "policy":
            return f"{KINDS[self.kind]} {self.name}"
        return f"{KINDS[self.kind]} {self.namespace}/{self.name}"


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
    rules = await session.device_taint_rules()
    return Snapshot(
        claims={_key(c): c for c in claims},
        pods={_key(p): p for p in pods},
        templates={_key(t): t for t in templates},
        slices=slices,
        classes={str((c.get("metadata") or {}).get("name")): c for c in classes},
        rules=rules,
    )


async def _get_or_none(session: Session, doing: str, path: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = await session.client.get(path)
    except ApiError as err:
        if err.not_found:
            return None
        raise describe(err, doing, session.client.server) from err
    return found


async def _attacher_lease(session: Session, namespace: str) -> AttacherLease:
    try:
        lease = await session.client.get(LEASES.path(LEASE, namespace=namespace))
    except ApiError as err:
        if err.not_found:
            return AttacherLease(namespace, None)
        return AttacherLease(namespace, None, unreadable=f"{err.status} {err.reason}".strip())
    return AttacherLease(namespace, lease)


async def _explain_attacher_object(session: Session, query: ExplainQuery) -> list[Finding]:
    now = datetime.now(UTC)
    lease = await _attacher_lease(session, query.namespace)
    if query.kind == "attachment":
        path = RECORDS.path(query.name, namespace=query.namespace)
        record = await _get_or_none(session, "reading the DeviceAttachment", path)
        return explain_attachment(query.namespace, query.name, record, lease, now)
    policy = await _get_or_none(session, "reading the DeviceAttachPolicy", POLICIES.path(query.name))
    records = await session.items(
        "listing deviceattachments",
        RECORDS.path(namespace=query.namespace),
        labelSelector=f"{LABEL_POLICY}={query.name}",
    )
    return explain_policy(query.name, policy, records, lease, now)


async def explain(session: Session, query: ExplainQuery) -> list[Finding]:
    if query.kind in ("policy", "attachment"):
        return await _explain_attacher_object(session, query)
    cluster = await snapshot(session, query.namespace)
    if query.kind == "claim":
        return explain_claim(cluster, query.namespace, query.name)
    return explain_pod(cluster, query.namespace, query.name)


def render(query: ExplainQuery, findings: list[Finding]) -> str:
    """One statement per line, each followed by the field it was read from."""
    lines = [f"{query.title}:"]
    for finding in findings:
        lines.append(f"- {'warning: ' if finding.warning else ''}{finding.text}")
        lines.append(f"    from {finding.source}")
    return "\n".join(lines) + "\n"


def document(query: ExplainQuery, findings: list[Finding]) -> dict[str, Any]:
    named = {"kind": KINDS[query.kind], "name": query.name}
    if query.kind != "policy":
        named["namespace"] = query.namespace
    return {
        "object": named,
        "findings": [finding.to_dict() for finding in findings],
    }
