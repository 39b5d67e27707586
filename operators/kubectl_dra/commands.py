"""The flows of ``kubectl dra taint``, ``untaint`` and ``drain``: preview, question, change, wait.

Each returns the document that ``-o json|yaml`` prints; the text for a person goes through the
:class:`~.console.Console`. The API conversations are in :mod:`.maintain`, the decisions in
:mod:`.taintmodel`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from operators.dra.taints import EFFECT_NO_EXECUTE, DeviceTaintSelector

from . import maintain, previewmodel
from . import taintmodel as model
from .console import Console
from .errors import PodsRemain
from .previewmodel import Preview
from .session import Session
from .tables import table

PREVIEW_TIMEOUT = 30.0


def preview_text(preview: Preview, namespace: str | None) -> str:
    """taint-preview's tables, narrowed to ``namespace``, then the claims and pods per namespace."""
    shown = previewmodel.in_namespace(preview, namespace)
    text = previewmodel.render(shown)
    rows = previewmodel.by_namespace(shown)
    if rows:
        text += "\n" + "\n".join(table(("NAMESPACE", "CLAIMS", "PODS"), rows)) + "\n"
    hidden = len(preview.pods) - len(shown.pods)
    if namespace is not None:
        text += f"Only namespace {namespace} is shown; {hidden} affected pods are in other namespaces.\n"
    return text


def _object(placed: maintain.Placed) -> dict[str, str]:
    return {"kind": placed.kind, "name": placed.name, "action": placed.action}


@dataclass(frozen=True)
class TaintOrder:
    target: model.Target
    name: str
    key: str
    value: str
    effect: str
    timeout: float
    namespace: str | None
    yes: bool
    dry_run: bool
    wait: bool


async def taint(session: Session, order: TaintOrder, console: Console) -> dict[str, Any]:
    taint = model.taint_body(order.key, order.value, order.effect)
    preview = await maintain.preview_target(session, order.target, taint, order.timeout)
    console.say(preview_text(preview, order.namespace))
    document: dict[str, Any] = {
        "name": order.name,
        "preview": previewmodel.document(previewmodel.in_namespace(preview, order.namespace)),
    }
    if order.dry_run:
        console.say("Dry run: nothing was tainted.")
        return document
    console.confirm(
        f"Taint {len(preview.devices)} devices with {previewmodel.taint_text(preview.taint)}?", order.yes
    )
    placed = await maintain.place(session, order.target, order.name, taint)
    console.say(f"{placed.kind.lower()}/{placed.name} {placed.action}")
    document["object"] = _object(placed)
    if order.wait:
        condition = await maintain.follow_eviction(session, placed, order.timeout, console.say)
        console.say(f"Eviction over: {condition.get('message', '')}")
        document["eviction"] = condition
    console.say(f"To remove it: kubectl dra untaint --name {order.name}")
    return document


async def untaint(session: Session, wanted: model.Filter, yes: bool, console: Console) -> dict[str, Any]:
    found = await maintain.ours_matching(session, wanted)
    if not found:
        console.say("No taint created by kubectl dra matches.")
        return {"removed": []}
    rows = [(f"{r.kind.lower()}/{r.name}", r.target, r.taint) for r in found]
    console.say("\n".join(table(("OBJECT", "DEVICES", "TAINT"), rows)))
    console.confirm(f"Remove {'this taint' if len(found) == 1 else f'these {len(found)} taints'}?", yes)
    await maintain.remove(session, found)
    for r in found:
        console.say(f"{r.kind.lower()}/{r.name} deleted")
    return {
        "removed": [{"kind": r.kind, "name": r.name, "devices": r.target, "taint": r.taint} for r in found]
    }


@dataclass(frozen=True)
class DrainOrder:
    kind: str
    subject: DeviceTaintSelector | str
    name: str | None
    key: str
    value: str
    grace: float
    timeout: float
    ignore_tolerating: bool
    namespace: str | None
    yes: bool
    dry_run: bool


def _pods(pods: tuple[model.DrainPod, ...]) -> list[dict[str, str]]:
    return [{"namespace": p.namespace, "name": p.name} for p in pods]


async def drain(
    session: Session, order: DrainOrder, console: Console
) -> tuple[dict[str, Any], PodsRemain | None]:
    if isinstance(order.subject, str):
        targets = await maintain.node_targets(session, order.subject)
    else:
        targets = [model.make_target(order.subject, None, ())]
    name = order.name or model.drain_name(order.kind, order.subject)
    previews = []
    for target in targets:
        taint = model.taint_body(order.key, order.value, EFFECT_NO_EXECUTE)
        previews.append(await maintain.preview_target(session, target, taint, PREVIEW_TIMEOUT))
        console.say(preview_text(previews[-1], order.namespace))
    document: dict[str, Any] = {
        "name": name,
        "preview": [previewmodel.document(previewmodel.in_namespace(p, order.namespace)) for p in previews],
    }
    if order.dry_run:
        console.say("Dry run: nothing was tainted.")
        return document, None
    devices = sum(len(p.devices) for p in previews)
    subject = (
        order.subject if isinstance(order.subject, str) else f"{order.subject.driver}/{order.subject.pool}"
    )
    console.confirm(
        f"Drain {order.kind} {subject} ({devices} devices): NoSchedule, then NoExecute?", order.yes
    )
    plan = maintain.DrainPlan(
        targets,
        name,
        order.key,
        order.value,
        order.grace,
        order.timeout,
        order.ignore_tolerating,
        order.namespace,
    )
    try:
        placed, status = await maintain.drain(session, plan, console.say, console.progress)
    except PodsRemain as err:
        console.close()
        console.say(f"Pods remain after {order.timeout:g}s:")
        for pod in err.pods:
            console.say(f"  {pod}")
        console.say(f"The taints stay; to remove them: kubectl dra untaint --name {name}")
        document["remaining"] = [{"namespace": k.split("/")[0], "name": k.split("/")[1]} for k in err.pods]
        return document, err
    console.close()
    staying = (
        f", {len(status.staying)} tolerating forever stay ({model.names(status.staying)})"
        if status.staying
        else ""
    )
    console.say(f"Drained: no pod waits to be evicted{staying}.")
    console.say(f"The taints stay; to remove them: kubectl dra untaint --name {name}")
    document.update(
        objects=[_object(p) for p in placed],
        remaining=[],
        staying=_pods(status.staying),
        terminating=status.terminating,
    )
    return document, None
