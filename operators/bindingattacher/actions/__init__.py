"""Attach-action adapters behind one interface (spec §10).

``base`` defines the contract and :class:`~.base.BaseAction`, the one class every adapter
derives from; ``calls`` runs a call with a timeout, maps exceptions onto outcomes and holds the
wire form of requests and responses; ``factory`` builds the adapter a policy asks for: a
Python entry point, ``webhook`` (HTTPS), ``execcommand`` (a local command), Noop and
``testaction``. These are I/O adapters, so they are async, but none of them talks to the
Kubernetes API.
"""

from .base import (
    ENTRY_POINT_GROUP,
    ActionConfigError,
    ActionContext,
    AttachAction,
    AttachRequest,
    AttachResult,
    BaseAction,
    Operation,
    Outcome,
    PermanentActionError,
    supports_probe,
)
from .calls import CallOutcome, close_action, invoke
from .factory import BuildContext, BuiltAction, build_action

__all__ = [
    "ENTRY_POINT_GROUP",
    "ActionConfigError",
    "ActionContext",
    "AttachAction",
    "AttachRequest",
    "AttachResult",
    "BaseAction",
    "BuildContext",
    "BuiltAction",
    "CallOutcome",
    "Operation",
    "Outcome",
    "PermanentActionError",
    "build_action",
    "close_action",
    "invoke",
    "supports_probe",
]
