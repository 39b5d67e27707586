"""The step protocol between the pure sync planners and the thin I/O layer.

A sync is a generator: it yields one :data:`Action` at a time, receives that action's
:data:`Reply`, and finally returns a :data:`~operators.core.reconcile.Result`. This keeps
the sequential logic of the spec (create, then use the created name for the next entry;
update the status, then remove the finalizer from the returned object) in one readable
function, while every API call, Event and metric stays outside it. Tests drive a planner
with scripted replies.

Every action gets a reply: API calls get :class:`Ok` (with the returned object, if any)
or :class:`Failed`; notices (Events, metric increments, log lines) always get ``Ok()``.

The planner's final value is the sync's :data:`~operators.core.reconcile.Result`, which the
work queue acts on. A :class:`~operators.core.reconcile.GiveUp` is for input that cannot change
by itself, so only the next watch event re-evaluates it (spec section 6).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from operators.core.reconcile import Result

# Actions: API calls.


@dataclass(frozen=True)
class CreateClaim:
    """``POST /apis/resource.k8s.io/v1/namespaces/<ns>/resourceclaims``; replies with the new claim."""

    namespace: str
    body: dict[str, Any]


@dataclass(frozen=True)
class ApplyPodStatus:
    """Server-side apply on ``pods/<name>/status``, our field manager, ``force=true``."""

    namespace: str
    name: str
    body: dict[str, Any]


@dataclass(frozen=True)
class ApplyPodGroupStatus:
    """Server-side apply on ``podgroups/<name>/status``, our field manager, ``force=true``."""

    namespace: str
    name: str
    body: dict[str, Any]


@dataclass(frozen=True)
class PutClaimStatus:
    """``PUT .../resourceclaims/<name>/status`` of the full object; replies with the result."""

    namespace: str
    name: str
    body: dict[str, Any]


@dataclass(frozen=True)
class PutClaim:
    """``PUT .../resourceclaims/<name>`` of the full object; replies with the result."""

    namespace: str
    name: str
    body: dict[str, Any]


@dataclass(frozen=True)
class DeleteClaim:
    """``DELETE .../resourceclaims/<name>`` with ``preconditions.uid``."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class GetPod:
    """Live ``GET /api/v1/namespaces/<ns>/pods/<name>``; replies with the pod or a 404."""

    namespace: str
    name: str


@dataclass(frozen=True)
class GetPodGroup:
    """Live ``GET`` of a PodGroup by name; replies with the group or a 404."""

    namespace: str
    name: str


@dataclass(frozen=True)
class GetClaim:
    """Live ``GET`` of a claim by name; replies with the claim or a 404."""

    namespace: str
    name: str


# Actions: notices.


@dataclass(frozen=True)
class EmitEvent:
    """A core/v1 Event on a pod or a PodGroup, de-duplicated by the events layer (spec section 9)."""

    namespace: str
    name: str
    uid: str
    type: str
    reason: str
    message: str
    api_version: str = "v1"
    kind: str = "Pod"


@dataclass(frozen=True)
class CountClaimCreate:
    """One increment of ``dra_operators_resourceclaim_creates_total``; the owner labels are those
    of the claim's controller: ``("", "Pod")`` or ``("scheduling.k8s.io", "PodGroup")``."""

    status: str
    admin_access: str
    owner_api_group: str = ""
    owner_api_kind: str = "Pod"


@dataclass(frozen=True)
class Log:
    message: str
    values: Mapping[str, str] = field(default_factory=dict)
    level: int = logging.INFO


Action = (
    CreateClaim
    | ApplyPodStatus
    | ApplyPodGroupStatus
    | PutClaimStatus
    | PutClaim
    | DeleteClaim
    | GetPod
    | GetPodGroup
    | GetClaim
    | EmitEvent
    | CountClaimCreate
    | Log
)


# Replies.


@dataclass(frozen=True)
class Ok:
    body: dict[str, Any] | None = None


@dataclass(frozen=True)
class Failed:
    """An API error: ``code`` is the HTTP status, 0 for timeouts and connection errors.

    ``message`` is the returned Status's ``message``, verbatim; ``retry_after`` comes
    from a 429's ``Retry-After`` header.
    """

    code: int
    message: str
    retry_after: float | None = None

    @property
    def not_found(self) -> bool:
        return self.code == 404


Reply = Ok | Failed


Plan = Generator[Action, Reply, Result]
"""What a planner returns: yields actions, receives replies, returns the outcome."""


def drive(plan: Plan, execute: Callable[[Action], Reply]) -> Result:
    """Run a plan with a synchronous executor (tests, tools)."""
    try:
        action = next(plan)
        while True:
            action = plan.send(execute(action))
    except StopIteration as stop:
        outcome: Result = stop.value
        return outcome


async def drive_async(plan: Plan, execute: Callable[[Action], Awaitable[Reply]]) -> Result:
    """Run a plan with the operator's asynchronous executor.

    An exception from ``execute`` (cancellation, a bug) propagates after closing the plan.
    """
    try:
        action = next(plan)
        while True:
            action = plan.send(await execute(action))
    except StopIteration as stop:
        outcome: Result = stop.value
        return outcome
    finally:
        plan.close()
