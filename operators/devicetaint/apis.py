"""Which API versions the devicetaint operator uses, found through discovery (spec §3).

ResourceClaims and ResourceSlices must be served as ``resource.k8s.io/v1``; without them the operator
reports not ready and asks again later. DeviceTaintRules are optional: the first of ``v1`` (1.37),
``v1beta2`` (1.36, off by default) and ``v1alpha3`` whose discovery document lists them is watched, and
their status is written through that same version if it lists ``devicetaintrules/status``. Without any
version, rules are ignored and ResourceSlice taints still evict.

The field names the operator reads are the same in the three versions, so one projection serves all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from operators.core.discovery import ServedResource, resources_of
from operators.dra import taintrules
from operators.dra.api import GROUP, VERSION

if TYPE_CHECKING:
    from operators.core.runtime import Runtime


@dataclass(frozen=True)
class ServedApis:
    claims_and_slices: bool
    """Whether ``resource.k8s.io/v1`` serves both ResourceClaims and ResourceSlices."""
    rules: ServedResource | None
    """The DeviceTaintRule version to watch, or None when no version serves them."""

    @property
    def rule_status_writable(self) -> bool:
        return self.rules is not None and "status" in self.rules.subresources


async def discover(runtime: Runtime) -> ServedApis:
    """The rule version is the runtime's, found for the watch that names :data:`taintrules.VERSIONS`."""
    core = await resources_of(runtime.client, GROUP, VERSION)
    rules = runtime.served_resource(GROUP, taintrules.PLURAL)
    return ServedApis(claims_and_slices={"resourceclaims", "resourceslices"} <= core.keys(), rules=rules)
