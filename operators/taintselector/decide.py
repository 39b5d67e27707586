"""One pass over a selector, decided: the plan of writes that the core's executor carries out.

Given the selector, what its selection evaluated to, the cache and the DeviceTaintRule version the
cluster serves, :func:`decide` returns the :class:`~operators.core.plan.Plan` of the pass:

1. for an invalid selection, a Warning Event when it is new (the selector was not invalid for
   this reason at this generation); the rules of the last valid selection stay;
2. for a valid one, the rule diff (creates; merge patches and deletes with the rule's UID) as one
   :class:`~operators.core.plan.Together` step: the writes are independent, and a thousand
   devices must not take a thousand round trips one after another;
3. the whole status by server-side apply, when it says something new.

The status is computed before any write, as if every planned write succeeds: if one fails, the
executor raises before the status step, and the retry plans again from what the watch then shows.
What is still pending after a successful pass is therefore only the conflicts.
"""

from __future__ import annotations

from operators.core.conditions import TRUE, reported
from operators.core.discovery import ServedResource
from operators.core.events import WARNING, ObjectRef
from operators.core.plan import Create, Delete, Patch, Plan, RecordEvent, Step, Together, Write, status_apply
from operators.dra.selection import Invalid, Selection
from operators.dra.taints import EFFECT_NONE

from .cache import ClusterCache
from .dryrun import DryRun, dry_run
from .models import API_VERSION, KIND, SELECTORS, TaintSelector
from .rules import RuleDiff, desired_rules, diff_rules
from .status import INVALID, needs_write, selector_status

__all__ = ["EVENT_INVALID", "WRITE_CONCURRENCY", "decide", "rule_writes"]

WRITE_CONCURRENCY = 32
EVENT_INVALID = "InvalidSelector"


def decide(
    selector: TaintSelector,
    outcome: Selection | Invalid,
    cache: ClusterCache,
    rules_api: ServedResource | None,
) -> Plan:
    """The writes of one pass; ``rules_api`` is None where the cluster serves no DeviceTaintRule."""
    steps: list[Step] = []
    pending: RuleDiff | None = None
    dry: DryRun | None = None
    if isinstance(outcome, Invalid):
        if _newly_invalid(selector, outcome):
            steps.append(RecordEvent(_selector_ref(selector), WARNING, EVENT_INVALID, outcome.message))
    else:
        if rules_api is not None:
            desired = desired_rules(selector, outcome.devices, rules_api.api_version)
            existing = cache.rules_of(selector.metadata.uid, desired)
            diff = diff_rules(selector.metadata.uid, desired, existing)
            uids = {rule.metadata.name: rule.metadata.uid for rule in existing}
            writes = rule_writes(diff, uids, rules_api)
            if writes:
                steps.append(Together(writes, WRITE_CONCURRENCY))
            pending = RuleDiff(conflicts=diff.conflicts)
        if selector.spec.taint.effect == EFFECT_NONE:
            dry = dry_run(selector.spec.taint, outcome.devices, cache.claims.values())
    status = selector_status(
        selector,
        outcome,
        rules_available=rules_api is not None,
        pending=pending,
        rules=cache.rules_of(selector.metadata.uid),
        dry_run=dry,
    )
    if needs_write(selector.status, status):
        steps.append(status_apply(SELECTORS, KIND, selector.metadata.name, selector.metadata.uid, status))
    return Plan(tuple(steps))


def rule_writes(diff: RuleDiff, uids: dict[str, str], rules_api: ServedResource) -> tuple[Write, ...]:
    """The API calls of ``diff``: patches and deletes carry the rule's UID, so a namesake is never hit."""
    creates = [Create(rules_api.path(), body) for body in diff.create]
    updates = [Patch(rules_api.path(item.name), item.patch, uid=uids[item.name]) for item in diff.update]
    deletes = [Delete(rules_api.path(name), uids[name]) for name in diff.delete]
    return (*creates, *updates, *deletes)


def _newly_invalid(selector: TaintSelector, outcome: Invalid) -> bool:
    """Whether the selector became invalid, or invalid for another reason, or at a new generation."""
    return not reported(selector.status, INVALID, TRUE, outcome.reason, selector.metadata.generation)


def _selector_ref(selector: TaintSelector) -> ObjectRef:
    return ObjectRef(API_VERSION, KIND, selector.metadata.name, None, selector.metadata.uid)
