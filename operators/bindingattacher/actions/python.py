"""Python actions loaded through the entry-point group ``dra_operators.attach_actions`` (§10.3).

The policy names an entry point; the object behind it is a factory
``factory(config, context) -> AttachAction``. Name resolution, import, construction and the
action's own ``validate()`` all happen when the policy is accepted, so that every problem is
reported on the policy (``UnknownEntryPoint``, ``EntryPointLoadFailed``,
``InvalidActionConfig``) instead of surfacing later as failed attaches.

``entry_points`` is a parameter so that tests and embedders can supply entry points without
installing a distribution.
"""

from __future__ import annotations

import importlib.metadata
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .base import ENTRY_POINT_GROUP, ActionConfigError, ActionContext

EntryPoints = Callable[[], Iterable[importlib.metadata.EntryPoint]]

MAX_CONFIG_BYTES = 16384


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
