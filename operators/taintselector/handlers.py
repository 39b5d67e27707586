"""kopf wiring of the taint-selector operator: the watched kinds, and nothing else.

Every kind goes through :func:`operators.core.runtime.watch`, which stores nothing on the objects:
ResourceSlices, DeviceClasses and DeviceTaintRules never carry a kopf annotation or finalizer, and
neither do our own DeviceTaintSelectors (their status is written by the controller).
"""

from __future__ import annotations

import kopf

from operators.core import runtime
from operators.dra import taintrules

from .controller import CORE_VERSION, TaintSelectorController
from .models import GROUP, PLURAL, VERSION

registry = kopf.OperatorRegistry()
runtime.install_login(registry)

runtime.watch(
    registry,
    GROUP,
    VERSION,
    PLURAL,
    upsert=TaintSelectorController.upsert_selector,
    delete=TaintSelectorController.delete_selector,
)
runtime.watch(
    registry,
    taintrules.GROUP,
    CORE_VERSION,
    "resourceslices",
    upsert=TaintSelectorController.upsert_slice,
    delete=TaintSelectorController.delete_slice,
)
runtime.watch(
    registry,
    taintrules.GROUP,
    CORE_VERSION,
    "deviceclasses",
    upsert=TaintSelectorController.upsert_class,
    delete=TaintSelectorController.delete_class,
)


def watch_rules(version: str) -> None:
    """Add the DeviceTaintRule watch for the discovered version; called before kopf starts."""
    runtime.watch(
        registry,
        taintrules.GROUP,
        version,
        taintrules.PLURAL,
        upsert=TaintSelectorController.upsert_rule,
        delete=TaintSelectorController.delete_rule,
    )
