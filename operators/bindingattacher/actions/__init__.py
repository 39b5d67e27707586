"""Attach-action adapters behind one interface (spec §10).

``base`` defines the contract, ``document`` the wire form, ``calls`` runs a call with a timeout
and maps exceptions onto outcomes, and ``factory`` builds the adapter a policy asks for:
``python`` (entry points), ``webhook`` (HTTPS), ``execcommand`` (a local command), ``noop`` and
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
