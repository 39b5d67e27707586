"""Building the action a policy asks for: entry points, the built-in adapters, and Noop.

Everything that can be wrong with an action is found here, when the policy is evaluated (spec
§10, §21.3 semantic checks), and raised as :class:`~.base.ActionConfigError` carrying the
``Accepted=False`` reason. The result also carries the text of the ``Accepted=True`` message,
which says what the action will do. Secrets are passed in already read (name -> decoded data,
operator namespace only): reading them is the runtime's job, and keeping the I/O out makes
every rule here testable.

Python actions are loaded through the entry-point group ``dra_operators.attach_actions``
(§10.3). The policy names an entry point; the object behind it is a factory
``factory(config, context) -> AttachAction``. Name resolution, import, construction and the
action's own ``validate()`` all happen when the policy is accepted, so that every problem is
reported on the policy (``UnknownEntryPoint``, ``EntryPointLoadFailed``,
``InvalidActionConfig``) instead of surfacing later as failed attaches. ``entry_points`` is a
parameter so that tests and embedders can supply entry points without installing a
distribution.

The built-in ``Noop`` action (spec §10.6) reports devices ready without attaching anything,
for demos and for drivers that need binding conditions but have nothing to attach.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import inspect
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from operators.dra.durations import format_seconds, parse_go_duration

from ..models import ActionKind, ActionSpec, NoopActionSpec, TestActionSpec, WebhookActionSpec
from .base import (
    ENTRY_POINT_GROUP,
    ActionConfigError,
    ActionContext,
    AttachRequest,
    AttachResult,
    BaseAction,
    Outcome,
)
from .execcommand import ExecAction, command_problem, env_problem
from .testaction import InventoryListener, TestAction, TestParameters
from .webhook import WebhookAction, WebhookSettings, check_url, secret_value, shown_url, ssl_context

EntryPoints = Callable[[], Iterable[importlib.metadata.EntryPoint]]

MAX_CONFIG_BYTES = 16384
# A connection that takes longer is not coming: the call's own timeout still applies on top.
MAX_CONNECT_SECONDS = 60.0


def installed_entry_points() -> Iterable[importlib.metadata.EntryPoint]:
    return importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)


def load_factory(name: str, entry_points: EntryPoints = installed_entry_points) -> Callable[..., Any]:
    matches = [ep for ep in entry_points() if ep.name == name and ep.group == ENTRY_POINT_GROUP]
    if not matches:
        raise ActionConfigError(
            "UnknownEntryPoint",
            f"spec.action.python.entryPoint: no entry point {name!r} in group {ENTRY_POINT_GROUP}",
        )
    try:
        factory = matches[0].load()
    except Exception as exc:
        raise ActionConfigError(
            "EntryPointLoadFailed",
            f"spec.action.python.entryPoint: loading {name!r} ({matches[0].value}) failed: "
            f"{type(exc).__name__}: {exc}",
        ) from exc
    if not callable(factory):
        raise ActionConfigError(
            "EntryPointLoadFailed", f"spec.action.python.entryPoint: {name!r} is not callable"
        )
    return factory  # type: ignore[no-any-return]


async def build_python_action(
    entry_point: str,
    config: Mapping[str, Any],
    context: ActionContext,
    entry_points: EntryPoints = installed_entry_points,
) -> object:
    factory = load_factory(entry_point, entry_points)
    try:
        action = factory(config, context)
        if inspect.isawaitable(action):
            action = await action
    except Exception as exc:
        raise ActionConfigError(
            "InvalidActionConfig",
            f"spec.action.python: factory {entry_point!r} failed: {type(exc).__name__}: {exc}",
        ) from exc
    for required in ("attach", "detach"):
        if not callable(getattr(action, required, None)):
            raise ActionConfigError(
                "InvalidActionConfig",
                f"spec.action.python: {entry_point!r} built an action without {required}()",
            )
    validate = getattr(action, "validate", None)
    if callable(validate):
        try:
            outcome = validate()
            if inspect.isawaitable(outcome):
                await outcome
        except ValueError as exc:
            raise ActionConfigError("InvalidActionConfig", f"spec.action.python.config: {exc}") from exc
    return action


NOOP_DESCRIPTION = "no-op action: devices are reported ready without any attachment"


class NoopAction(BaseAction):
    probe_enabled = False

    def __init__(self, delay_seconds: float = 0.0) -> None:
        self.delay_seconds = delay_seconds

    async def attach(self, request: AttachRequest) -> AttachResult:
        if self.delay_seconds > 0:
            await asyncio.sleep(self.delay_seconds)
        return AttachResult(Outcome.SUCCEEDED, data={"action": "noop"})

    async def detach(self, request: AttachRequest) -> AttachResult:
        return AttachResult(Outcome.SUCCEEDED, data={"action": "noop"})


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SUB_OBJECTS = {
    ActionKind.PYTHON: "python",
    ActionKind.WEBHOOK: "webhook",
    ActionKind.EXEC: "exec",
    ActionKind.NOOP: "noop",
    ActionKind.TEST: "test",
}


@dataclass(frozen=True)
class BuildContext:
    policy_name: str
    test_actions_enabled: bool = False
    secrets: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    pool_size: int = 30
    """``concurrency.maxAttaches + concurrency.maxDetaches`` (webhook connection pool)."""
    entry_points: EntryPoints = installed_entry_points
    inventory_listener: InventoryListener | None = None
    # --exec-commands-dir: the only commands an Exec action may run ("" refuses Exec).
    exec_commands_dir: str = ""
    # --allow-insecure-webhooks: plain HTTP (with the policy's allowInsecureHTTP) and URL credentials.
    allow_insecure_webhooks: bool = False
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("dra_operators.bindingattacher"))


@dataclass(frozen=True)
class BuiltAction:
    action: object
    description: str
    """The ``Accepted=True`` message."""


def _invalid(message: str) -> ActionConfigError:
    return ActionConfigError("InvalidActionConfig", message)


def _seconds(text: str, path: str) -> float:
    try:
        return parse_go_duration(text).total_seconds()
    except ValueError as exc:
        raise _invalid(f"{path}: {exc}") from exc


def _capped_seconds(text: str, path: str, most: float) -> float:
    seconds = _seconds(text, path)
    if seconds > most:
        raise _invalid(f"{path}: {text} must be at most {format_seconds(timedelta(seconds=most))}")
    return seconds


def _check_sub_objects(spec: ActionSpec) -> None:
    wanted = _SUB_OBJECTS[spec.kind]
    extra = [name for name in _SUB_OBJECTS.values() if name != wanted and getattr(spec, name) is not None]
    if extra:
        raise _invalid(f"spec.action: kind {spec.kind.value} must not set {', '.join(extra)}")


async def build_action(spec: ActionSpec, context: BuildContext) -> BuiltAction:
    _check_sub_objects(spec)
    match spec.kind:
        case ActionKind.PYTHON:
            return await _python(spec, context)
        case ActionKind.WEBHOOK:
            return _webhook(spec.webhook, context)
        case ActionKind.EXEC:
            return _exec(spec, context)
        case ActionKind.NOOP:
            noop = spec.noop or NoopActionSpec()
            return BuiltAction(NoopAction(_seconds(noop.delay, "spec.action.noop.delay")), NOOP_DESCRIPTION)
        case ActionKind.TEST:
            return _test(spec.test or TestActionSpec(), context)


async def _python(spec: ActionSpec, context: BuildContext) -> BuiltAction:
    python = spec.python
    if python is None or not python.entry_point:
        raise _invalid("spec.action.python.entryPoint is required for kind Python")
    size = len(json.dumps(python.config, separators=(",", ":")).encode("utf-8"))
    if size > MAX_CONFIG_BYTES:
        raise _invalid(f"spec.action.python.config: {size} bytes exceeds the {MAX_CONFIG_BYTES}-byte limit")
    action_context = ActionContext(policy_name=context.policy_name, logger=context.logger)
    action = await build_python_action(
        python.entry_point, python.config, action_context, context.entry_points
    )
    return BuiltAction(action, f"python action {python.entry_point}")


def _webhook(webhook: WebhookActionSpec | None, context: BuildContext) -> BuiltAction:
    if webhook is None or not webhook.url:
        raise _invalid("spec.action.webhook.url is required for kind Webhook")
    problem = check_url(webhook.url, webhook.allow_insecure_http, context.allow_insecure_webhooks)
    if problem:
        raise _invalid(problem)
    if webhook.ca_bundle and webhook.ca_secret_ref:
        raise _invalid("spec.action.webhook: set at most one of caBundle and caSecretRef")
    secrets = context.secrets
    ca = webhook.ca_bundle
    if webhook.ca_secret_ref is not None:
        ref = webhook.ca_secret_ref
        ca = secret_value(secrets, ref.name, ref.key or "ca.crt", "spec.action.webhook.caSecretRef")
    cert = key = None
    if webhook.client_cert_secret_ref is not None:
        name = webhook.client_cert_secret_ref.name
        cert = secret_value(secrets, name, "tls.crt", "spec.action.webhook.clientCertSecretRef")
        key = secret_value(secrets, name, "tls.key", "spec.action.webhook.clientCertSecretRef")
    token = None
    if webhook.bearer_token_secret_ref is not None:
        ref = webhook.bearer_token_secret_ref
        token = secret_value(
            secrets, ref.name, ref.key or "token", "spec.action.webhook.bearerTokenSecretRef"
        ).strip()
    secure = webhook.url.startswith("https://")
    settings = WebhookSettings(
        url=webhook.url,
        ssl_context=ssl_context(ca, cert, key) if secure else None,
        server_name=webhook.server_name or None,
        bearer_token=token or None,
        connect_timeout=_capped_seconds(
            webhook.connect_timeout, "spec.action.webhook.connectTimeout", MAX_CONNECT_SECONDS
        ),
        probe=webhook.probe,
        pool_size=max(context.pool_size, 1),
    )
    description = f"webhook action {shown_url(webhook.url)}"
    if not secure:
        description += "; InsecureTransport: plain HTTP is meant for test clusters only"
    return BuiltAction(WebhookAction(settings), description)


def _exec(spec: ActionSpec, context: BuildContext) -> BuiltAction:
    exec_spec = spec.exec
    command = exec_spec.command if exec_spec is not None else ()
    problem = command_problem(command, context.exec_commands_dir)
    if problem:
        raise ActionConfigError(*problem)
    env: dict[str, str] = {}
    for var in exec_spec.env if exec_spec is not None else ():
        why = env_problem(var.name) if ENV_NAME.fullmatch(var.name) else "not a variable name"
        if why:
            raise _invalid(f"spec.action.exec.env: {var.name!r} is not a permitted variable name: {why}")
        env[var.name] = var.value
    return BuiltAction(ExecAction(command, env), f"exec action {command[0]}")


def _test(test: TestActionSpec, context: BuildContext) -> BuiltAction:
    if not context.test_actions_enabled:
        raise ActionConfigError(
            "TestActionDisabled", "spec.action.kind: Test needs the operator flag --enable-test-actions"
        )
    try:
        params = TestParameters.of_spec(test)
    except ValueError as exc:
        raise _invalid(f"spec.action.test: {exc}") from exc
    action = TestAction(params=params, listener=context.inventory_listener)
    return BuiltAction(action, f"test action (attachOutcome={params.attach_outcome})")
