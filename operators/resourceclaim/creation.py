"""The claims of template entries, created as a pod's or a PodGroup's sync decides (7.2, 7.3).

A sync that needs a claim cannot plan past it: the status write names the created claim, which
only the create's answer tells. So its pure code is called in passes: a pass that needs a claim
plans the create alone and ends with :data:`DECIDE_AGAIN`; :func:`decide_and_execute` records the
created claim in the cache, which the next pass reads, and gives the next pass the refusals of
the creates so far, which it reports on the entry. The last pass plans the rest of the sync.

Every claim is recorded in the cache's just-created record as soon as its create is answered,
so a retry that comes before the claim watch event finds it instead of creating a second claim.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from operators.core.client import ApiError, KubeClient
from operators.core.models import UnparsableObject, parse
from operators.core.plan import Apply, Create, Plan, Write, Writer, execute
from operators.core.reconcile import Done, GiveUp, Requeue, Result, Retry
from operators.dra.api import RESOURCE_CLAIMS

from . import metrics
from .bodies import generated_claim, owner_labels
from .cache import ClusterCache
from .constants import POD_CLAIM_NAME_ANNOTATION
from .metric_labels import claim_admin_access_label
from .models import ResourceClaim, ResourceClaimSpec
from .resolution import Resolution, Resolved, admin_access_label

log = logging.getLogger(__name__)

DECIDE_AGAIN: Result = Requeue(0, "decide again from the answer of the create")
"""The result of a pass that planned a create: the sync decides again once it is answered."""

Refused = Mapping[str, ApiError]
"""The creates refused in this sync: entry name -> the API's answer."""


@dataclass(frozen=True)
class EntryFailure:
    """Why one claim entry could not be handled; ``text`` is the ``<error>`` of section 9."""

    text: str
    retryable: bool = True
    retry_after: float | None = None

    def result(self, error: str) -> Result:
        """What the failed entry makes of its owner's sync: a retry, or, where only a new watch
        event can change the input, nothing until then."""
        if self.retryable:
            return Retry(error, self.retry_after)
        return GiveUp(error)


LiveClaims = Mapping[str, ResourceClaim | EntryFailure | None]
"""What live GETs found for recorded claims missing from the cache: claim name -> the claim, None
(404), or why it could not be read."""


def unseen_recorded_claims(
    cache: ClusterCache, namespace: str, resolutions: Iterable[Resolution]
) -> list[str]:
    """The generated claims a status records that neither the watch nor this process has shown us.

    Another writer made them (an old leader during a hand-over) and the claim watch lags behind
    the pod or PodGroup watch: creating a replacement at once would give the owner a second claim
    and re-point its status away from one kube-scheduler may already have allocated. Upstream's
    ``claimExists`` reads the API server before re-creating for the same reason.
    """
    names = (
        resolution.claim_name
        for resolution in resolutions
        if resolution.outcome is Resolved.NAMED and resolution.check_owner
    )
    return [name for name in dict.fromkeys(names) if cache.claim_or_created(namespace, name) is None]


async def read_claims(
    client: KubeClient, namespace: str, names: Iterable[str]
) -> dict[str, ResourceClaim | EntryFailure | None]:
    """Live GETs of :func:`unseen_recorded_claims`; the first failure ends them, as its entry ends
    the sync."""
    found: dict[str, ResourceClaim | EntryFailure | None] = {}
    for name in names:
        try:
            body = await client.get(RESOURCE_CLAIMS.path(name, namespace=namespace))
            found[name] = parse(ResourceClaim, body or {}, ResourceClaim.from_body)
        except ApiError as err:
            if err.not_found:
                found[name] = None
                continue
            found[name] = EntryFailure(claim_check_error(err.message), retry_after=err.retry_after)
            break
        except UnparsableObject as error:
            found[name] = EntryFailure(claim_check_error(error.problem))
            break
    return found


def recorded_claim(
    cache: ClusterCache, namespace: str, resolution: Resolution, live: LiveClaims
) -> ResourceClaim | EntryFailure | None:
    """The claim a ``NAMED`` resolution stands for: from the cache, else from the live GET."""
    claim = cache.claim_or_created(namespace, resolution.claim_name)
    if claim is not None:
        return claim
    return live.get(resolution.claim_name)


def claim_check_error(message: str) -> str:
    return f"checking claim existence: {message}"


def template_missing_error(template_name: str) -> str:
    return (
        f'resource claim template "{template_name}": '
        f'resourceclaimtemplate.resource.k8s.io "{template_name}" not found'
    )


def create_failed_error(status_message: str) -> str:
    # The space before the colon is upstream's: it formats the still-empty claim name.
    return f"create ResourceClaim : {status_message}"


def claim_create(
    cache: ClusterCache,
    owner: Mapping[str, Any],
    namespace: str,
    entry_name: str,
    template_name: str,
    refused: Refused,
) -> Plan | EntryFailure:
    """The pass that creates the claim of a pod's or PodGroup's template entry (7.2), or why the
    entry fails: its template is missing, or this sync's create of it was refused."""
    if entry_name in refused:
        err = refused[entry_name]
        return EntryFailure(create_failed_error(err.message), retry_after=err.retry_after)
    template = cache.template(namespace, template_name)
    if template is None:
        return EntryFailure(template_missing_error(template_name))
    create = Create(
        RESOURCE_CLAIMS.path(namespace=namespace),
        generated_claim(owner, namespace, entry_name, template),
        tolerate=frozenset(),
        ends=lambda _: DECIDE_AGAIN,
        field_manager=True,
    )
    return Plan((create,), DECIDE_AGAIN)


def claim_of_entry(
    cache: ClusterCache,
    owner: Mapping[str, Any],
    namespace: str,
    entry_name: str,
    template_name: str,
    new_mappings: dict[str, str],
    refused: Refused,
    replaced: str | None,
) -> Plan | EntryFailure | None:
    """The claim already generated for a template entry of ``owner`` (a pod's or a PodGroup's
    controller reference), added to ``new_mappings``; else the pass that creates it, or why the
    entry fails. ``replaced`` says which claim no longer owned by it the new one replaces: logged
    when the pass plans the create."""
    claim = cache.find_generated_claim(namespace, str(owner["uid"]), entry_name)
    if claim is not None:
        new_mappings[entry_name] = claim.name
        return None
    if replaced is not None and entry_name not in refused:
        log.info("%s", replaced)
    return claim_create(cache, owner, namespace, entry_name, template_name, refused)


def status_apply(path: str, body: Mapping[str, Any], kind: str, namespaced_name: str) -> Apply:
    """The server-side apply of a pod's or PodGroup's ``status.resourceClaimStatuses``; every
    refusal ends the sync, a 404 as done."""

    def failed(err: ApiError) -> Result:
        if err.status == 404:
            return Done(f"{kind} is gone; the garbage collector takes its claims")
        return Retry(f"update {kind} {namespaced_name} ResourceClaimStatuses: {err.message}", err.retry_after)

    return Apply(path, body, tolerate=frozenset(), ends=failed)


async def decide_and_execute(
    decide: Callable[[Refused, LiveClaims], Plan],
    cache: ClusterCache,
    writer: Writer,
    created: Callable[[ResourceClaim], None] = lambda _: None,
    *,
    namespace: str = "",
    unseen: Iterable[str] = (),
) -> Result:
    """Read the ``unseen`` claims of ``namespace`` (:func:`unseen_recorded_claims`), then execute
    ``decide``'s passes until one ends the sync. Each created claim is recorded in the cache,
    counted, and handed to ``created``; each refused create is counted and handed to the next
    pass."""
    live = await read_claims(writer.client, namespace, unseen)
    refused: dict[str, ApiError] = {}
    created_entries: set[str] = set()

    def answered(write: Write, reply: Any) -> None:
        if isinstance(write, Create):
            created_entries.add(_entry(write))
            claim = ResourceClaim.from_body(reply or {})
            cache.record_created(claim)
            metrics.count_create("success", *_labels(write, claim_admin_access_label(claim)))
            # Debug, as upstream's verbosity 4: one line per generated claim is noise at scale.
            if log.isEnabledFor(logging.DEBUG):
                log.debug("Created ResourceClaim %s claim=%s", _owner(write), claim.name)
            created(claim)

    def ended(write: Write, err: ApiError) -> None:
        if isinstance(write, Create):
            spec = ResourceClaimSpec.model_validate(write.body.get("spec") or {})
            metrics.count_create("failure", *_labels(write, admin_access_label(spec)))
            refused[_entry(write)] = err

    while True:
        plan = decide(refused, live)
        again = [
            _entry(step)
            for step in plan.steps
            if isinstance(step, Create) and _entry(step) in created_entries
        ]
        if again:
            # The claim created a moment ago is gone from the cache already: never a second one
            # in the same sync, the retry looks again.
            return Retry(f"the claim created for entry {again[0]} is gone already")
        result = await execute(plan, writer, replied=answered, ended=ended)
        if result is not DECIDE_AGAIN:
            return result


def _entry(create: Create) -> str:
    entry: str = create.body["metadata"]["annotations"][POD_CLAIM_NAME_ANNOTATION]
    return entry


def _labels(create: Create, admin_access: str) -> tuple[str, str, str]:
    group, kind = owner_labels(create.body["metadata"]["ownerReferences"][0])
    return admin_access, group, kind


def _owner(create: Create) -> str:
    owner = create.body["metadata"]["ownerReferences"][0]
    field = "pod" if owner["kind"] == "Pod" else "podGroup"
    return f"{field}={create.body['metadata']['namespace']}/{owner['name']}"
