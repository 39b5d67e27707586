"""Public API for third-party Python attach actions (stable within v1alpha1, spec §10.3).

Register a factory ``factory(config, context) -> AttachAction`` under the entry-point group
``dra_operators.attach_actions`` and name it in ``DeviceAttachPolicy.spec.action.python``. The
action may derive from :class:`BaseAction`, as the built-in ones do, or satisfy
:class:`AttachAction` by duck typing.
"""

from .actions.base import (
    ENTRY_POINT_GROUP,
    ActionContext,
    AttachAction,
    AttachRequest,
    AttachResult,
    BaseAction,
    ClaimRef,
    DeviceInfo,
    NodeInfo,
    Operation,
    Outcome,
    PermanentActionError,
    PodRef,
    PolicyRef,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "ActionContext",
    "AttachAction",
    "AttachRequest",
    "AttachResult",
    "BaseAction",
    "ClaimRef",
    "DeviceInfo",
    "NodeInfo",
    "Operation",
    "Outcome",
    "PermanentActionError",
    "PodRef",
    "PolicyRef",
]
