"""The coexistence guard: an operator that replaces an in-tree controller stops acting when it
sees that controller act on the same objects.

On managed clusters kube-controller-manager's ``--controllers`` flag cannot be changed, so the
in-tree resourceclaim, device-taint-eviction and pool-status controllers keep running; ours
beside them would write the same objects twice (20 template pods, 20 pairs of claims). Each
in-tree controller leaves a signature in the ``metadata.managedFields`` of what it writes:

- the field manager, which is its own name where it applies with ``FieldManager`` set, and
  otherwise the part of kube-controller-manager's user agent before the first ``/``
  (``kube-controller-manager``, the same for all of its controllers);
- the operation (``Apply`` or ``Update``) and the subresource;
- the fields it owns, which narrow ``kube-controller-manager`` down to one controller.

(Evidence and sources per controller: ``docs/spec-notes.md``, "Coexistence with the in-tree
controllers".)

Why no ordinary write can trip it: every signature needs a field manager that no client sets
unless asked to (kubectl's managers are ``kubectl-*``, ours ``dra-operators-*``), together with
the operation, subresource and fields of that controller's own write. And the entry must be
newer than this process: an entry's ``time`` is when that manager last changed its fields, so
objects written by an in-tree controller that has since been switched off (a migration) carry
old times and are no evidence. A deliberate write can carry such an entry, though: kube-apiserver
keeps the managedFields a client sends with the object itself. On kinds tenants write
(:attr:`Signature.forgeable`) the guard therefore only asks the operator's own question again
(``suspect``, at most once a minute), and trips on its answer alone.

What tripping does is the runtime's (:mod:`.runtime`): not ready, no more writes, a Warning
Event, the ``dra_operators_in_tree_controller_detected`` gauge, one log line that names the
kube-controller-manager flag. It lasts until the process restarts: turning the in-tree
controller off and restarting the operator is the way back. ``--allow-in-tree-controller``
(for migrations) reports the same evidence and acts anyway.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .conditions import parse_time_or_none

log = logging.getLogger(__name__)

KUBE_CONTROLLER_MANAGER = "kube-controller-manager"
"""The field manager of kube-controller-manager's writes that set none of their own."""


@dataclass(frozen=True)
class Signature:
    """What one write of the in-tree controller leaves on an object of one watched kind."""

    api_group: str
    plural: str
    manager: str
    operation: str
    # "" for the object itself, "status" for the status subresource.
    subresource: str
    # The managed-field keys that must be owned by the entry, outermost first.
    owns: tuple[str, ...]
    # What the write was, for the message: "created the claim ..." and so on.
    wrote: str
    # A further condition on the object itself, where the fields alone are not specific.
    also: Callable[[Mapping[str, Any]], bool] | None = None
    # The kind is one tenants write (Pods, PodGroups). kube-apiserver keeps the managedFields a
    # client sends with a write of the object itself, foreign entries and their times included,
    # so a tenant can put this signature on a pod of their own: found there, it is a reason to
    # ask (the operator's probe, in a namespace tenants cannot write), never a verdict.
    forgeable: bool = False


@dataclass(frozen=True)
class InTreeController:
    """kube-controller-manager's controller that an operator replaces, and how to spot it."""

    name: str
    signatures: tuple[Signature, ...]
    # Another way out, where the operator has one.
    alternative: str = ""

    @property
    def remedy(self) -> str:
        other = f"; {self.alternative}" if self.alternative else ""
        return (
            f"switch it off with kube-controller-manager's flag --controllers=*,-{self.name} "
            f"(or add -{self.name} to the list it has), then restart this operator; "
            "where kube-controller-manager's flags cannot be changed (managed clusters), install the "
            f"managed profile, which leaves this work to the in-tree controller{other}"
        )

    def plurals(self) -> frozenset[str]:
        """The watched kinds worth looking at (a project CRD may share a plural with a built-in
        kind: the group is compared with each object's apiVersion)."""
        return frozenset(s.plural for s in self.signatures)


@dataclass(frozen=True)
class Evidence:
    controller: InTreeController
    signature: Signature
    api_version: str
    kind: str
    name: str
    namespace: str | None
    uid: str
    time: str

    @property
    def object(self) -> str:
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"

    def message(self, allowed: bool) -> str:
        found = (
            f"kube-controller-manager's {self.controller.name} acts on the objects this operator "
            f"reconciles: it {self.signature.wrote} {self.object} at {self.time} "
            f"(field manager {self.signature.manager}, {self.signature.operation}"
            f"{' of ' + self.signature.subresource if self.signature.subresource else ''})"
        )
        if allowed:
            return f"{found}; acting anyway, as --allow-in-tree-controller says"
        return f"{found}. This operator stopped writing and is not ready: {self.controller.remedy}"


def _group(api_version: object) -> str:
    group, _slash, _version = str(api_version).rpartition("/")
    return group


def _owns(fields: object, keys: Sequence[str]) -> bool:
    for key in keys:
        if not isinstance(fields, Mapping) or key not in fields:
            return False
        fields = fields[key]
    return True


def find_evidence(
    controller: InTreeController, plural: str, body: Mapping[str, Any], since: datetime
) -> Evidence | None:
    """The in-tree controller's write on ``body`` (an object of ``plural``) made at or after
    ``since``; None when there is none. Quick for the objects without one: every Pod event of
    the cluster passes here."""
    meta = body.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    entries = meta.get("managedFields")
    if not isinstance(entries, list):
        return None
    for signature in controller.signatures:
        if signature.plural != plural or signature.api_group != _group(body.get("apiVersion")):
            continue
        for entry in entries:
            if not isinstance(entry, Mapping) or entry.get("manager") != signature.manager:
                continue
            if entry.get("operation") != signature.operation:
                continue
            if (entry.get("subresource") or "") != signature.subresource:
                continue
            if not _owns(entry.get("fieldsV1"), signature.owns):
                continue
            written = parse_time_or_none(entry.get("time"))
            if written is None or written < since:
                continue
            if signature.also is not None and not signature.also(body):
                continue
            return Evidence(
                controller=controller,
                signature=signature,
                api_version=str(body.get("apiVersion", "")),
                kind=str(body.get("kind", "")),
                name=str(meta.get("name", "")),
                namespace=meta.get("namespace"),
                uid=str(meta.get("uid", "")),
                time=str(entry.get("time")),
            )
    return None


ASK_AGAIN_SECONDS = 60.0
"""The least time between two questions a forgeable signature raises: a tenant who writes the
signature onto pod after pod costs one probe a minute, not one a pod."""


class Guard:
    """Looks at every watched object for the in-tree controller's signature; calls
    ``on_evidence`` once, for the first evidence found. A forgeable signature calls ``suspect``
    instead (the operator asks, and calls :meth:`found` with the answer), or, for an operator
    that cannot ask, is logged and left."""

    def __init__(
        self,
        controller: InTreeController | None,
        since: datetime,
        on_evidence: Callable[[Evidence], None],
        suspect: Callable[[Evidence], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.controller = controller
        # Truncated to the second: managedFields times have no fraction.
        self.since = since.replace(microsecond=0)
        self._plurals = controller.plurals() if controller else frozenset()
        self._on_evidence = on_evidence
        self._suspect = suspect
        self._clock = clock
        self._asked_at: float | None = None
        self.evidence: Evidence | None = None

    def observe(self, plural: str, body: Mapping[str, Any]) -> None:
        if self.evidence is not None or plural not in self._plurals:
            return
        assert self.controller is not None
        found = find_evidence(self.controller, plural, body, self.since)
        if found is None:
            return
        if not found.signature.forgeable:
            self.found(found)
            return
        now = self._clock()
        if self._asked_at is not None and now - self._asked_at < ASK_AGAIN_SECONDS:
            return
        self._asked_at = now
        if self._suspect is None:
            log.warning(
                "%s carries the signature of kube-controller-manager's %s, which any client may write "
                "on this kind; not taken as evidence",
                found.object,
                self.controller.name,
            )
            return
        log.info(
            "%s carries the signature of kube-controller-manager's %s; asking whether it runs",
            found.object,
            self.controller.name,
        )
        self._suspect(found)

    def found(self, evidence: Evidence) -> None:
        """Evidence found by other means (the operator's question before its first write)."""
        if self.evidence is None:
            self.evidence = evidence
            self._on_evidence(evidence)
