"""What ``kubectl dra taint``, ``untaint`` and ``drain`` decide, without I/O: the target of a taint,
the names and bodies of the objects they create, which objects ``untaint`` removes, whether to go
on without a question, and when a drain is over.

A taint by driver, pool and device is a built-in DeviceTaintRule. A taint by DeviceClass or CEL
is the project's DeviceTaintSelector, which the taintselector operator expands into one rule per
selected device: since Kubernetes 1.35 the built-in rule can no longer select by class or CEL.
Both carry :data:`CREATED_BY_LABEL` and :data:`NAME_LABEL`, which is how ``untaint`` finds what
``taint`` and ``drain`` created, and nothing else.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from operators.core import PROJECT_GROUP
from operators.core.names import DNS_LABEL_MAX_CHARS, is_dns_label
from operators.dra.taints import EFFECT_NO_EXECUTE, EFFECT_NO_SCHEDULE, DeviceTaintSelector

from .errors import PluginError, UsageError
from .previewmodel import SELECTOR_KEYS, PodRow, selector_fields

CREATED_BY_LABEL = "dra-operators.io/created-by"
CREATED_BY = "kubectl-dra"
NAME_LABEL = "dra-operators.io/kubectl-dra-name"
DEFAULT_KEY = "dra-operators.io/maintenance"
SELECTOR_API_VERSION = f"{PROJECT_GROUP}/v1alpha1"
SELECTOR_KIND = "DeviceTaintSelector"
RULE_KIND = "DeviceTaintRule"
# A name is both the object's name and NAME_LABEL's value: a DNS label is valid as either, whereas a
# label value may hold capitals and '_', which an object name may not.
_MAX_NAME = DNS_LABEL_MAX_CHARS
_DIGEST = 6
_SLUG = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class Target:
    """The devices a taint selects: driver/pool/device, optionally narrowed by a class or CEL."""

    selector: DeviceTaintSelector = field(default_factory=DeviceTaintSelector)
    device_class: str | None = None
    expressions: tuple[str, ...] = ()

    @property
    def needs_selector_object(self) -> bool:
        """Whether only a DeviceTaintSelector can express it (a class or CEL)."""
        return self.device_class is not None or bool(self.expressions)

    def fields(self) -> dict[str, Any]:
        """The CRD's ``spec.deviceSelector`` (a rule's, when only driver/pool/device are set)."""
        fields: dict[str, Any] = {}
        if self.device_class is not None:
            fields["deviceClassName"] = self.device_class
        fields.update(selector_fields(self.selector))
        if self.expressions:
            fields["selectors"] = [{"cel": {"expression": e}} for e in self.expressions]
        return fields

    def text(self) -> str:
        parts = [f"class={self.device_class}"] if self.device_class else []
        parts += [f"{k}={v}" for k, v in selector_fields(self.selector).items()]
        parts += [f"cel={e!r}" for e in self.expressions]
        return ",".join(parts)

    @property
    def empty(self) -> bool:
        return not self.fields()


def make_target(selector: DeviceTaintSelector | None, device_class: str | None, cel: Sequence[str]) -> Target:
    target = Target(selector or DeviceTaintSelector(), device_class, tuple(cel))
    if target.empty:
        raise UsageError("say which devices: driver=D[,pool=P][,device=X], --class C or --selector CEL")
    return target


def default_name(target: Target, key: str) -> str:
    """Readable and stable: the same target and key give the same name, so a second ``taint``
    changes the first one's effect instead of adding a second object."""
    digest = hashlib.sha256(json.dumps([target.fields(), key], sort_keys=True).encode()).hexdigest()
    words = [target.device_class or "", *selector_fields(target.selector).values()]
    if target.expressions:
        words.append("cel")
    slug = _SLUG.sub("-", "-".join(w for w in words if w).lower()).strip("-")
    stem = f"kdra-{slug}"[: _MAX_NAME - _DIGEST - 1].rstrip("-")
    return f"{stem}-{digest[:_DIGEST]}"


def check_name(name: str) -> str:
    if not is_dns_label(name):
        raise UsageError(
            f"--name {name!r}: use lowercase letters, digits and '-', at most {_MAX_NAME} characters"
        )
    return name


def labels(name: str) -> dict[str, str]:
    return {CREATED_BY_LABEL: CREATED_BY, NAME_LABEL: name}


def label_selector(name: str | None = None) -> str:
    return f"{CREATED_BY_LABEL}={CREATED_BY}" + (f",{NAME_LABEL}={name}" if name else "")


def taint_body(key: str, value: str, effect: str) -> dict[str, Any]:
    return {"key": key, **({"value": value} if value else {}), "effect": effect}


def rule_body(
    api_version: str, name: str, target: Target, taint: Mapping[str, Any], label: str | None = None
) -> dict[str, Any]:
    if target.needs_selector_object:
        raise ValueError("a DeviceTaintRule selects no class or CEL")
    return {
        "apiVersion": api_version,
        "kind": RULE_KIND,
        "metadata": {"name": name, "labels": labels(label or name)},
        "spec": {"deviceSelector": selector_fields(target.selector), "taint": dict(taint)},
    }


def selector_body(
    name: str, target: Target, taint: Mapping[str, Any], label: str | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": SELECTOR_API_VERSION,
        "kind": SELECTOR_KIND,
        "metadata": {"name": name, "labels": labels(label or name)},
        "spec": {"deviceSelector": target.fields(), "taint": dict(taint)},
    }


def update_patch(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch that makes ``existing`` carry ``wanted``'s labels and spec: fields it has
    and ``wanted`` lacks are set to null, since a merge patch keeps what it does not name."""

    def merge(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
        patch: dict[str, Any] = {k: None for k in old if k not in new}
        for k, v in new.items():
            patch[k] = merge(old[k], v) if isinstance(v, dict) and isinstance(old.get(k), dict) else v
        return patch

    return {
        "metadata": {"labels": dict(wanted["metadata"]["labels"])},
        "spec": merge(existing.get("spec") or {}, wanted["spec"]),
    }


def keeps_no_execute(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether a drain run again leaves the NoExecute taint in place for its NoSchedule step:
    lifting it for a moment would let kube-apiserver restart ``timeAdded`` when it comes back,
    and with it every tolerationSeconds window."""
    old, new = (existing.get("spec") or {}).get("taint") or {}, wanted["spec"]["taint"]
    same = (old.get("key"), old.get("value", "")) == (new["key"], new.get("value", ""))
    return same and old.get("effect") == EFFECT_NO_EXECUTE and new["effect"] == EFFECT_NO_SCHEDULE


def ours(obj: Mapping[str, Any]) -> bool:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(CREATED_BY_LABEL) == CREATED_BY


@dataclass(frozen=True)
class Filter:
    """``untaint``'s arguments: every one that is given must match (a device criterion or CEL
    expression given must be one of the object's)."""

    name: str | None = None
    target: Target | None = None
    key: str | None = None

    def matches(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        if not ours(obj):
            return False
        if self.name is not None and (meta.get("labels") or {}).get(NAME_LABEL) != self.name:
            return False
        if self.key is not None and (spec.get("taint") or {}).get("key") != self.key:
            return False
        if self.target is None:
            return True
        selector = spec.get("deviceSelector") or {}
        # Each criterion given must be one of the object's: `driver=D` finds every taint on D's
        # devices, however narrowly it selects them.
        return all(
            _expressions(selector) >= _expressions({k: v}) if k == "selectors" else selector.get(k) == v
            for k, v in self.target.fields().items()
        )


def _expressions(selector: Mapping[str, Any]) -> set[str]:
    return {s["cel"]["expression"] for s in selector.get("selectors") or ()}


@dataclass(frozen=True)
class Removal:
    kind: str
    name: str
    uid: str
    path: str
    target: str
    taint: str


def describe_object(kind: str, obj: Mapping[str, Any], path: str) -> Removal:
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    selector = spec.get("deviceSelector") or {}
    parts = [f"class={selector['deviceClassName']}"] if selector.get("deviceClassName") else []
    parts += [f"{k}={selector[k]}" for k in SELECTOR_KEYS if selector.get(k)]
    parts += [f"cel={s['cel']['expression']!r}" for s in selector.get("selectors") or ()]
    taint = spec.get("taint") or {}
    value = f"={taint['value']}" if taint.get("value") else ""
    return Removal(
        kind,
        meta["name"],
        meta["uid"],
        path,
        ",".join(parts),
        f"{taint.get('key')}{value}:{taint.get('effect')}",
    )


# --- the question -----------------------------------------------------------------------------------


class Declined(PluginError):
    """The user did not answer yes."""


def confirm(question: str, yes: bool, interactive: bool, ask: Callable[[str], str]) -> None:
    """Go on with ``--yes``; ask on a terminal; refuse without one, since a script that forgot
    ``--yes`` must not taint devices on the strength of an answer nobody gave."""
    if yes:
        return
    if not interactive:
        raise UsageError(f"{question} needs an answer, and stdin is not a terminal: pass --yes to go ahead")
    try:
        answer = ask(f"{question} [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        raise Declined("nothing changed: the answer was not yes")


# --- drain --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DrainPod:
    """A pod that uses a drained device, as one poll saw it."""

    namespace: str
    name: str
    terminating: bool
    eviction: float | None
    """Seconds after the NoExecute taint until it is evicted; None: it tolerates the taint forever."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def drain_pods(rows: Iterable[PodRow], pods: Mapping[tuple[str, str], Mapping[str, Any]]) -> list[DrainPod]:
    return [
        DrainPod(
            r.namespace,
            r.name,
            bool(pods[(r.namespace, r.name)]["metadata"].get("deletionTimestamp")),
            r.eviction,
        )
        for r in rows
    ]


@dataclass(frozen=True)
class DrainStatus:
    """What one poll of a drain found, and what follows from it."""

    waiting: tuple[DrainPod, ...]
    """Running pods the drain waits for (evicted now or after their tolerationSeconds)."""
    staying: tuple[DrainPod, ...]
    """Running pods that tolerate the NoExecute taint forever."""
    terminating: int
    done: bool
    """Nothing is left to wait for: the drain succeeded."""
    remaining: tuple[DrainPod, ...]
    """The pods that make the drain fail if it is over now (at its time-out)."""


def drain_status(pods: Sequence[DrainPod], ignore_tolerating: bool) -> DrainStatus:
    running = [p for p in pods if not p.terminating]
    staying = tuple(p for p in running if p.eviction is None)
    waiting = tuple(p for p in running if p.eviction is not None)
    remaining = waiting if ignore_tolerating else (*waiting, *staying)
    return DrainStatus(
        waiting, staying, len(pods) - len(running), done=not remaining, remaining=tuple(remaining)
    )


def drain_line(phase: str, status: DrainStatus) -> str:
    """One progress line without the clock: the same text twice means nothing changed."""
    parts = [f"{phase}: {len(status.waiting)} to go"]
    if status.terminating:
        parts.append(f"{status.terminating} terminating")
    if status.staying:
        parts.append(f"{len(status.staying)} tolerating forever")
    # Pods due now are being evicted; the clock matters for those still inside tolerationSeconds.
    soonest = min((p.eviction for p in status.waiting if p.eviction), default=None)
    if phase == EFFECT_NO_EXECUTE and soonest:
        parts.append(f"next eviction in {soonest:g}s")
    return ", ".join(parts)


def names(pods: Iterable[DrainPod]) -> str:
    return ", ".join(p.key for p in pods)


def drain_name(kind: str, subject: DeviceTaintSelector | str) -> str:
    """``drain-<node>`` or ``drain-<driver>-<pool>``, a DNS label (hashed when too long)."""
    words = [subject] if isinstance(subject, str) else [subject.driver or "", subject.pool or ""]
    slug = _SLUG.sub("-", "-".join(words).lower()).strip("-")
    name = f"drain-{kind}-{slug}"
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_DIGEST]
    return f"{name[: _MAX_NAME - _DIGEST - 1].rstrip('-')}-{digest}"
