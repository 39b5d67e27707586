"""Which API versions the devicetaint operator uses, as the runtime's discovery found them (spec §3).

ResourceClaims and ResourceSlices must be served as ``resource.k8s.io/v1``: their watches are required
(:data:`.operator.DEFINITION`), so without them the runtime reports not ready and asks again later.
DeviceTaintRules are optional: the first of ``v1`` (1.37), ``v1beta2`` (1.36, off by default) and
``v1alpha3`` whose discovery document lists them is watched, and their status is written through that
same version if it lists ``devicetaintrules/status``. Without any version, rules are ignored and
ResourceSlice taints still evict.

The field names the operator reads are the same in the three versions, so one projection serves all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from operators.core.discovery import ServedResource
from operators.dra import taintrules
from operators.dra.api import GROUP

if TYPE_CHECKING:
    from operators.core.runtime import Runtime


@dataclass(frozen=True)
class ServedApis:
    rules: ServedResource | None
    """The DeviceTaintRule version to watch, or None when no version serves them."""

    @property
    def rule_status_writable(self) -> bool:
        return self.rules is not None and "status" in self.rules.subresources


def served_apis(runtime: Runtime) -> ServedApis:
    """The rule version is the runtime's, found for the watch that names :data:`taintrules.VERSIONS`."""
    return ServedApis(rules=runtime.served_resource(GROUP, taintrules.PLURAL))
