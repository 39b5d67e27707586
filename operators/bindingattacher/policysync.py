"""Reconciling one ``DeviceAttachPolicy`` (spec §21.4): evaluate, build, authorize, report.

A sync runs the pure evaluation (``policy.evaluate``), builds the action of a newly accepted
generation (``actions.build_action``; Secrets are read here, in the operator namespace only),
asks the API server whether this process may write the driver's ``status.devices`` entries
(a SelfSubjectAccessReview, re-asked every 5 minutes and after a write was refused), and
writes ``Accepted``/``Authorized``/``Ready`` plus the record counts with server-side apply on
the status subresource. ``Ready`` is also False while the operator namespace, which holds the
ledger, is missing (``NamespaceMissing``, with the runtime's sentence on what to create). A write
is skipped when nothing but timestamps would change.

A rejected later generation keeps the last accepted action instance, so detaches of existing
records continue (spec §21.4). The finalizer ``dra-operators.io/attachments`` is added on
first acceptance and removed once no record refers to a deleted policy; only then is the
instance closed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from operators.core.client import ApiError
from operators.core.conditions import TRUE, Condition, format_time
from operators.core.events import ObjectRef
from operators.core.plan import Write, execute
from operators.core.reconcile import Done, Requeue, Result
from operators.core.resources import SECRETS, SELF_SUBJECT_ACCESS_REVIEWS
from operators.dra.attachments import POLICY_FINALIZER
from operators.dra.durations import parse_go_duration

from . import ledger, policy
from .actions import ActionConfigError, BuildContext, build_action, close_action
from .actions.testaction import TestAction
from .collaborators import Collaborators
from .models import API_VERSION, ActionKind, DeviceAttachPolicy
from .policy import PolicyState

log = logging.getLogger(__name__)

KIND = "DeviceAttachPolicy"
RECHECK_SECONDS = 300.0
"""Authorization and Secrets are re-read this often (spec §10.4, §21.4)."""
UNAUTHORIZED_RECHECK_SECONDS = 10.0
"""How soon a policy that is not (or not yet known to be) authorized asks again."""


def policy_ref(state: PolicyState) -> ObjectRef:
    return ObjectRef(API_VERSION, KIND, state.name, None, state.uid)


def _pool_size(candidate: DeviceAttachPolicy) -> int:
    concurrency = candidate.spec.concurrency
    return concurrency.max_attaches + concurrency.max_detaches


def _capped(spec_policy: DeviceAttachPolicy, cap: str | None) -> DeviceAttachPolicy:
    """The policy with ``bindingTimeout`` cut to ``--binding-timeout`` (the scheduler's value)."""
    if cap is None:
        return spec_policy
    try:
        if parse_go_duration(spec_policy.spec.binding_timeout) <= parse_go_duration(cap):
            return spec_policy
    except ValueError:
        return spec_policy  # validation reports the malformed value
    spec = spec_policy.spec.model_copy(update={"binding_timeout": cap})
    return spec_policy.model_copy(update={"spec": spec})


class PolicySync:
    def __init__(self, shared: Collaborators) -> None:
        self.shared = shared

    async def sync(self, name: str) -> Result:
        """Reconcile one policy; the result says when to look again."""
        state = self.shared.cache.policies.get(name)
        if state is None:
            return Done()
        generation = state.generation
        verdict = await self._evaluate(state)
        authorized = await self._authorize(state)
        accepted, authorized, ready = policy.status_conditions(
            verdict,
            authorized,
            terminating=state.deleting,
            generation=generation,
            namespace_problem=self.shared.namespace_problem(),
        )
        was = (state.evaluated, state.ready)
        state.ready = ready.status == TRUE
        state.not_ready_message = ready.message or ready.reason
        state.evaluated_generation = generation
        if stop := await self._finalizer(state, verdict.accepted):
            return stop
        await self._write_status(state, (accepted, authorized, ready))
        if was != (True, state.ready):
            for key in self.shared.cache.driver_keys(state.driver):
                self.shared.queue.add(key)
        again = RECHECK_SECONDS if authorized.status == TRUE else UNAUTHORIZED_RECHECK_SECONDS
        return Requeue(again, "policy re-evaluation due")

    # -- evaluation ----------------------------------------------------------------------------

    async def _evaluate(self, state: PolicyState) -> policy.Verdict:
        if state.policy is None:
            return policy.Verdict.rejected("InvalidSpec", state.parse_error)
        candidate = _capped(state.policy, self.shared.settings.binding_timeout)
        parsed = self.shared.cache.policies.parsed()
        others = [p if p.metadata.uid != candidate.metadata.uid else candidate for p in parsed]
        verdict = policy.evaluate(
            candidate,
            others,
            test_actions_enabled=self.shared.settings.enable_test_actions,
            taint_rules_served=self.shared.taint_rules_served(),
        )
        if not verdict.accepted or verdict.settings is None:
            return verdict
        try:
            secrets, digest = await self._secrets(state, candidate)
            current = state.accepted_generation == state.generation and state.action is not None
            if current and digest == state.secrets_digest:
                return policy.with_action(verdict, state.action_description)
            built = await build_action(
                candidate.spec.action,
                BuildContext(
                    policy_name=state.name,
                    test_actions_enabled=self.shared.settings.enable_test_actions,
                    secrets=secrets,
                    pool_size=_pool_size(candidate),
                    inventory_listener=self._listener(candidate),
                    exec_commands_dir=self.shared.settings.exec_commands_dir,
                    allow_insecure_webhooks=self.shared.settings.allow_insecure_webhooks,
                    logger=logging.getLogger(f"{__name__}.{state.name}"),
                ),
            )
        except ActionConfigError as err:
            return policy.Verdict.rejected(err.reason, err.message)
        await self._adopt_inventory(state, candidate, built.action)
        old = state.action
        state.action = built.action
        state.action_kind = candidate.spec.action.kind.value
        state.settings = verdict.settings
        state.accepted_generation = state.generation
        state.secrets_digest = digest
        state.action_description = built.description
        if old is not None and old is not built.action:
            await close_action(old)
        log.info("built %s", built.description, extra={"object": f"policy {state.name}"})
        return policy.with_action(verdict, built.description)

    def _listener(self, candidate: DeviceAttachPolicy) -> Any:
        test = candidate.spec.action.test
        if candidate.spec.action.kind is not ActionKind.TEST or test is None or not test.inventory_config_map:
            return None
        return self.shared.mirror.listener(test.inventory_config_map, candidate.metadata.name)

    async def _adopt_inventory(
        self, state: PolicyState, candidate: DeviceAttachPolicy, action: object
    ) -> None:
        """A new Test action instance continues the inventory of the previous one, or of the
        ConfigMap it was mirrored into (after a restart)."""
        if not isinstance(action, TestAction):
            return
        if isinstance(state.action, TestAction):
            action.inventory = state.action.inventory
            action.calls = state.action.calls
            return
        test = candidate.spec.action.test
        if test is not None and test.inventory_config_map:
            data = await self.shared.mirror.load(test.inventory_config_map)
            action.load(own_inventory(data, candidate.spec.driver))

    async def _secrets(
        self, state: PolicyState, candidate: DeviceAttachPolicy
    ) -> tuple[dict[str, dict[str, str]], str]:
        webhook = candidate.spec.action.webhook
        if candidate.spec.action.kind is not ActionKind.WEBHOOK or webhook is None:
            return {}, ""
        fresh = time.monotonic() - state.secrets_read_at < RECHECK_SECONDS
        if fresh and state.accepted_generation == state.generation:
            return {}, state.secrets_digest  # unchanged and recently read: no rebuild
        refs = (webhook.ca_secret_ref, webhook.client_cert_secret_ref, webhook.bearer_token_secret_ref)
        names = {ref.name for ref in refs if ref is not None}
        secrets: dict[str, dict[str, str]] = {}
        for name in sorted(names):
            try:
                path = SECRETS.path(name, namespace=self.shared.settings.namespace)
                body = await self.shared.client.get(path)
            except ApiError as err:
                if err.not_found:
                    continue  # reported as SecretNotFound by the builder
                raise
            secrets[name] = {
                k: base64.b64decode(v).decode("utf-8", errors="replace")
                for k, v in (body.get("data") or {}).items()
            }
        state.secrets_read_at = time.monotonic()
        digest = hashlib.sha256(json.dumps(secrets, sort_keys=True).encode()).hexdigest()
        return secrets, digest

    # -- authorization -------------------------------------------------------------------------

    async def _authorize(self, state: PolicyState) -> Condition:
        if not state.driver:
            return policy.authorized_condition("", None, state.generation, "the policy names no driver")
        # A missing grant is usually being fixed right now (kubectl dra grant-driver): look
        # again soon, as RBAC changes cannot be watched with the attacher's permissions.
        period = RECHECK_SECONDS if state.authorized else UNAUTHORIZED_RECHECK_SECONDS
        stale = time.monotonic() - state.authorized_at >= period
        if state.authorized is None or stale or state.authorized_generation != state.generation:
            try:
                review_body = policy.access_review(state.driver)
                review = await self.shared.client.create(SELF_SUBJECT_ACCESS_REVIEWS.path(), review_body)
                status = review.get("status") or {}
                state.authorized = bool(status.get("allowed"))
                state.authorized_detail = str(status.get("reason") or "")
            except ApiError as err:
                state.authorized = None
                state.authorized_detail = str(err)
            state.authorized_at = time.monotonic()
            state.authorized_generation = state.generation
        return policy.authorized_condition(
            state.driver,
            state.authorized,
            state.generation,
            state.authorized_detail,
            namespace=self.shared.settings.namespace,
        )

    # -- finalizer and status --------------------------------------------------------------------

    async def _finalizer(self, state: PolicyState, accepted: bool) -> Requeue | None:
        has = POLICY_FINALIZER in state.finalizers
        if not state.deleting and accepted and not has:
            return await self._set_finalizers(state, (*state.finalizers, POLICY_FINALIZER))
        if state.deleting and has and not self._referenced(state.name):
            removed = tuple(f for f in state.finalizers if f != POLICY_FINALIZER)
            if stop := await self._set_finalizers(state, removed):
                return stop
            if state.action is not None:
                await close_action(state.action)
                state.action = None
        return None

    def _referenced(self, name: str) -> bool:
        return any(r.spec.policy.name == name for r in self.shared.cache.records.all())

    async def _set_finalizers(self, state: PolicyState, finalizers: tuple[str, ...]) -> Requeue | None:
        def patched(_: Write, reply: Any) -> None:
            meta = reply.get("metadata") or {}
            state.finalizers = tuple(meta.get("finalizers") or ())
            state.resource_version = str(meta.get("resourceVersion", state.resource_version))

        plan = policy.finalizer_plan(state.name, state.resource_version, finalizers)
        result = await execute(plan, self.shared, replied=patched)
        return result if isinstance(result, Requeue) else None

    async def _write_status(self, state: PolicyState, conditions: tuple[Condition, ...]) -> None:
        records = ledger.record_counts(self.shared.cache.records.all(), state.name)
        now = format_time(datetime.now(UTC))
        plan = policy.status_plan(policy_ref(state), state.status, state.generation, conditions, records, now)

        def applied(_: Write, reply: Any) -> None:
            state.status = dict(reply.get("status") or {})

        await execute(plan, self.shared, replied=applied)


def own_inventory(data: Mapping[str, str], driver: str) -> dict[str, str]:
    """The entries of one driver in a shared inventory ConfigMap (the device is ``driver/pool/name``)."""
    own = {}
    for key, raw in data.items():
        try:
            device = json.loads(raw).get("device", "")
        except (ValueError, AttributeError):
            continue
        if isinstance(device, str) and device.startswith(f"{driver}/"):
            own[key] = raw
    return own
