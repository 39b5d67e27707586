"""``kubectl dra taint``, ``untaint`` and ``drain``: the API conversations.

The decisions are in :mod:`.taintmodel`; the preview is ``taint-preview``'s (:mod:`.preview`).
A taint by class or CEL is previewed with a temporary DeviceTaintSelector of effect ``None``:
the taintselector operator expands it into one rule per device, and those rules name the devices
the real selector would taint, chosen by the same code.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from operators.core import PROJECT_GROUP
from operators.core.client import ApiError
from operators.core.conditions import current, find
from operators.core.discovery import ServedResource
from operators.core.resources import PODS
from operators.dra.api import GROUP, RESOURCE_CLAIMS, RESOURCE_SLICES
from operators.dra.pools import DeviceId
from operators.dra.taintrules import EVICTION_IN_PROGRESS, PLURAL, VERSIONS
from operators.dra.taints import (
    EFFECT_NO_EXECUTE,
    EFFECT_NO_SCHEDULE,
    EFFECT_NONE,
    DeviceTaint,
    DeviceTaintSelector,
)
from operators.dra.unserved import DEVICE_TAINT_RULES_UNSERVED

from . import taintmodel as model
from .errors import NoAnswer, PluginError, PodsRemain
from .preview import PreviewQuery, consumer_pods, preview
from .previewmodel import (
    ClaimRow,
    DryRun,
    Preview,
    affected_claims,
    affected_pods,
    published_devices,
)
from .session import POLL_INTERVAL, Session, poll

SELECTOR_PLURAL = "devicetaintselectors"
SELECTOR_UID_LABEL = "dra-operators.io/taint-selector-uid"
SELECTOR_SILENCE = "no operator answered within {timeout}: is the taintselector operator running?"
TAINTSELECTOR_DRY_RUN = "taintselector operator (dry run)"
NO_EFFECT = "NoEffect"
Show = Callable[[str], None]


async def rules_api(session: Session) -> ServedResource:
    rules = await session.first_served(GROUP, PLURAL, VERSIONS)
    if rules is None:
        raise PluginError(DEVICE_TAINT_RULES_UNSERVED)
    return rules


async def selectors_api(session: Session, required: bool) -> ServedResource | None:
    found = await session.first_served(PROJECT_GROUP, SELECTOR_PLURAL, ["v1alpha1"])
    if found is None and required:
        raise PluginError(
            "a taint by class or CEL needs the DeviceTaintSelector API: install "
            "crds/devicetaintselectors.dra-operators.io.yaml and run the taintselector operator"
        )
    return found


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    found = find((obj.get("status") or {}).get("conditions"), kind)
    return dict(found) if found is not None else None


def _current(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """Condition ``kind`` of ``obj``, unless it describes an older generation of its spec."""
    condition = _condition(obj, kind)
    return condition if current(condition, obj["metadata"].get("generation"), obj.get("status")) else None


# --- preview ------------------------------------------------------------------------------------------


async def _selection_dry_run(
    session: Session, target: model.Target, timeout: float
) -> tuple[frozenset[DeviceId], DryRun]:
    """The devices the taintselector operator selects for ``target``, and its dry run over them
    (each pod counted once), from a temporary selector with effect None."""
    # Without rules no selector can taint anything: that is the first thing to fix.
    rules = await rules_api(session)
    served = await selectors_api(session, required=True)
    assert served is not None
    body = model.selector_body("unused", target, model.taint_body(model.DEFAULT_KEY, "", EFFECT_NONE))
    body["metadata"] = {
        "generateName": "kubectl-dra-preview-",
        "labels": {"app.kubernetes.io/managed-by": "kubectl-dra"},
    }
    async with session.temporary("a dry-run DeviceTaintSelector", served.path(), body) as created:
        path = served.path(created["metadata"]["name"])

        def settled(obj: dict[str, Any]) -> bool:
            if _true(obj, "Invalid"):
                return True
            report = _current(obj, EVICTION_IN_PROGRESS)
            return (
                _true(obj, "Ready")
                and report is not None
                and report.get("reason") == NO_EFFECT
                and "dryRun" in (obj.get("status") or {})
            )

        answered = await poll(
            lambda: session.get("reading the dry-run DeviceTaintSelector", path),
            settled,
            timeout,
            SELECTOR_SILENCE.format(timeout=f"{timeout:g}s"),
        )
        if _true(answered, "Invalid"):
            invalid = _condition(answered, "Invalid") or {}
            raise PluginError(f"the taintselector operator refuses the selection: {invalid.get('message')}")
        owned = await session.items(
            "listing the dry-run's DeviceTaintRules",
            rules.path(),
            labelSelector=f"{SELECTOR_UID_LABEL}={created['metadata']['uid']}",
        )
    counts = answered["status"]["dryRun"]
    report = _condition(answered, EVICTION_IN_PROGRESS) or {}
    dry_run = DryRun(
        counts.get("publishedDevices", 0),
        counts.get("allocatedDevices", 0),
        counts.get("pods", 0),
        counts.get("namespaces", 0),
        str(report.get("message", "")),
    )
    devices = frozenset(
        DeviceId(s["driver"], s["pool"], s["device"])
        for r in owned
        if (s := r["spec"].get("deviceSelector") or {}).get("device")
    )
    return devices, dry_run


def _true(obj: dict[str, Any], kind: str) -> bool:
    condition = _current(obj, kind)
    return condition is not None and condition.get("status") == "True"


async def preview_target(
    session: Session, target: model.Target, taint: dict[str, Any], timeout: float
) -> Preview:
    key, value, effect = taint["key"], taint.get("value", ""), taint["effect"]
    if not target.needs_selector_object:
        return await preview(session, PreviewQuery(target.selector, key, value, effect, timeout))
    devices, dry_run = await _selection_dry_run(session, target, timeout)
    now = datetime.now(UTC)
    slices = await session.items("listing ResourceSlices", RESOURCE_SLICES.path())
    claims = await session.items("listing ResourceClaims", RESOURCE_CLAIMS.path())
    judged = DeviceTaint(key=key, value=value, effect=effect, time_added=now)
    claim_rows = affected_claims(claims, devices, judged, now)
    pod_rows = affected_pods(
        claim_rows, await session.call("reading pods", consumer_pods(session, claim_rows))
    )
    return Preview(
        target.selector,
        judged,
        dry_run,
        published_devices(slices, devices),
        claim_rows,
        pod_rows,
        source=TAINTSELECTOR_DRY_RUN,
        target=target.fields(),
        target_label=target.text(),
    )


# --- taint --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Placed:
    kind: str
    name: str
    path: str
    action: str
    """created, updated or unchanged"""


async def place(
    session: Session,
    target: model.Target,
    name: str,
    taint: dict[str, Any],
    label: str | None = None,
    draining: bool = False,
) -> Placed:
    """Create the object, or bring our object of that name to this target and taint; ``label``
    (default: the name) is what ``untaint --name`` finds it by. ``draining``: an existing
    NoExecute taint is not turned back into NoSchedule."""
    if target.needs_selector_object:
        served = await selectors_api(session, required=True)
        assert served is not None
        collection = served.path()
        wanted = model.selector_body(name, target, taint, label)
    else:
        rules = await rules_api(session)
        collection = rules.path()
        wanted = model.rule_body(rules.api_version, name, target, taint, label)
    kind = wanted["kind"]
    path = f"{collection}/{name}"
    try:
        existing = await session.client.get(path)
    except ApiError as err:
        if not err.not_found:
            raise
        await session.call(f"creating {kind} {name}", session.client.create(collection, wanted))
        return Placed(kind, name, path, "created")
    if not model.ours(existing):
        raise PluginError(f"{kind} {name} exists and was not created by kubectl dra: choose another --name")
    if draining and model.keeps_no_execute(existing, wanted):
        return Placed(kind, name, path, "unchanged")
    patch = model.update_patch(existing, wanted)
    updated = await session.call(f"updating {kind} {name}", session.client.patch(path, patch))
    same = updated["metadata"].get("generation") == existing["metadata"].get("generation")
    return Placed(kind, name, path, "unchanged" if same else "updated")


async def follow_eviction(session: Session, placed: Placed, timeout: float, show: Show) -> dict[str, Any]:
    """Wait for ``EvictionInProgress=False`` on the current generation; every new message is shown."""
    shown: list[str] = []

    async def fetch() -> dict[str, Any]:
        obj: dict[str, Any] = await session.get(f"reading {placed.kind} {placed.name}", placed.path)
        condition = _current(obj, EVICTION_IN_PROGRESS)
        if condition is not None:
            line = f"{condition.get('status')} {condition.get('reason')}: {condition.get('message', '')}"
            if not shown or shown[-1] != line:
                shown.append(line)
                show(f"{EVICTION_IN_PROGRESS}={line}")
        return obj

    def over(obj: dict[str, Any]) -> bool:
        if placed.kind == model.SELECTOR_KIND and not _true(obj, "Ready"):
            return False
        condition = _current(obj, EVICTION_IN_PROGRESS)
        return condition is not None and condition.get("status") == "False"

    try:
        obj = await poll(fetch, over, timeout, "")
    except NoAnswer:
        last = shown[-1] if shown else "no EvictionInProgress condition yet"
        raise NoAnswer(
            f"{placed.kind} {placed.name} still reads EvictionInProgress after {timeout:g}s: {last}"
        ) from None
    condition = _condition(obj, EVICTION_IN_PROGRESS)
    assert condition is not None
    return condition


# --- untaint ------------------------------------------------------------------------------------------


async def ours_matching(session: Session, wanted: model.Filter) -> list[model.Removal]:
    """What ``untaint`` removes: the rules and selectors kubectl dra made that match. A cluster
    without the rule API may still hold selectors of ours (taintselector waits for the API)."""
    found: list[model.Removal] = []
    rules = await session.first_served(GROUP, PLURAL, VERSIONS)
    selectors = await selectors_api(session, required=False)
    if rules is None and selectors is None:
        raise PluginError(DEVICE_TAINT_RULES_UNSERVED)
    for kind, served in ((model.RULE_KIND, rules), (model.SELECTOR_KIND, selectors)):
        if served is None:
            continue
        listed = await session.items(
            f"listing {kind}s", served.path(), labelSelector=model.label_selector(wanted.name)
        )
        found += [
            model.describe_object(kind, obj, served.path(obj["metadata"]["name"]))
            for obj in listed
            if wanted.matches(obj)
        ]
    return sorted(found, key=lambda r: (r.kind, r.name))


async def remove(session: Session, removals: Sequence[model.Removal]) -> None:
    for r in removals:
        try:
            await session.client.delete(r.path, uid=r.uid)
        except ApiError as err:
            if not err.not_found:
                raise PluginError(f"deleting {r.kind} {r.name} failed: {err}") from err


# --- drain --------------------------------------------------------------------------------------------


async def node_targets(session: Session, node: str) -> list[model.Target]:
    """One target per (driver, pool) with a ResourceSlice of this node."""
    slices = await session.items(
        "listing ResourceSlices", RESOURCE_SLICES.path(), fieldSelector=f"spec.nodeName={node}"
    )
    pools = sorted({(s["spec"]["driver"], s["spec"]["pool"]["name"]) for s in slices})
    if not pools:
        raise PluginError(
            f"no DRA driver publishes devices on node {node} (no ResourceSlice with nodeName {node})"
        )
    return [model.make_target(DeviceTaintSelector(driver=d, pool=p), None, ()) for d, p in pools]


async def drain_pods(
    session: Session,
    placed: Sequence[tuple[model.Target, Placed]],
    namespace: str | None,
) -> list[model.DrainPod]:
    """The pods using the drained devices now, each judged against its rule's taint."""
    claims = await session.items("listing ResourceClaims", RESOURCE_CLAIMS.path())
    now = datetime.now(UTC)
    rows: dict[tuple[str, str], ClaimRow] = {}
    for target, where in placed:
        rule = await session.get(f"reading {where.kind} {where.name}", where.path)
        taint = DeviceTaint.model_validate(rule["spec"]["taint"])
        for row in affected_claims(claims, target.selector, taint, now):
            if namespace is None or row.namespace == namespace:
                rows.setdefault((row.namespace, row.name), row)
    claim_rows = list(rows.values())
    pods = await _consumers(session, claim_rows)
    return model.drain_pods(affected_pods(claim_rows, pods), pods)


async def _consumers(session: Session, claims: Sequence[ClaimRow]) -> dict[tuple[str, str], dict[str, Any]]:
    """The claims' pods: a drain asks every second, so a namespace with many of them is listed
    once instead of reading its pods one by one."""
    wanted = {(c.namespace, consumer.name) for c in claims for consumer in c.consumers}
    namespaces = {ns for ns, _ in wanted}
    if len(wanted) <= len(namespaces):
        return await session.call("reading pods", consumer_pods(session, claims))
    pods: dict[tuple[str, str], dict[str, Any]] = {}
    for ns in sorted(namespaces):
        for pod in await session.items(f"listing the pods of {ns}", PODS.path(namespace=ns)):
            key = (ns, pod["metadata"]["name"])
            if key in wanted:
                pods[key] = pod
    return pods


@dataclass(frozen=True)
class DrainPlan:
    targets: Sequence[model.Target]
    name: str
    key: str
    value: str
    grace: float
    timeout: float
    ignore_tolerating: bool
    namespace: str | None


async def watch_drain(
    session: Session,
    plan: DrainPlan,
    placed: Sequence[tuple[model.Target, Placed]],
    phase: str,
    until: float,
    show: Callable[[str, float], None],
) -> model.DrainStatus:
    """Poll until the phase is over or ``until`` (monotonic) has passed; the last status."""
    while True:
        pods = await drain_pods(session, placed, plan.namespace)
        if phase == EFFECT_NO_EXECUTE:
            status = model.drain_status(pods, plan.ignore_tolerating)
        else:
            # Before NoExecute no pod is made to go: the grace period ends early once all have left.
            status = model.drain_status(
                [model.DrainPod(p.namespace, p.name, p.terminating, 0.0) for p in pods], False
            )
        left = until - time.monotonic()
        show(model.drain_line(phase, status), max(left, 0.0))
        if status.done or left <= 0:
            return status
        await asyncio.sleep(min(POLL_INTERVAL * 4, left))


async def drain(
    session: Session, plan: DrainPlan, say: Show, show: Callable[[str, float], None]
) -> tuple[list[Placed], model.DrainStatus]:
    """NoSchedule, then the grace period, then NoExecute until the pods are gone or the time-out."""
    placed: list[tuple[model.Target, Placed]] = []
    for i, target in enumerate(plan.targets):
        name = plan.name if len(plan.targets) == 1 else f"{plan.name}-{i}"
        taint = model.taint_body(plan.key, plan.value, EFFECT_NO_SCHEDULE)
        done = await place(session, target, name, taint, plan.name, draining=True)
        placed.append((target, done))
        say(f"{done.kind.lower()}/{done.name} {done.action}: {target.text()} NoSchedule")
    if plan.grace > 0:
        await watch_drain(session, plan, placed, EFFECT_NO_SCHEDULE, time.monotonic() + plan.grace, show)
    deadline = time.monotonic() + plan.timeout
    for target, where in placed:
        taint = model.taint_body(plan.key, plan.value, EFFECT_NO_EXECUTE)
        done = await place(session, target, where.name, taint, plan.name)
        say(f"{done.kind.lower()}/{done.name} {done.action}: {target.text()} NoExecute")
    status = await watch_drain(session, plan, placed, EFFECT_NO_EXECUTE, deadline, show)
    if not status.done:
        raise PodsRemain(
            f"{len(status.remaining)} pods still use the devices after {plan.timeout:g}s: "
            f"{model.names(status.remaining)}",
            [p.key for p in status.remaining],
        )
    return [p for _, p in placed], status
