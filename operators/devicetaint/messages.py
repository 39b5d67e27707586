"""The ``EvictionInProgress`` condition of a DeviceTaintRule: its content and when to write it (spec §10).

Reasons and message texts are API: users script ``kubectl wait`` on them, and the differential tests
compare them with upstream word for word. The value 1 takes the singular, every other value (0 too)
the plural.

Writing is throttled by the condition itself: ``lastTransitionTime`` is bumped on *every* change, even
of the message alone, so "less than 10 s since the last write" can be read from the cached rule without
remembering anything. That also delays the final ``False`` until the informer-style cache has seen the
last pods go, instead of flapping back to ``True`` on a stale view.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from operators.core.conditions import FALSE, TRUE, Condition, ObservedCondition, format_time, same_content
from operators.core.discovery import ServedResource
from operators.core.keys import Key
from operators.core.plan import Plan, status_apply
from operators.core.reconcile import Done, Requeue
from operators.dra.taintrules import EVICTION_IN_PROGRESS, KIND
from operators.dra.taints import EFFECT_NO_EXECUTE, EFFECT_NONE

RULE_STATUS_PERIOD = timedelta(seconds=10)

REASON_PENDING = "PodsPendingEviction"
REASON_COMPLETED = "Completed"
REASON_NOT_STARTED = "NotStarted"
REASON_NO_EFFECT = "NoEffect"
REASON_OTHER_EFFECT = "OtherEffect"
# Ours: upstream's controller has no such case, since its selector has only the three names.
REASON_UNSUPPORTED_SELECTOR = "UnsupportedSelector"

OTHER_EFFECT_TEXT = "Eviction only happens for the NoExecute effect."
DRY_RUN_TAIL = (
    "if the effect was NoExecute. This information will not be updated again. "
    "Recreate the DeviceTaintRule to trigger an update."
)


@dataclass(frozen=True)
class RuleCounts:
    """What the condition reports. Device counts are only computed for the dry run of ``effect: None``."""

    pending_pods: int = 0
    pending_namespaces: int = 0
    evicted_pods: int = 0
    published_devices: int = 0
    allocated_devices: int = 0


@dataclass(frozen=True)
class ConditionContent:
    status: str
    reason: str
    message: str


def _count(number: int, singular: str, plural: str) -> str:
    return f"1 {singular}" if number == 1 else f"{number} {plural}"


def pending_text(pods: int, namespaces: int) -> str:
    verb = "pod needs" if pods == 1 else "pods need"
    return f"{pods} {verb} to be evicted in {_count(namespaces, 'namespace.', 'different namespaces.')}"


def dry_run_text(counts: RuleCounts) -> str:
    return " ".join(
        (
            _count(counts.published_devices, "published device selected.", "published devices selected."),
            _count(counts.allocated_devices, "allocated device selected.", "allocated devices selected."),
            _count(counts.pending_pods, "pod would be evicted in", "pods would be evicted in"),
            _count(counts.pending_namespaces, "namespace", "different namespaces"),
            DRY_RUN_TAIL,
        )
    )


def with_evicted_suffix(message: str, evicted: int) -> str:
    if evicted <= 0:
        return message
    suffix = _count(
        evicted, "pod evicted since starting the controller.", "pods evicted since starting the controller."
    )
    return f"{message} {suffix}" if message else suffix


def eviction_in_progress(effect: str, counts: RuleCounts) -> ConditionContent:
    """Status, reason and message for a rule with this taint effect (spec §10.1)."""
    if effect == EFFECT_NO_EXECUTE:
        if counts.pending_pods > 0:
            status, reason = TRUE, REASON_PENDING
            message = pending_text(counts.pending_pods, counts.pending_namespaces)
        elif counts.evicted_pods > 0:
            status, reason, message = FALSE, REASON_COMPLETED, ""
        else:
            status, reason, message = FALSE, REASON_NOT_STARTED, ""
    elif effect == EFFECT_NONE:
        status, reason, message = FALSE, REASON_NO_EFFECT, dry_run_text(counts)
    else:
        status, reason, message = FALSE, REASON_OTHER_EFFECT, OTHER_EFFECT_TEXT
    return ConditionContent(status, reason, with_evicted_suffix(message, counts.evicted_pods))


def unsupported_selector_text(fields: tuple[str, ...]) -> str:
    """Why a rule whose selector narrows beyond the names is not applied; ``fields`` are API names."""
    named = " and ".join(f"spec.deviceSelector.{field}" for field in fields)
    verb = "is" if len(fields) == 1 else "are"
    return (
        f"{named} {verb} set, but this operator matches devices only by driver, pool and device, as "
        "Kubernetes 1.35 and later do; matching those alone would select more devices than the rule "
        "means, so this rule evicts no pod and counts none."
    )


def unsupported_selector(fields: tuple[str, ...], evicted: int) -> ConditionContent:
    """The condition of a rule the operator refuses to apply (whatever its effect)."""
    message = with_evicted_suffix(unsupported_selector_text(fields), evicted)
    return ConditionContent(FALSE, REASON_UNSUPPORTED_SELECTOR, message)


def says_unsupported(existing: ObservedCondition | None, generation: int) -> bool:
    """Whether the rule's condition already refuses this generation, written by this process or the
    one before a restart: the Warning Event that goes with it was sent then."""
    return (
        existing is not None
        and existing.reason == REASON_UNSUPPORTED_SELECTOR
        and existing.observed_generation == generation
    )


# --- When to write -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuleDrop:
    """The rule is gone or was replaced; the item is obsolete."""


@dataclass(frozen=True)
class RuleRequeue:
    """Throttled: look again after ``delay`` seconds."""

    delay: float


@dataclass(frozen=True)
class RuleUnchanged:
    """The condition already says this; nothing to write."""


@dataclass(frozen=True)
class RuleWrite:
    condition: Condition


RuleDecision = RuleDrop | RuleRequeue | RuleUnchanged | RuleWrite


def throttle_delay(existing: ObservedCondition | None, generation: int, now: datetime) -> float | None:
    """Seconds to wait before the condition may change again, or None if it may change now.

    A spec change (new generation) is never throttled: its first report is immediate.
    """
    if (
        existing is None
        or existing.last_transition_time is None
        or existing.observed_generation != generation
    ):
        return None
    since = now - existing.last_transition_time
    if since >= RULE_STATUS_PERIOD:
        return None
    # A transition time in the future (clock skew) must not stall the rule beyond one period.
    return min(RULE_STATUS_PERIOD - since, RULE_STATUS_PERIOD).total_seconds()


def status_decision(
    existing: ObservedCondition | None, content: ConditionContent, generation: int, now: datetime
) -> RuleUnchanged | RuleWrite:
    """Write only when type, status, reason, message or observedGeneration differ (spec §10.3 step 3)."""
    condition = Condition(
        type=EVICTION_IN_PROGRESS,
        status=content.status,
        reason=content.reason,
        message=content.message,
        observed_generation=generation,
        last_transition_time=format_time(now),
    )
    if same_content(existing, condition):
        return RuleUnchanged()
    return RuleWrite(condition)


def rule_plan(item: Key, decision: RuleDecision, status_of: ServedResource | None) -> Plan:
    """The write of one rule work item, the apply of spec §10.4; ``status_of`` is the served rule version
    when it serves ``devicetaintrules/status``, else None and nothing is written."""
    if isinstance(decision, RuleRequeue):
        return Plan(result=Requeue(decision.delay, "rule status throttled"))
    if not isinstance(decision, RuleWrite) or status_of is None:
        return Plan()
    # An empty message stays in the body: omitted, a message owned by another manager (say, the in-tree
    # controller before the handover) would survive our apply.
    status = {"conditions": [decision.condition.to_dict()]}
    # A 404 (or a namesake's refusal of our UID): the rule is gone, so there is no condition to remember
    # as written.
    return Plan((status_apply(status_of, KIND, item.name, item.uid, status, ends={404: Done()}),))
