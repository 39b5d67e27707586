"""Entry point of ``dra-operators run taintselector``: the definition the runtime starts, and the API calls.

``API_CALLS`` lists every (API group, resource, verb) the process uses, kopf's watches and the leader
election included; ``manifests/taintselector/rbac.yaml`` grants exactly these. Rules are created,
patched and deleted, never read one by one (the watch cache serves), and selectors need no
``finalizers`` or ``update``: the owner references of the rules set no ``blockOwnerDeletion``.
"""

from __future__ import annotations

from operators.core import PROJECT_GROUP
from operators.core.runtime import RUNTIME_API_CALLS, OperatorDefinition, Watch
from operators.dra import api, taintrules
from operators.dra.api import GROUP

from .controller import DEFAULT_WORKERS, TaintSelectorController
from .models import PLURAL, VERSION
from .settings import Settings

DEFINITION = OperatorDefinition(
    name="taintselector",
    settings_class=Settings,
    default_workers=DEFAULT_WORKERS,
    make_controller=TaintSelectorController,
    # Our own selectors by kopf, the rest by the runtime's informer; none of them gets a kopf
    # annotation or finalizer (the selectors' status is written by the controller).
    watches=(
        Watch(
            PROJECT_GROUP,
            PLURAL,
            TaintSelectorController.upsert_selector,
            TaintSelectorController.delete_selector,
            VERSION,
            required=True,
        ),
        Watch(
            GROUP,
            "resourceslices",
            TaintSelectorController.upsert_slice,
            TaintSelectorController.delete_slice,
            api.VERSION,
            required=True,
        ),
        Watch(
            GROUP,
            "deviceclasses",
            TaintSelectorController.upsert_class,
            TaintSelectorController.delete_class,
            api.VERSION,
            required=True,
        ),
        Watch(
            GROUP,
            taintrules.PLURAL,
            TaintSelectorController.upsert_rule,
            TaintSelectorController.delete_rule,
            versions=taintrules.VERSIONS,
        ),
        Watch(
            GROUP,
            "resourceclaims",
            TaintSelectorController.upsert_claim,
            TaintSelectorController.delete_claim,
            api.VERSION,
        ),
    ),
)

API_CALLS: list[tuple[str, str, str]] = [
    # The claims are watched for the dry run of effect None, which counts those on the selected devices.
    *DEFINITION.watch_calls,
    (PROJECT_GROUP, f"{PLURAL}/status", "patch"),
    (GROUP, taintrules.PLURAL, "create"),
    (GROUP, taintrules.PLURAL, "patch"),
    (GROUP, taintrules.PLURAL, "delete"),
    *RUNTIME_API_CALLS,
]
