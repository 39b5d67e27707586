"""``DeviceAttachPolicy`` evaluation, and the book of policy states the reconciler reads.

Evaluation turns a policy into its ``Accepted``, ``Authorized`` and ``Ready`` conditions (spec
§21.3-§21.4). Admission (OpenAPI schema plus CEL) already rejects malformed fields; this module
adds the semantic checks admission cannot express (relations between durations, uniqueness of
the driver across policies, runtime flags) and re-checks the admission rules cheaply, because a
policy can predate a schema change. Every rejection names the offending field and value.

Evaluation order, so that the most actionable problem is reported:

1. :func:`duplicate_winner` - another, older policy already owns the driver (``DuplicateDriver``);
2. :func:`validate` - spec rules (``InvalidSpec``), the Test-action flag, the taint API;
3. building the action (``actions.factory``), which may fail with the adapter-specific reasons.

A successful evaluation yields :class:`PolicySettings`: the spec with every duration parsed,
from which the deadline, the state-machine settings and the condition settings are derived.

Between the watch and the reconciler, one :class:`PolicyState` per policy object holds the
parsed object (fed by the watch) and the outcome of its last evaluation (fed by the policy
sync): whether it is Ready, the settings and the action instance of the last *accepted*
generation. Records keep being driven with that last accepted instance while a later generation
is rejected (spec §21.4), so acceptance and readiness are tracked apart.

:class:`PolicyBook` answers the reconciler's questions without I/O:

* which policy owns a driver (:meth:`PolicyBook.owner`): the oldest live one, as
  :func:`duplicate_winner` decides, so a rejected duplicate never steers selection;
* the selection rules per driver (:meth:`PolicyBook.rules`), and whether every policy a claim
  depends on has been evaluated at its current generation (:meth:`PolicyBook.settled`), so no
  claim is decided on a policy the process has not looked at yet (after a restart, for example);
* which policy instance drives an existing record (:meth:`PolicyBook.for_record`).

What the policy sync writes is planned here too, as :class:`~operators.core.plan.Plan` steps:
the finalizer (:func:`finalizer_plan`) and the status with its ``PolicyAccepted`` or
``PolicyRejected`` Event (:func:`status_plan`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from operators.core.backoff import Backoff
from operators.core.conditions import (
    FALSE,
    TRUE,
    UNKNOWN,
    Condition,
    current,
    find,
    same_content,
    set_observed,
)
from operators.core.events import NORMAL, WARNING, ObjectRef
from operators.core.models import body_name, superseded
from operators.core.names import is_dns_subdomain, is_qualified_name
from operators.core.namespace import Problem
from operators.core.plan import Patch, Plan, RecordEvent, Step, status_apply
from operators.core.reconcile import Done, Requeue
from operators.dra.api import GROUP
from operators.dra.attachments import POLICIES
from operators.dra.durations import format_seconds, parse_go_duration
from operators.dra.unserved import DEVICE_TAINT_RULES_UNSERVED

from . import statemachine
from .actions.base import supports_probe
from .devicestatus import REASON_PATTERN, ConditionSettings
from .models import (
    ActionKind,
    DeviceAttachment,
    DeviceAttachPolicy,
    DeviceAttachPolicySpec,
    NoopActionSpec,
    TaintDevice,
)
from .selection import SelectionRules
from .statemachine import JITTER, MachineSettings

ACCEPTED = "Accepted"
AUTHORIZED = "Authorized"
READY = "Ready"

MAX_REASON_CHARS = 64
MAX_ACTION_TIMEOUT = timedelta(minutes=15)
MAX_MANAGED_TYPES = 8
MAX_POOLS = 64
MAX_DRIVER_CHARS = 63


@dataclass(frozen=True)
class PolicySettings:
    """A validated policy spec with its durations parsed."""

    spec: DeviceAttachPolicySpec
    node_wait_timeout: timedelta
    binding_timeout: timedelta
    safety_margin: timedelta
    action_timeout: timedelta
    attach_backoff: Backoff
    detach_grace_period: timedelta
    detach_backoff: Backoff
    permanent_detach_retry: timedelta
    taint_duration: timedelta

    def attach_deadline(self, allocation_timestamp: datetime) -> datetime:
        return statemachine.attach_deadline(allocation_timestamp, self.binding_timeout, self.safety_margin)

    def machine_settings(self, *, probe_supported: bool) -> MachineSettings:
        return MachineSettings(
            reasons=self.spec.conditions.reasons,
            attach_backoff=self.attach_backoff,
            detach_backoff=self.detach_backoff,
            permanent_detach_retry=self.permanent_detach_retry.total_seconds(),
            taint_device=self.spec.on_failure.taint_device,
            probe_supported=probe_supported,
        )

    def condition_settings(self, policy_name: str) -> ConditionSettings:
        return ConditionSettings(policy_name=policy_name, spec=self.spec.conditions)


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    reason: str
    message: str
    settings: PolicySettings | None = None

    @classmethod
    def rejected(cls, reason: str, message: str) -> Verdict:
        return cls(False, reason, message)


class _Invalid(Exception):
    pass


def _duration(value: str, path: str) -> timedelta:
    try:
        return parse_go_duration(value)
    except ValueError as exc:
        raise _Invalid(f"{path}: {exc}") from exc


def _within(value: timedelta, path: str, low: timedelta, high: timedelta, high_text: str) -> None:
    if value < low or value > high:
        raise _Invalid(
            f"{path}: {format_seconds(value)} must be between {format_seconds(low)} and {high_text}"
        )


def _check_names(spec: DeviceAttachPolicySpec) -> None:
    if not is_dns_subdomain(spec.driver, MAX_DRIVER_CHARS):
        raise _Invalid(
            f"spec.driver: {spec.driver!r} must be a DNS subdomain of at most {MAX_DRIVER_CHARS} characters"
        )
    if len(spec.selector.pools) > MAX_POOLS or any(len(p) > 253 or not p for p in spec.selector.pools):
        raise _Invalid(f"spec.selector.pools: at most {MAX_POOLS} non-empty names of at most 253 characters")
    conditions = spec.conditions
    if len(conditions.managed_types) > MAX_MANAGED_TYPES:
        raise _Invalid(f"spec.conditions.managedTypes: at most {MAX_MANAGED_TYPES} entries")
    for path, value in (
        *((f"spec.conditions.managedTypes[{i}]", t) for i, t in enumerate(conditions.managed_types)),
        ("spec.conditions.failureType", conditions.failure_type),
        ("spec.conditions.timeoutFailureType", conditions.timeout_failure_type),
        ("spec.conditions.nodeFailureType", conditions.node_failure_type),
    ):
        if value and not is_qualified_name(value):
            raise _Invalid(f"{path}: {value!r} is not a qualified name such as example.com/attached")
    for name, reason in conditions.reasons.model_dump().items():
        if len(reason) > MAX_REASON_CHARS or not REASON_PATTERN.fullmatch(reason):
            raise _Invalid(
                f"spec.conditions.reasons.{_camel(name)}: {reason!r} must match {REASON_PATTERN.pattern} "
                f"and have at most {MAX_REASON_CHARS} characters"
            )


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part.title() for part in rest)


def _settings(spec: DeviceAttachPolicySpec) -> PolicySettings:
    _check_names(spec)
    binding = _duration(spec.binding_timeout, "spec.bindingTimeout")
    if binding < timedelta(seconds=10):
        raise _Invalid(f"spec.bindingTimeout: {spec.binding_timeout} must be at least 10s")
    bound = format_seconds(binding)
    margin = _duration(spec.safety_margin, "spec.safetyMargin")
    if margin < timedelta(seconds=5) or margin > binding / 2:
        raise _Invalid(
            f"spec.safetyMargin: {spec.safety_margin} must be at least 5s and at most half of "
            f"spec.bindingTimeout ({bound})"
        )
    node_wait = _duration(spec.node_wait_timeout, "spec.nodeWaitTimeout")
    _within(
        node_wait, "spec.nodeWaitTimeout", timedelta(seconds=1), binding, f"spec.bindingTimeout ({bound})"
    )
    action_timeout = _duration(spec.action.timeout, "spec.action.timeout")
    # The spec bounds action.timeout by bindingTimeout, but its own default (60s) would then
    # reject every policy with a shorter bindingTimeout, including the acceptance suite's 30s.
    # Attach calls are cut to the remaining budget anyway, so only the lower bound is enforced.
    if action_timeout < timedelta(seconds=1):
        raise _Invalid(f"spec.action.timeout: {spec.action.timeout} must be at least 1s")
    # A call holds one of the process-wide slots for as long as it runs.
    if action_timeout > MAX_ACTION_TIMEOUT:
        raise _Invalid(
            f"spec.action.timeout: {spec.action.timeout} must be at most {format_seconds(MAX_ACTION_TIMEOUT)}"
        )
    if spec.action.kind is ActionKind.NOOP:
        delay = _duration((spec.action.noop or NoopActionSpec()).delay, "spec.action.noop.delay")
        if delay >= binding:
            raise _Invalid(
                f"spec.action.noop.delay: {format_seconds(delay)} must be less than spec.bindingTimeout"
            )
    concurrency = spec.concurrency
    for path, value in (
        ("spec.concurrency.maxAttaches", concurrency.max_attaches),
        ("spec.concurrency.maxDetaches", concurrency.max_detaches),
    ):
        if not 1 <= value <= 1000:
            raise _Invalid(f"{path}: {value} must be between 1 and 1000")
    retry_initial = _duration(spec.retry.initial_backoff, "spec.retry.initialBackoff")
    retry_max = _duration(spec.retry.max_backoff, "spec.retry.maxBackoff")
    if retry_initial > retry_max:
        raise _Invalid("spec.retry.initialBackoff must not exceed spec.retry.maxBackoff")
    detach = spec.detach
    detach_initial = _duration(detach.initial_backoff, "spec.detach.initialBackoff")
    detach_max = _duration(detach.max_backoff, "spec.detach.maxBackoff")
    if detach_initial > detach_max:
        raise _Invalid("spec.detach.initialBackoff must not exceed spec.detach.maxBackoff")
    return PolicySettings(
        spec=spec,
        node_wait_timeout=node_wait,
        binding_timeout=binding,
        safety_margin=margin,
        action_timeout=action_timeout,
        attach_backoff=Backoff(retry_initial.total_seconds(), 2.0, retry_max.total_seconds(), JITTER),
        detach_grace_period=_duration(detach.grace_period, "spec.detach.gracePeriod"),
        detach_backoff=Backoff(detach_initial.total_seconds(), 2.0, detach_max.total_seconds(), JITTER),
        permanent_detach_retry=_duration(detach.permanent_error_retry, "spec.detach.permanentErrorRetry"),
        taint_duration=_duration(spec.on_failure.taint_duration, "spec.onFailure.taintDuration"),
    )


def validate(policy: DeviceAttachPolicy, *, test_actions_enabled: bool, taint_rules_served: bool) -> Verdict:
    """The spec rules and flag checks; building the action is the next step (actions.factory)."""
    spec = policy.spec
    try:
        settings = _settings(spec)
    except _Invalid as exc:
        return Verdict.rejected("InvalidSpec", str(exc))
    if spec.action.kind is ActionKind.TEST and not test_actions_enabled:
        return Verdict.rejected(
            "TestActionDisabled", "spec.action.kind: Test needs the operator flag --enable-test-actions"
        )
    if spec.on_failure.taint_device is TaintDevice.ALWAYS and not taint_rules_served:
        return Verdict.rejected(
            "DeviceTaintRulesUnavailable",
            f"spec.onFailure.taintDevice: {spec.on_failure.taint_device.value} needs the DeviceTaintRule "
            f"API, and {DEVICE_TAINT_RULES_UNSERVED}",
        )
    if spec.on_failure.taint_device is TaintDevice.ON_PERMANENT_ERROR and not taint_rules_served:
        # The default since the livelock fix: a cluster without the API (1.36 with the beta off)
        # keeps working as with Never, and says so, instead of rejecting every default policy.
        return Verdict(True, "Valid", TAINT_INACTIVE, _without_taint(settings))
    return Verdict(True, "Valid", "", settings)


TAINT_INACTIVE = (
    "spec.onFailure.taintDevice: OnPermanentError is inactive, so a permanently failing device may be "
    f"picked again: {DEVICE_TAINT_RULES_UNSERVED}"
)


def _without_taint(settings: PolicySettings) -> PolicySettings:
    on_failure = settings.spec.on_failure.model_copy(update={"taint_device": TaintDevice.NEVER})
    spec = settings.spec.model_copy(update={"on_failure": on_failure})
    return replace(settings, spec=spec)


def _seniority(policy: DeviceAttachPolicy) -> tuple[str, str]:
    # RFC 3339 UTC timestamps of equal precision sort correctly as strings.
    return (policy.metadata.creation_timestamp or "", policy.metadata.name)


def duplicate_winner(policy: DeviceAttachPolicy, policies: Iterable[DeviceAttachPolicy]) -> str | None:
    """The name of the older policy that owns the same driver, or None if this one wins."""
    rivals = [
        p
        for p in policies
        if p.spec.driver == policy.spec.driver
        and p.metadata.uid != policy.metadata.uid
        and p.metadata.deletion_timestamp is None
    ]
    if not rivals:
        return None
    winner = min([*rivals, policy], key=_seniority)
    return None if winner.metadata.uid == policy.metadata.uid else winner.metadata.name


def evaluate(
    policy: DeviceAttachPolicy,
    policies: Iterable[DeviceAttachPolicy],
    *,
    test_actions_enabled: bool,
    taint_rules_served: bool,
) -> Verdict:
    winner = duplicate_winner(policy, policies)
    if winner is not None:
        return Verdict.rejected(
            "DuplicateDriver",
            f"spec.driver: {policy.spec.driver!r} is already configured by policy {winner!r}",
        )
    return validate(policy, test_actions_enabled=test_actions_enabled, taint_rules_served=taint_rules_served)


def with_action(verdict: Verdict, description: str) -> Verdict:
    """The final Accepted=True verdict once the action has been built (with any note kept)."""
    message = f"{description}; {verdict.message}" if verdict.message else description
    return Verdict(True, verdict.reason, message, verdict.settings)


def access_review(driver: str) -> dict[str, Any]:
    """The SelfSubjectAccessReview body behind ``Authorized`` (cluster-wide, spec §21.4)."""
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "group": GROUP,
                "resource": "resourceclaims",
                "subresource": "driver",
                "name": driver,
                "namespace": "",
                "verb": "arbitrary-node:patch",
            }
        },
    }


def grant_command(driver: str, namespace: str) -> str:
    """The documented step that grants the missing permission (``kubectl dra grant-driver``)."""
    suffix = "" if namespace == "dra-operators" else f" --namespace {namespace}"
    return f"kubectl dra grant-driver {driver}{suffix}"


def authorized_condition(
    driver: str, allowed: bool | None, generation: int, detail: str = "", namespace: str = "dra-operators"
) -> Condition:
    """``allowed`` None means the review itself failed (``Unknown``/``CheckFailed``)."""
    if allowed is None:
        return Condition(
            type=AUTHORIZED,
            status=UNKNOWN,
            reason="CheckFailed",
            message=f"permission check failed: {detail}" if detail else "permission check failed",
            observed_generation=generation,
        )
    if allowed:
        return Condition(
            type=AUTHORIZED,
            status=TRUE,
            reason="PermissionVerified",
            message=f"resourceclaims/driver arbitrary-node:patch allowed for {driver}",
            observed_generation=generation,
        )
    return Condition(
        type=AUTHORIZED,
        status=FALSE,
        reason="MissingDriverPermission",
        message=(
            f"missing rule: apiGroups [{GROUP}], resources [resourceclaims/driver], "
            f"resourceNames [{driver}], verbs [arbitrary-node:patch]; grant it with "
            f"`{grant_command(driver, namespace)}`" + (f"; {detail}" if detail else "")
        ),
        observed_generation=generation,
    )


def accepted_condition(verdict: Verdict, generation: int) -> Condition:
    return Condition(
        type=ACCEPTED,
        status=TRUE if verdict.accepted else FALSE,
        reason=verdict.reason,
        message=verdict.message,
        observed_generation=generation,
    )


def ready_condition(
    accepted: Condition,
    authorized: Condition,
    terminating: bool,
    generation: int,
    namespace_problem: Problem | None = None,
) -> Condition:
    if terminating:
        status, reason, message = FALSE, "Terminating", "the policy is being deleted; no new attaches start"
    elif namespace_problem is not None:
        # Before the policy's own problems: without the ledger's namespace nothing can attach, and
        # the Secrets a webhook action needs are missing for the same reason.
        status, reason, message = FALSE, namespace_problem.reason, namespace_problem.message
    elif accepted.status != TRUE:
        status, reason, message = FALSE, "NotAccepted", accepted.message
    elif authorized.status != TRUE:
        status, reason, message = FALSE, "NotAuthorized", authorized.message
    else:
        status, reason, message = TRUE, "Ready", ""
    return Condition(
        type=READY, status=status, reason=reason, message=message, observed_generation=generation
    )


def status_conditions(
    verdict: Verdict,
    authorized: Condition,
    *,
    terminating: bool,
    generation: int,
    namespace_problem: Problem | None = None,
) -> tuple[Condition, Condition, Condition]:
    accepted = accepted_condition(verdict, generation)
    ready = ready_condition(accepted, authorized, terminating, generation, namespace_problem)
    return accepted, authorized, ready


def is_ready(status: Mapping[str, Any] | None) -> bool:
    for condition in (status or {}).get("conditions", ()) or ():
        if condition.get("type") == READY:
            return bool(condition.get("status") == TRUE)
    return False


@dataclass
class PolicyState:
    name: str
    uid: str = ""
    generation: int = 0
    driver: str = ""
    creation: str = ""
    deleting: bool = False
    finalizers: tuple[str, ...] = ()
    resource_version: str = ""
    policy: DeviceAttachPolicy | None = None
    parse_error: str = ""
    status: Mapping[str, Any] = field(default_factory=dict)
    # -- evaluation (policy sync) --
    evaluated_generation: int | None = None
    ready: bool = False
    not_ready_message: str = ""
    accepted_generation: int | None = None
    settings: PolicySettings | None = None
    action: object | None = None
    action_kind: str = ""
    action_description: str = ""
    authorized_generation: int | None = None
    authorized_at: float = 0.0
    authorized: bool | None = None
    authorized_detail: str = ""
    secrets_read_at: float = 0.0
    secrets_digest: str = ""

    @property
    def evaluated(self) -> bool:
        return self.evaluated_generation == self.generation

    @property
    def probe_supported(self) -> bool:
        return self.action is not None and supports_probe(self.action)

    def seniority(self) -> tuple[str, str]:
        return (self.creation, self.name)

    def recheck_authorization(self) -> None:
        """Ask the API server again at the next sync, whatever the last answer's age."""
        self.authorized_at = 0.0


def parse_policy(body: Mapping[str, Any]) -> tuple[DeviceAttachPolicy | None, str]:
    try:
        return DeviceAttachPolicy.model_validate(body), ""
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors(include_url=False)
        )
        return None, f"the policy cannot be read: {problems}"


class PolicyBook:
    def __init__(self) -> None:
        self._states: dict[str, PolicyState] = {}

    def get(self, name: str) -> PolicyState | None:
        return self._states.get(name)

    def all(self) -> list[PolicyState]:
        return list(self._states.values())

    def observe(self, body: Mapping[str, Any]) -> PolicyState:
        """Update (or create) the state of a policy from its watched body; evaluation is kept."""
        meta = body.get("metadata") or {}
        name = str(meta.get("name", ""))
        state = self._states.get(name)
        if state is None or state.uid != meta.get("uid", ""):
            state = self._states[name] = PolicyState(name=name)
        policy, problem = parse_policy(body)
        spec = body.get("spec") or {}
        state.uid = str(meta.get("uid", ""))
        state.generation = int(meta.get("generation") or 0)
        state.driver = str(spec.get("driver", "")) if isinstance(spec, Mapping) else ""
        state.creation = str(meta.get("creationTimestamp", ""))
        state.deleting = meta.get("deletionTimestamp") is not None
        state.finalizers = tuple(meta.get("finalizers") or ())
        state.resource_version = str(meta.get("resourceVersion", ""))
        state.policy = policy
        state.parse_error = problem
        state.status = dict(body.get("status") or {})
        return state

    def forget(self, body: Mapping[str, Any]) -> PolicyState | None:
        """Drop the state of a deleted policy, returning it. A tombstone drops it only when it is of
        the same UID: a re-list hands over its tombstones after the objects it found, so that of a
        policy deleted and created again under its name comes after its successor, which stays."""
        name = body_name(body)
        state = self._states.get(name)
        if state is None or superseded(body, state.uid):
            return None
        return self._states.pop(name)

    def parsed(self) -> list[DeviceAttachPolicy]:
        return [s.policy for s in self._states.values() if s.policy is not None]

    def same_driver(self, driver: str) -> list[PolicyState]:
        return [s for s in self._states.values() if s.driver == driver]

    def owner(self, driver: str) -> PolicyState | None:
        """The policy that configures ``driver``: the oldest live one, else the oldest deleting one."""
        candidates = self.same_driver(driver)
        live = [s for s in candidates if not s.deleting]
        pool = live or candidates
        return min(pool, key=PolicyState.seniority) if pool else None

    def drivers(self) -> set[str]:
        return {s.driver for s in self._states.values() if s.driver}

    def rules(self) -> dict[str, SelectionRules]:
        """Selection rules per configured driver (spec §5), from each driver's owning policy."""
        rules: dict[str, SelectionRules] = {}
        for driver in self.drivers():
            owner = self.owner(driver)
            if owner is None:
                continue
            if owner.policy is not None:
                rules[driver] = SelectionRules.of_policy(
                    owner.policy.spec, owner.ready, owner.not_ready_message
                )
            else:
                rules[driver] = SelectionRules(
                    driver=driver, ready=False, not_ready_message=owner.not_ready_message
                )
        return rules

    def settled(self, drivers: Iterable[str]) -> bool:
        """Whether every policy of these drivers has been evaluated at its current generation."""
        wanted = set(drivers)
        return all(s.evaluated for s in self._states.values() if s.driver in wanted)

    def for_record(self, record: DeviceAttachment) -> PolicyState | None:
        """The policy whose last accepted action drives ``record``: its own policy, else the
        driver's owner (a policy deleted by force, bypassing the finalizer)."""
        own = self._states.get(record.spec.policy.name)
        if own is not None and own.action is not None and own.driver == record.spec.driver:
            return own
        owner = self.owner(record.spec.driver)
        if owner is not None and owner.action is not None:
            return owner
        return None


FINALIZER_CONFLICT_RETRY_SECONDS = 0.5


def finalizer_plan(name: str, resource_version: str, finalizers: tuple[str, ...]) -> Plan:
    """Set the policy's finalizers on the version it was read at: changed meanwhile (409) is
    looked at again shortly, gone (404) is done."""
    body = {"metadata": {"finalizers": list(finalizers), "resourceVersion": resource_version}}
    changed = Requeue(FINALIZER_CONFLICT_RETRY_SECONDS, f"policy {name} changed while setting its finalizer")
    return Plan((Patch(POLICIES.path(name), body, ends={409: changed}),))


def status_plan(
    ref: ObjectRef,
    status: Mapping[str, Any],
    generation: int,
    conditions: tuple[Condition, ...],
    records: Mapping[str, Any],
    now: str,
) -> Plan:
    """Apply the policy's status (``conditions[0]`` is ``Accepted``), then tell of a change of
    acceptance in an Event. Nothing when only timestamps would change; nothing more once the
    policy is gone (404)."""
    shown = list(status.get("conditions") or ())
    merged = set_observed(shown, generation, conditions, now)
    unchanged = (
        status.get("observedGeneration") == generation
        and status.get("records") == records
        and all(same_content(find(shown, c.type), c.to_dict()) for c in conditions)
    )
    if unchanged:
        return Plan()
    wanted = {"observedGeneration": generation, "conditions": merged, "records": dict(records)}
    gone = Done("the policy is gone")
    steps: list[Step] = [status_apply(POLICIES, ref.kind, ref.name, ref.uid, wanted, ends={404: gone})]
    event = accepted_event(ref, find(shown, ACCEPTED), conditions[0])
    if event is not None:
        steps.append(event)
    return Plan(tuple(steps))


def accepted_event(
    ref: ObjectRef, previous: Mapping[str, Any] | None, accepted: Condition
) -> RecordEvent | None:
    """The Event of a change of ``Accepted`` (also of its first report); None when it kept its
    status and reason. A rejection is told again for each new generation it rejects, as every
    operator's Warning is (:func:`~operators.core.conditions.reported`): the new spec is wrong too."""
    if (
        previous is not None
        and previous.get("status") == accepted.status
        and previous.get("reason") == accepted.reason
        and (accepted.status == TRUE or current(previous, accepted.observed_generation))
    ):
        return None
    if accepted.status == TRUE:
        return RecordEvent(ref, NORMAL, "PolicyAccepted", accepted.message or "the policy was accepted")
    return RecordEvent(ref, WARNING, "PolicyRejected", f"{accepted.reason}: {accepted.message}")
