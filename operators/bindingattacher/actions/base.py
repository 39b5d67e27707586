"""The attach-action contract shared by every adapter (spec §10.1-§10.3).

An action has three operations, ``attach``, ``detach`` and an optional ``probe``, each taking
an :class:`AttachRequest` and answering an :class:`AttachResult`. The outcome vocabulary is
deliberately small: the state machine only needs to know whether to advance, poll again, back
off, or give up.

Exception hierarchy::

    Exception
    ├── PermanentActionError   raised by an action: same as returning PERMANENT_ERROR
    └── ActionConfigError      raised while building an action: the policy is not Accepted;
                               carries the condition reason (UnknownEntryPoint, ...)

Any other exception escaping an action counts as TRANSIENT_ERROR.

The types here are the stable public API for third-party Python actions; they are re-exported
by :mod:`operators.bindingattacher.api`.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

ENTRY_POINT_GROUP = "dra_operators.attach_actions"


class Outcome(enum.Enum):
    SUCCEEDED = "Succeeded"
    IN_PROGRESS = "InProgress"
    TRANSIENT_ERROR = "TransientError"
    PERMANENT_ERROR = "PermanentError"


class Operation(enum.StrEnum):
    ATTACH = "Attach"
    PROBE = "Probe"
    DETACH = "Detach"


class PermanentActionError(Exception):
    """Raised by an action when retrying cannot help."""


WRITABLE_TMP_HINT = (
    "the operator needs a writable temporary directory (an emptyDir at /tmp, as manifests/ mounts, or TMPDIR)"
)


class ActionConfigError(Exception):
    """The action of a policy cannot be built; ``reason`` becomes the ``Accepted`` reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str
    generation: int = 0
    annotations: Mapping[str, str] = field(default_factory=dict)
    """Only the claim's ``test.dra-operators.io/*`` annotations, and only with test actions
    enabled. Read by the Test action; never part of the wire document."""


@dataclass(frozen=True)
class DeviceInfo:
    driver: str
    pool: str
    name: str
    share_id: str | None = None
    request: str = ""
    admin_access: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    binds_to_node: bool | None = None
    attributes: Mapping[str, Any] | None = None
    capacity: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class NodeInfo:
    name: str
    source: str
    provider_id: str = ""
    system_uuid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class PolicyRef:
    name: str
    generation: int = 0


@dataclass(frozen=True)
class AttachRequest:
    operation: str
    """``Attach``, ``Probe`` or ``Detach`` (an :class:`Operation`)."""
    attachment_key: str
    attempt: int
    deadline: datetime | None
    """None for Detach, which has no deadline."""
    timeout_seconds: float
    claim: ClaimRef
    allocation_timestamp: datetime
    device: DeviceInfo
    node: NodeInfo | None
    consumers: tuple[PodRef, ...] = ()
    policy: PolicyRef = PolicyRef(name="")
    previous_data: Mapping[str, Any] | None = None
    detach_reason: str | None = None


@dataclass(frozen=True)
class AttachResult:
    outcome: Outcome
    message: str = ""
    data: Mapping[str, Any] | None = None
    retry_after_seconds: float | None = None


@dataclass(frozen=True)
class ActionContext:
    """Given to Python action factories."""

    policy_name: str
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("dra_operators.bindingattacher"))


@runtime_checkable
class AttachAction(Protocol):
    """Required operations. Optional ones are looked up by name: ``probe(request)``,
    ``validate()`` (raise ValueError to reject the policy) and ``close()``."""

    async def attach(self, request: AttachRequest) -> AttachResult: ...

    async def detach(self, request: AttachRequest) -> AttachResult: ...


class BaseAction:
    """The base class of an action, and the one seam the attacher calls through.

    Small on purpose, like an HTTP client's transport base class: a subclass implements
    ``attach`` and ``detach``; one that can poll a running attach adds ``probe`` (and may switch
    it off with ``probe_enabled``); ``close`` releases what the instance holds (connections,
    processes) and is called when the policy's next generation replaces it or the policy goes.
    The built-in actions derive from it. A third-party action may too, or may satisfy
    :class:`AttachAction` by duck typing: the attacher calls both the same way.
    """

    async def attach(self, request: AttachRequest) -> AttachResult:
        raise NotImplementedError

    async def detach(self, request: AttachRequest) -> AttachResult:
        raise NotImplementedError

    async def close(self) -> None:
        """Release what the instance holds; nothing by default."""


def supports_probe(action: object) -> bool:
    """Whether the action has a probe; built-ins may switch it off with ``probe_enabled``."""
    enabled = getattr(action, "probe_enabled", None)
    if enabled is not None:
        return bool(enabled)
    return callable(getattr(action, "probe", None))
